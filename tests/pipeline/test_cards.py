"""The local runner on a machine of several cards: a multi-GPU job holds every card while it
runs, a single-GPU job waits for it, single-GPU jobs share the machine card by card. Real
subprocesses (a fake harness that reports the cards it got and when it held them)."""

from __future__ import annotations

import asyncio
import json

import pytest

from kernelcup.core.config import GpuConfig, Settings
from kernelcup.core.pipeline.runner import RunContext
from kernelcup.harness.spec import JobSpec, Mode, Progress, TaskConfig
from kernelcup.runners.cards import CardPool
from kernelcup.runners.local import LocalRunner, detect_cards

from .support import fake_harness

pytestmark = pytest.mark.timeout(60)


def settings() -> Settings:
    return Settings(gpus={
        "cpu": GpuConfig("cpu", "local", count=8),
        "H200": GpuConfig("H200", "local"),
        "H200x2": GpuConfig("H200x2", "local", count=2),
        "H200x4": GpuConfig("H200x4", "local", count=4),
        "H100x2": GpuConfig("H100x2", "local", count=2),
    })


def spec(job_id: int, world_size: int) -> JobSpec:
    return JobSpec(
        job_id=str(job_id), mode=Mode.TEST, task=TaskConfig(tests=[{"size": 8, "seed": 1}], world_size=world_size),
        files={"submission.py": ""}, submission_name="submission.py", timeout_s=5, device="cuda",
        result_key="ab" * 32,
    )


async def job(runner: LocalRunner, job_id: int, gpu: str, world_size: int, delay: float = 0.0) -> dict[str, object]:
    await asyncio.sleep(delay)

    async def on_progress(event: Progress) -> None:
        return None

    result = await runner.run(spec(job_id, world_size), RunContext(job_id, gpu, 30), on_progress)
    held: dict[str, object] = json.loads(result.stdout)
    return held


def runner(cards: int, seconds: float = 1.5, standby: int = 0) -> LocalRunner:
    return LocalRunner(settings(), harness_command=fake_harness("cards", "", str(seconds)), gpu="H200", cards=cards,
                       standby=standby)


def test_a_machine_serves_the_multi_card_entries_it_has_the_cards_for() -> None:
    assert runner(2).gpus() == ["H200", "H200x2"]
    assert runner(4).gpus() == ["H200", "H200x2", "H200x4"]
    assert runner(1).gpus() == ["H200"]


def test_nvidia_smi_lines_count_the_cards(tmp_path: object) -> None:
    query = ["printf", "NVIDIA H200\\nNVIDIA H200\\nNVIDIA H200\\n"]
    assert detect_cards(["H200", "H100"], query) == ("H200", 3)


async def test_a_multi_gpu_job_holds_every_card_and_a_single_gpu_job_waits_for_it() -> None:
    local = runner(2)
    multi, single = await asyncio.gather(job(local, 1, "H200x2", 2), job(local, 2, "H200", 0, delay=0.3))
    assert multi["cuda"] == "0,1"
    assert single["cuda"] in ("0", "1")
    assert float(str(single["began"])) >= float(str(multi["ended"])), (multi, single)
    assert local.cards is not None and local.cards.free == 2


async def test_a_multi_gpu_job_waits_until_every_card_is_free() -> None:
    local = runner(2)
    single, multi = await asyncio.gather(job(local, 1, "H200", 0), job(local, 2, "H200x2", 2, delay=0.3))
    assert float(str(multi["began"])) >= float(str(single["ended"])), (single, multi)


async def test_single_gpu_jobs_share_the_machine_card_by_card() -> None:
    local = runner(2)
    first, second = await asyncio.gather(job(local, 1, "H200", 0), job(local, 2, "H200", 0, delay=0.1))
    assert {first["cuda"], second["cuda"]} == {"0", "1"}
    assert float(str(second["began"])) < float(str(first["ended"]))  # at the same time


async def test_the_pool_keeps_arrival_order_so_a_waiting_multi_gpu_job_is_not_passed() -> None:
    pool = CardPool(2)
    first = await pool.take(whole_machine=False)
    order: list[str] = []

    async def take(name: str, whole: bool) -> None:
        cards = await pool.take(whole_machine=whole)
        order.append(name)
        await asyncio.sleep(0.05)
        await pool.give_back(cards)

    waiting = [asyncio.create_task(take("multi", True))]
    await asyncio.sleep(0.05)
    waiting.append(asyncio.create_task(take("single", False)))  # a card is free, but multi asked first
    await asyncio.sleep(0.05)
    assert order == []
    await pool.give_back(first)
    await asyncio.gather(*waiting)
    assert order == ["multi", "single"]


def test_the_operators_visible_devices_name_the_cards() -> None:
    pool = CardPool(2, "4,5,6")
    assert pool.visible_devices([0, 1]) == "4,5"


async def test_the_standby_waits_on_the_first_card_and_gives_way_to_a_multi_gpu_job() -> None:
    local = runner(2, seconds=0.1, standby=1)
    await local.start()
    try:
        waiting = local.standby_pid
        assert waiting is not None
        multi = await job(local, 1, "H200x2", 2)
        assert multi["cuda"] == "0,1" and multi["pid"] != waiting  # the standby was ended, not used
        assert not _alive(waiting)
        refilled = local.standby_pid
        assert refilled is not None and refilled != waiting
        single = await job(local, 2, "H200", 0)
        assert single["cuda"] == "0" and single["pid"] == refilled  # a lone single-GPU job takes it
    finally:
        await local.aclose()


def _alive(pid: int) -> bool:
    from pathlib import Path

    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
