"""The harness's pure parts: scoring, statistics, seeds, the channel, output transfer, checks."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import math
import os
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from kernelcup.harness import checking, scoring, stats, transfer
from kernelcup.harness.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolError
from kernelcup.harness.fingerprint import fingerprint, same
from kernelcup.harness.problem import PoisonUninitialized, normalize_check
from kernelcup.harness.seeds import SEED_LIMIT, SeedPlan
from kernelcup.harness.spec import CaseResult, Result, SystemInfo

# --- scoring -------------------------------------------------------------------------------


def test_geom_is_the_geometric_mean_of_the_medians() -> None:
    assert scoring.combine("geom", [1e-6, 4e-6]) == pytest.approx(2e-6)


def test_mean_and_last() -> None:
    assert scoring.combine("mean", [1.0, 3.0]) == 2.0
    assert scoring.combine("last", [1.0, 3.0]) == 3.0


def test_unknown_ranking_and_empty_medians_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown ranking_by"):
        scoring.combine("median", [1.0])
    with pytest.raises(ValueError, match="no benchmark medians"):
        scoring.combine("geom", [])
    with pytest.raises(ValueError, match="positive"):
        scoring.combine("geom", [0.0])


# --- statistics ----------------------------------------------------------------------------


def test_summary_of_known_samples() -> None:
    summary = stats.summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (summary.runs, summary.median, summary.mean, summary.min, summary.max) == (5, 3.0, 3.0, 1.0, 5.0)
    assert summary.std == pytest.approx(math.sqrt(2.5))
    assert summary.ci_low <= summary.median <= summary.ci_high


def test_the_median_interval_narrows_as_runs_grow() -> None:
    import random

    rng = random.Random(1)
    small = stats.summarize([100 + rng.gauss(0, 1) for _ in range(20)])
    large = stats.summarize([100 + rng.gauss(0, 1) for _ in range(2000)])
    assert large.relative_ci_width < small.relative_ci_width
    assert large.ci_low < 100 < large.ci_high


def test_stopping_rule_waits_for_min_runs_and_stops_when_tight() -> None:
    rule = stats.StopRule(min_runs=10, max_runs=1000, max_seconds=10, rel_ci_width=0.01)
    assert not stats.should_stop([100.0] * 9, 0.0, rule)
    assert stats.should_stop([100.0] * 10, 0.0, rule)
    noisy = [100.0 + (i % 7) * 10 for i in range(30)]
    assert not stats.should_stop(noisy, 0.0, rule)
    assert stats.should_stop(noisy, 10.0, rule)  # out of time
    assert stats.should_stop([float(i) for i in range(1000)], 0.0, rule)  # out of runs


def test_a_median_known_to_the_clocks_step_stops_however_short_the_call() -> None:
    """A 3.1 µs call read in the GPU record's 32 ns steps: 1% apart is one step, and the 0.5%
    interval ranked mode asks for is out of reach; within two steps is as well as it is known."""
    ranked = stats.StopRule(min_runs=20, max_runs=20_000, max_seconds=1.5, rel_ci_width=0.005)
    steps = [3136.0, 3168.0] * 20  # its median between two steps: the interval spans one
    assert not stats.should_stop(steps, 0.0, ranked)
    assert stats.should_stop(steps, 0.0, dataclasses.replace(ranked, abs_ci_width_ns=64.0))
    wide = [3104.0, 3300.0, 3500.0, 3700.0] * 10  # hundreds of ns apart: not known to a step
    assert not stats.should_stop(wide, 0.0, dataclasses.replace(ranked, abs_ci_width_ns=64.0))


# --- seeds ---------------------------------------------------------------------------------


def test_public_runs_use_the_case_seed_so_failures_reproduce() -> None:
    plan = SeedPlan(None)
    assert plan.case({"size": 4, "seed": 42}, "test") == {"size": 4, "seed": 42}


def test_public_timed_calls_get_fresh_but_reproducible_seeds() -> None:
    one, two = SeedPlan(None), SeedPlan(None)
    seeds = {one.case({"seed": 42}, "bench", i)["seed"] for i in range(1, 50)}
    assert len(seeds) == 49
    assert one.case({"seed": 42}, "bench", 7) == two.case({"seed": 42}, "bench", 7)


def test_ranked_seeds_depend_on_the_secret_and_the_job_and_fit_in_31_bits() -> None:
    case = {"size": 4, "seed": 42}
    a = SeedPlan(10**30 + 1, nonce=b"job-a").case(case, "test")["seed"]
    b = SeedPlan(10**30 + 2, nonce=b"job-a").case(case, "test")["seed"]
    c = SeedPlan(10**30 + 1, nonce=b"job-b").case(case, "test")["seed"]
    assert len({a, b, c, 42}) == 4
    assert all(0 <= s < SEED_LIMIT for s in (a, b, c))


def test_cases_without_a_seed_are_left_alone() -> None:
    assert SeedPlan(123).case({"size": 4}, "test", 3) == {"size": 4}


# --- channel -------------------------------------------------------------------------------


def _pair() -> tuple[Channel, Channel]:
    left, right = socket.socketpair()
    return Channel(left), Channel(right)


def test_messages_and_payloads_cross_the_channel() -> None:
    a, b = _pair()
    a.send({"msg": "output", "x": [1, 2]}, b"\x00\x01\x02")
    message, payload = b.recv(max_payload=3)
    assert message == {"msg": "output", "x": [1, 2]}
    assert payload == b"\x00\x01\x02"


def test_a_message_field_named_like_a_size_is_not_mistaken_for_a_payload() -> None:
    # The staging request on the CUDA path carries the buffer size it needs; it once shared
    # the payload key and deadlocked both processes on the GPU.
    a, b = _pair()
    a.send({"msg": "need_staging", "nbytes": 4096})
    message, payload = b.recv(deadline=time.monotonic() + 2)
    assert message == {"msg": "need_staging", "nbytes": 4096}
    assert payload == b""


def test_oversized_payloads_and_garbage_are_protocol_errors() -> None:
    a, b = _pair()
    a.send({"msg": "output"}, b"x" * 10)
    with pytest.raises(ProtocolError, match="exceeds"):
        b.recv(max_payload=9)
    c, d = _pair()
    c._sock.sendall(b"\xff\xfe not json\n")
    with pytest.raises(ProtocolError):
        d.recv()


def test_a_silent_peer_times_out_and_a_closed_one_is_reported() -> None:
    import time

    a, b = _pair()
    with pytest.raises(ChannelTimeout):
        b.recv(deadline=time.monotonic() + 0.05)
    a.close()
    with pytest.raises(ChannelClosed):
        b.recv(deadline=time.monotonic() + 1)


def test_a_huge_line_is_refused_rather_than_buffered_forever() -> None:
    a, b = _pair()

    def flood() -> None:
        with contextlib.suppress(OSError):
            a._sock.sendall(b"x" * (3 << 20))

    thread = threading.Thread(target=flood, daemon=True)
    thread.start()
    with pytest.raises(ProtocolError, match="too long"):
        b.recv()
    b.close()
    thread.join(timeout=5)


# --- output transfer -----------------------------------------------------------------------


def test_outputs_round_trip_as_plain_tensors() -> None:
    output: Any = (torch.arange(6, dtype=torch.int32).reshape(2, 3), [torch.ones(2).half(), 3.5], {"k": None})
    tree, tensors = transfer.flatten(output)
    placements, payload = transfer.pack(tensors, None)
    rebuilt: Any = transfer.unpack(tree, placements, payload, None, "cpu")
    assert torch.equal(rebuilt[0], output[0]) and rebuilt[0].dtype == torch.int32
    assert torch.equal(rebuilt[1][0], output[1][0]) and rebuilt[1][1] == 3.5
    assert rebuilt[2] == {"k": None}


def test_non_contiguous_outputs_keep_their_values() -> None:
    base = torch.arange(12.0).reshape(3, 4)
    tree, tensors = transfer.flatten(base.t())
    placements, payload = transfer.pack(tensors, None)
    assert torch.equal(transfer.unpack(tree, placements, payload, None, "cpu"), base.t())


def test_objects_that_are_not_tensors_or_plain_values_are_refused() -> None:
    class Sneaky:
        pass

    with pytest.raises(transfer.OutputError, match="Sneaky"):
        transfer.flatten([Sneaky()])


def test_a_lying_placement_is_refused() -> None:
    tree, tensors = transfer.flatten(torch.ones(4))
    placements, payload = transfer.pack(tensors, None)
    placements[0]["nbytes"] = 4
    with pytest.raises(transfer.OutputError):
        transfer.unpack(tree, placements, payload, None, "cpu")


# --- checks --------------------------------------------------------------------------------


def test_check_results_old_and_new() -> None:
    assert normalize_check((True, "")) == (True, "")
    assert normalize_check((False, "bad")) == (False, "bad")
    assert normalize_check("") == (True, "")
    assert normalize_check("mismatch") == (False, "mismatch")
    assert normalize_check(None) == (True, "")


def test_only_structure_is_refused_before_the_problem_check() -> None:
    expected = (torch.zeros(2, 3), torch.zeros(1))
    assert checking.refusals([torch.zeros(1)], expected) == ["output should be a sequence of 2 items"]
    assert checking.refusals((torch.zeros(3, 2), [1.0]), expected) == ["output[1] should be a torch.Tensor, got list"]
    assert checking.refusals((torch.zeros(3, 2).double(), torch.zeros(1)), expected) == []


def test_shape_and_dtype_differences_are_named_for_the_message() -> None:
    expected = (torch.zeros(2, 3), torch.zeros(1))
    assert checking.differences((torch.zeros(3, 2), torch.zeros(1).double()), expected) == [
        "output[0] has shape (3, 2), the reference (2, 3)",
        "output[1] has dtype torch.float64, the reference torch.float32",
    ]


def test_nan_where_the_reference_has_none_is_reported() -> None:
    got = torch.tensor([1.0, float("nan"), float("nan")])
    want = torch.tensor([1.0, 2.0, float("nan")])
    assert checking.nan_problems(got, want) == ["output has NaN in 1 of 3 elements, first at (1)"]


def test_uninitialized_tensors_made_while_generating_are_poisoned() -> None:
    with PoisonUninitialized():
        buffer = torch.empty(4)
        counts = torch.empty(3, dtype=torch.int32)
        data = torch.zeros(2)
    assert torch.isnan(buffer).all() and (counts == -1).all() and (data == 0).all()


def test_fingerprints_tell_different_data_apart() -> None:
    a = (torch.ones(3), 4)
    assert same(fingerprint(a), fingerprint((torch.ones(3), 4)))
    assert not same(fingerprint(a), fingerprint((torch.ones(3) * 2, 4)))
    assert not same(fingerprint(a), fingerprint((torch.ones(3), 5)))


def test_results_carry_the_isolation_field_through_json() -> None:
    result = Result(job_id="j", mode="test", status="passed", verdict="ok", system=SystemInfo(isolation="x"))  # type: ignore[arg-type]
    assert Result.from_json(result.to_json()).system.isolation == "x"


def test_a_result_from_a_later_harness_with_more_fields_is_read_for_what_it_shares() -> None:
    import json

    from kernelcup.harness.spec import CaseResult, SpecError

    result = Result(
        job_id="j",
        mode="benchmark",  # type: ignore[arg-type]
        status="passed",  # type: ignore[arg-type]
        verdict="ok",
        benchmarks=[CaseResult(case={"n": 1}, passed=True, median_ns=5.0)],
        phases_s={"ready": 1.5},
    )
    raw = json.loads(result.to_json())
    raw["added_later"] = 1
    raw["system"]["added_later"] = "x"
    raw["benchmarks"][0]["added_later"] = [1]
    read = Result.from_json(json.dumps(raw))
    assert read.benchmarks[0].median_ns == 5.0 and read.phases_s == {"ready": 1.5}
    raw["system"] = "not an object"
    with pytest.raises(SpecError, match="malformed result"):
        Result.from_json(json.dumps(raw))


class _NoWork:
    """A problem without flops/bytes: no roofline, so rounds combine on their samples alone."""

    def work(self, case: dict[str, Any]) -> tuple[None, None]:
        return None, None


def _round(times: list[float]) -> Any:
    from kernelcup.harness import benchmark

    summary = stats.summarize(times)
    return benchmark.CaseTiming(stats.case_result({"size": 1}, summary, ""), summary.median * 1e-9, times)


def test_two_agreeing_rounds_pool_their_samples() -> None:
    from kernelcup.harness import benchmark
    from kernelcup.harness.spec import GpuInfo

    first, second = _round([100.0, 100.5, 101.0]), _round([100.2, 100.6, 100.4])
    assert benchmark.rounds_agree([first, second])
    combined = benchmark.combine_rounds([first, second], _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]
    assert combined.result.runs == 6 and combined.median_s == pytest.approx(100.45e-9)


def test_a_round_too_noisy_to_trust_calls_for_a_third_even_when_the_medians_agree() -> None:
    from kernelcup.harness import benchmark

    steady = _round([100.0 + 0.01 * i for i in range(41)])
    noisy = _round([100.0 + (-1) ** i * 0.1 * i for i in range(41)])  # median 100, interval ±3%
    assert abs(steady.median_s - noisy.median_s) < 0.005 * steady.median_s
    assert benchmark.rounds_agree([steady, steady]) and not benchmark.rounds_agree([steady, noisy])


def test_a_host_bound_case_ranges_at_least_three_percent_either_side_once_combined() -> None:
    from kernelcup.harness import benchmark
    from kernelcup.harness.session import Timed
    from kernelcup.harness.spec import GpuInfo

    # 50 launches: a 300 µs span in which the GPU was busy 13 µs. One kernel: busy all its span.
    launches = [Timed(300_000.0, 250_000.0, 320_000.0, idle_share=0.96) for _ in range(9)]
    one_kernel = [Timed(200_000.0, 8_000.0, 230_000.0, idle_share=0.0) for _ in range(9)]
    assert benchmark.is_host_bound(launches, "cuda") and not benchmark.is_host_bound(one_kernel, "cuda")
    # A Triton launch's host time comes before its first kernel, outside the span: GPU-bound
    # however long the host took.
    triton = [Timed(43_000.0, 20_000.0, 70_000.0, idle_share=0.0) for _ in range(9)]
    assert not benchmark.is_host_bound(triton, "cuda")
    assert not benchmark.is_host_bound(launches, "cpu")
    # Launch-bound calls range ±3%; calls that wait on the GPU inside (a sync, .item()) ±25%,
    # since the host's pace after the wait is timed.
    assert benchmark.host_spread(launches, "cuda") == benchmark.HOST_BOUND_SPREAD
    synced = [dataclasses.replace(r, waited=True) for r in launches]
    assert benchmark.host_spread(synced, "cuda") == benchmark.HOST_SYNC_SPREAD
    assert benchmark.host_spread(one_kernel, "cuda") == 0.0
    first, second = _round([13_000.0, 13_010.0, 13_020.0]), _round([13_005.0, 13_015.0, 13_010.0])
    first.host_spread = second.host_spread = benchmark.HOST_BOUND_SPREAD
    assert benchmark.rounds_agree([first, second])  # the rounds themselves are judged as timed
    combined = benchmark.combine_rounds([first, second], _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]
    result = combined.result
    assert result.ci_low_ns is not None and result.ci_high_ns is not None and result.median_ns is not None
    assert result.ci_low_ns <= 0.97 * result.median_ns + 1e-6 and result.ci_high_ns >= 1.03 * result.median_ns - 1e-6
    assert "host-bound" in result.message and "±3%" in result.message
    alone = _round([13_000.0, 13_010.0, 13_020.0])
    alone.host_spread = benchmark.HOST_BOUND_SPREAD  # benchmark mode: one round
    single = benchmark.combine_rounds([alone], _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]
    assert single.result.ci_high_ns == pytest.approx(1.03 * 13_010.0)
    plain = _round([13_000.0, 13_010.0, 13_020.0])
    steady = benchmark.combine_rounds([plain], _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]
    assert steady.result.message == "" and steady.result.ci_high_ns is not None
    assert steady.result.ci_high_ns < 1.03 * 13_010.0


def test_the_timing_core_is_the_last_per_gpu_and_never_on_a_small_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcup.harness import cpus

    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset(range(16)))
    monkeypatch.setattr(cpus, "machine_gpus", lambda: 1)
    monkeypatch.setattr(cpus, "siblings", lambda core: {core})  # one thread per physical core
    monkeypatch.delenv(cpus.ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert cpus.timing_cpus() == (set(range(15)), 15)  # every other thread keeps every other core
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # shown GPU 1 alone: slots 0 and 1 are reserved
    assert cpus.timing_cpus() == (set(range(14)), 14)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-5a1c")  # a UUID: slot 0
    assert cpus.timing_cpus() == (set(range(15)), 15)
    monkeypatch.setenv(cpus.ENV, "7")
    assert cpus.timing_cpus() == (set(range(16)) - {7}, 7)
    for refused in ("off", "99", "3,7", "three"):
        monkeypatch.setenv(cpus.ENV, refused)
        assert cpus.timing_cpus() is None
    monkeypatch.setenv(cpus.ENV, "auto")
    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset({0, 1}))
    assert cpus.timing_cpus() is None


def test_a_timing_core_takes_its_whole_physical_core_where_the_processor_runs_two_threads_on_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelcup.harness import cpus

    assert cpus.parse_cpu_list("3,35") == {3, 35} and cpus.parse_cpu_list("14-15") == {14, 15}
    assert cpus.parse_cpu_list("7") == {7} and cpus.parse_cpu_list("x") is None and cpus.parse_cpu_list("1-") is None
    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset(range(16)))
    monkeypatch.setattr(cpus, "machine_gpus", lambda: 2)
    monkeypatch.delenv(cpus.ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    # Siblings numbered apart (CPU n and n + 8 share a physical core): GPU 0 times on 15 with 7
    # idle, GPU 1 on 14 with 6 idle, and every other thread keeps off all four.
    monkeypatch.setattr(cpus, "siblings", lambda core: {core % 8, core % 8 + 8})
    assert cpus.reserved_cores() == [15, 14]
    assert cpus.timing_cpus() == (set(range(16)) - {6, 7, 14, 15}, 15)
    assert cpus.describe([15], set(range(16)) - {6, 7, 14, 15}) == (
        "timed calls on CPU 15 (its sibling CPU 7 left idle), every other thread of the job on 12 other cores"
    )
    # Siblings side by side (2k and 2k + 1): the next GPU's core is the next physical core down.
    monkeypatch.setattr(cpus, "siblings", lambda core: {core - core % 2, core - core % 2 + 1})
    assert cpus.reserved_cores() == [15, 13]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cpus.timing_cpus() == (set(range(12)), 13)
    # Too few cores left once whole physical cores are held: not pinned.
    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset(range(6)))
    assert cpus.reserved_cores() == [] and cpus.timing_cpus() is None


def test_every_job_keeps_off_every_gpus_timing_core(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcup.harness import cpus

    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset(range(32)))
    monkeypatch.setattr(cpus, "machine_gpus", lambda: 8)
    monkeypatch.setattr(cpus, "siblings", lambda core: {core})
    monkeypatch.delenv(cpus.ENV, raising=False)
    assert cpus.reserved_cores() == list(range(31, 23, -1))  # one per GPU, from the last core down
    for slot in range(8):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", str(slot))
        # The job on GPU 3 times on core 28, and its other threads keep off all eight.
        assert cpus.timing_cpus() == (set(range(24)), 31 - slot)
    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset(range(10)))  # 9 spare cores, 8 GPUs: 1 left
    assert cpus.reserved_cores() == [] and cpus.timing_cpus() is None
    pinned: list[set[int]] = []

    def pin(cores: set[int]) -> bool:
        pinned.append(cores)
        return True

    monkeypatch.setattr(cpus, "pin_this_thread", pin)
    cpus.keep_off_timing_cores()
    assert pinned == []  # nothing reserved, nothing held
    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset(range(32)))
    cpus.keep_off_timing_cores()
    assert pinned == [set(range(24))]


def test_a_later_process_of_the_job_gets_the_same_core_after_the_harness_pinned_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kernelcup.harness import cpus

    monkeypatch.setattr(cpus, "PROCESS_CORES", frozenset(range(16)))
    monkeypatch.setattr(cpus, "machine_gpus", lambda: 1)
    monkeypatch.setattr(cpus, "siblings", lambda core: {core})  # one thread per physical core
    monkeypatch.delenv(cpus.ENV, raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    first = cpus.timing_cpus()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(15)))  # the pin it made
    assert first == cpus.timing_cpus() == (set(range(15)), 15)


def test_a_thread_is_pinned_alone() -> None:
    from kernelcup.harness import cpus

    usable = sorted(os.sched_getaffinity(0))
    seen: list[set[int]] = []

    def pinned() -> None:
        assert cpus.pin_this_thread({usable[-1]})
        seen.append(os.sched_getaffinity(0))

    thread = threading.Thread(target=pinned)
    thread.start()
    thread.join()
    assert seen == [{usable[-1]}] and sorted(os.sched_getaffinity(0)) == usable  # this thread kept them all
    assert not cpus.pin_this_thread({10_000})


def test_a_round_caught_in_a_slow_spell_is_dropped_once_a_third_round_decides() -> None:
    from kernelcup.harness import benchmark
    from kernelcup.harness.spec import GpuInfo

    slow = _round([11_000.0, 11_100.0, 11_200.0])  # 10% off: the machine had a slow spell
    normal = [_round([10_000.0, 10_100.0, 10_200.0]), _round([10_020.0, 10_120.0, 10_080.0])]
    assert not benchmark.rounds_agree([normal[0], slow])
    combined = benchmark.combine_rounds([normal[0], slow, normal[1]], _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]
    assert combined.result.runs == 6 and max(combined.times) < 10_500


def test_each_ranks_median_is_taken_over_the_rounds_the_cases_median_is() -> None:
    """A multi-GPU call is timed as its slowest rank, so no rank's median may exceed the case's:
    a round left out of the case's median as a slow spell is left out of every rank's too."""
    from kernelcup.harness import benchmark
    from kernelcup.harness.spec import GpuInfo

    rounds = [_round([10_000.0, 10_100.0, 10_200.0]), _round([30_000.0, 30_100.0, 30_200.0]),
              _round([10_020.0, 10_120.0, 10_080.0])]
    for timing, ranks in zip(rounds, ([9_000.0, 10_100.0], [25_000.0, 30_100.0], [9_100.0, 10_080.0]), strict=True):
        timing.rank_median_ns = ranks
    combined = benchmark.combine_rounds(rounds, None, {"size": 1}, GpuInfo(), "cpu", "b", 0)
    assert len(combined.result.round_median_ns) == 2  # the 30 µs round was a slow spell
    assert combined.result.rank_median_ns == [9_050.0, 10_090.0]
    assert combined.result.median_ns is not None and combined.result.median_ns >= max(combined.result.rank_median_ns)


def test_rounds_within_two_steps_of_the_record_agree_however_short_the_call() -> None:
    from kernelcup.harness import benchmark

    # A 3.1 µs case whose rounds landed one 32 ns step apart (1%): as alike as the record can say.
    assert benchmark.rounds_agree([_round([3_136.0] * 5), _round([3_168.0] * 5)])
    assert not benchmark.rounds_agree([_round([3_136.0] * 5), _round([3_264.0] * 5)])


def test_each_round_draws_its_own_inputs() -> None:
    plan = SeedPlan(secret=12345)
    case = {"size": 8, "seed": 7}
    seeds = {plan.case(case, purpose, 0)["seed"] for purpose in ("bench", "bench-round1", "bench-round2")}
    assert len(seeds) == 3


class _Gpu:
    """NVML's answers for a GPU that heats up and hits its power cap half way (the real NVML
    path ran on an H100 and an H200: see BENCHMARKS.md)."""

    def __init__(self) -> None:
        self.samples = 0

    def sm_clock_mhz(self) -> float:
        self.samples += 1
        return 1980.0 if self.samples < 3 else 1755.0

    def memory_clock_mhz(self) -> float:
        return 2619.0

    def power_w(self) -> float:
        return 500.0 + 40.0 * self.samples

    def temperature_c(self) -> float:
        return 40.0 + self.samples

    def clock_limits(self) -> int:
        return 0x1 | (0x4 if self.samples >= 3 else 0)  # idle is never reported


def test_the_clock_is_watched_while_benchmarks_run_and_its_limits_are_reported() -> None:
    from kernelcup.core.pipeline.report import clock_note
    from kernelcup.harness import sysinfo

    gpu = _Gpu()
    result = Result(job_id="j", mode="ranked", status="passed", verdict="ok")  # type: ignore[arg-type]
    with sysinfo.watching(gpu, result.system):  # type: ignore[arg-type]
        deadline = time.monotonic() + 5
        while gpu.samples < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
    system = Result.from_json(result.to_json()).system
    assert (system.sm_clock_mhz_min, system.sm_clock_mhz_max) == (1755.0, 1980.0)
    assert system.gpu_temp_c_max is not None and system.gpu_temp_c_max >= 44.0
    assert system.clock_limits == ["power cap"]
    assert (system.memory_clock_mhz_min, system.memory_clock_mhz_max) == (2619.0, 2619.0)
    assert system.power_w_max is not None and system.power_w_max >= 700.0
    note = clock_note(Result.from_json(result.to_json()))
    assert note.startswith("GPU clock 1755-1980 MHz, memory 2619 MHz, up to ") and "held down by power cap" in note
    assert " W at most" in note
    quiet = Result(job_id="j", mode="ranked", status="passed", verdict="ok")  # type: ignore[arg-type]
    with sysinfo.watching(None, quiet.system):  # the CPU: nothing to watch
        pass
    assert quiet.system.sm_clock_mhz_min is None and clock_note(quiet) == ""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="NVML and a CUDA GPU")
def test_the_clock_watched_is_the_gpu_the_process_runs_on_by_its_uuid() -> None:
    from kernelcup.harness import sysinfo

    # By UUID, never by index: NVML counts every GPU whatever CUDA_VISIBLE_DEVICES says, so a
    # CUDA program timed on GPU 1 had GPU 0's idle clock (345 MHz) in its result.
    nvml = sysinfo.Nvml()
    uuid = sysinfo.visible_gpu_uuid()
    assert uuid and nvml._lib is not None
    handle = ctypes.c_void_p()
    name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
    assert nvml._lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(handle)) == 0
    assert nvml.select(uuid) and nvml._handle.value == handle.value
    assert nvml.sm_clock_mhz() is not None


def test_a_scores_noise_range_combines_the_cases_intervals_as_the_score_does() -> None:
    cases = [
        CaseResult({"size": 1}, True, median_ns=100.0, ci_low_ns=90.0, ci_high_ns=110.0),
        CaseResult({"size": 2}, True, median_ns=400.0, ci_low_ns=360.0, ci_high_ns=440.0),
    ]
    low, high = scoring.noise_range("geom", cases)
    assert low == pytest.approx(180e-9) and high == pytest.approx(220e-9)
    last_low, last_high = scoring.noise_range("last", cases)
    assert last_low == pytest.approx(360e-9) and last_high == pytest.approx(440e-9)
    cases[0].ci_low_ns = None
    assert scoring.noise_range("geom", cases) == (None, None)


def test_build_caches_are_kept_per_source_so_a_rerun_compiles_nothing(tmp_path, monkeypatch) -> None:
    """Triton, load_inline and torch.compile builds go to one folder per submission source under
    KERNELCUP_CACHE_DIR: the same source run again (another `kernelcup submit`) finds them."""
    from conftest import LEADERBOARDS, leaderboard_spec

    from kernelcup.harness.process import Identity
    from kernelcup.harness.workspace import Workspace, build_cache_env

    monkeypatch.setenv("KERNELCUP_CACHE_DIR", str(tmp_path / "cache"))
    board = next(p.parent for p in sorted(LEADERBOARDS.glob("*/task.yml")))

    def env_for(source: str) -> dict[str, str]:
        spec = leaderboard_spec(board, source)
        workspace = Workspace.prepare(Identity(None, None, "test"))
        try:
            return build_cache_env(spec, workspace)
        finally:
            workspace.cleanup()

    first, again, other = env_for("a = 1"), env_for("a = 1"), env_for("a = 2")
    kinds = ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR")
    assert all(first[k] == again[k] and first[k] != other[k] for k in kinds)
    assert all(str(tmp_path / "cache") in first[k] for k in kinds)


class _SlowInputs:
    """A session whose every call first spends 40 ms drawing its inputs, as a large
    linear-algebra case does on a GPU (GPU MODE's eigh and qr: a second or more)."""

    device = "cpu"
    info: dict[str, Any] = {}  # noqa: RUF012
    activity = ""

    def __init__(self) -> None:
        self.timed = 0

    def warm_up(self, kwargs: dict[str, Any], min_s: float, max_s: float) -> None:
        time.sleep(0.04)

    def time_call(self, kwargs: dict[str, Any]) -> Any:
        from kernelcup.harness.session import Timed

        time.sleep(0.04)
        self.timed += 1
        return Timed(1_000.0, 500.0, 41_000_000.0)


def test_slow_inputs_leave_the_case_its_timed_calls(monkeypatch) -> None:
    from kernelcup.harness import benchmark
    from kernelcup.harness.spec import GpuInfo

    monkeypatch.setattr(benchmark, "_recheck", lambda *args: None)
    session = _SlowInputs()
    rule = benchmark.Plan(stats.StopRule(5, 50, 1.0, 0.02), 0.0, 0.0, 0.0)
    timing = benchmark.time_case(
        session,  # type: ignore[arg-type]
        _NoWork(),  # type: ignore[arg-type]
        SeedPlan(None),
        {"size": 1, "seed": 1},
        "benchmark 1 of 1",
        rule,
        0.3,
        GpuInfo(),
        1 << 20,
        random.Random(1),
    )
    # Every order is a timed call: no share of the case goes to calls that are not scored.
    assert timing.result.runs == session.timed >= 2


@pytest.mark.skipif(not hasattr(torch, "float4_e2m1fn_x2"), reason="this torch has no packed fp4 dtype")
def test_packed_fp4_is_poisoned_and_fingerprinted_by_its_bytes() -> None:
    # GPU MODE's nvfp4 problems hand kernels float4_e2m1fn_x2 tensors, which have no arithmetic.
    packed = torch.zeros(8, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    before = fingerprint(packed)
    packed.view(torch.uint8)[3] = 0x21
    assert not same(before, fingerprint(packed))
    with PoisonUninitialized():
        fresh = torch.empty(4, dtype=torch.float4_e2m1fn_x2)
    assert bool(fresh.view(torch.uint8).eq(0xFF).all())
    assert checking.nan_problems(fresh, fresh) == [] and checking.worst_mismatches(fresh, packed[:4]) == ""


class _HungryProblem:
    """A leaderboard whose reference (and, with ``check_fits`` False, its check) runs out of GPU
    memory: GPU MODE's trimul at seqlen 1024 did, in the harness's process, on an H100."""

    def __init__(self, check_fits: bool) -> None:
        self.check_fits = check_fits
        self.checks = 0

    def has_reference(self) -> bool:
        return True

    def reference(self, data: Any) -> Any:
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")

    def check(self, data: Any, output: Any) -> tuple[bool, str]:
        self.checks += 1
        if not self.check_fits:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 6.00 GiB")
        return bool(torch.equal(data, output)), "checked"


def test_without_memory_for_the_harness_own_reference_the_check_alone_decides() -> None:
    data = torch.arange(4.0)
    assert checking.check_output(_HungryProblem(True), data, data.clone()) == (True, "checked")  # type: ignore[arg-type]
    assert checking.check_output(_HungryProblem(True), data, data + 1) == (False, "checked")  # type: ignore[arg-type]
    hungry = _HungryProblem(False)
    with pytest.raises(checking.LeaderboardFault, match="ran out of memory while the leaderboard's check"):
        checking.check_output(hungry, data, data.clone())  # type: ignore[arg-type]
    assert hungry.checks == 2  # once more after the harness let go of what it held


def test_a_witness_sees_an_output_change_and_nothing_else() -> None:
    from kernelcup.harness.witness import Witnesses

    witnesses = Witnesses(torch.device("cpu"))
    out = torch.full((40, 30), float("nan"))
    witness = witnesses.take((torch.empty(0), out))
    assert witness is not None and witness.tensor == 1  # the only tensor with elements
    assert not witnesses.changed(witness, (torch.empty(0), out))  # NaN is the same bytes again
    out.fill_(1.0)
    assert witnesses.changed(witness, (torch.empty(0), out))
    assert witnesses.take(None) is None and witnesses.take(torch.empty(0, 3)) is None
    assert not witnesses.changed(None, out)
    for value in (
        torch.tensor(3.5),
        torch.zeros(7, dtype=torch.bool),
        torch.zeros(5, dtype=torch.float8_e4m3fn),
        torch.zeros(4, 6, dtype=torch.complex64)[:, ::2],
        torch.zeros(9, dtype=torch.bfloat16).expand(3, 9),
    ):
        seen = witnesses.take({"y": [value]})
        assert seen is not None and not witnesses.changed(seen, {"y": [value]}), value.dtype
        (value.view(torch.uint8) if value.element_size() == 1 else value).fill_(1)
        assert witnesses.changed(seen, {"y": [value]}), value.dtype


def test_warm_up_stops_after_two_calls_that_outlast_its_limit_and_batches_fast_ones() -> None:
    import time as clock

    from kernelcup.harness import timing

    timer = timing.make_timer(torch.device("cpu"))
    slow = timing.warm_up(timer, lambda data: clock.sleep(0.3), lambda: None, 0.1, 0.5)
    assert slow.calls == 2, slow
    fast = timing.warm_up(timer, lambda data: None, lambda: None, 0.0, 0.5)
    assert fast.calls >= 3 + 5 * 3, fast  # batches until three agree (or the limit)


def test_warm_up_of_a_short_call_is_steady_once_it_jitters_by_less_than_the_floor() -> None:
    """Batch medians of a ~40 µs call that move by 1.5 µs (3.75%) are steady (the 2 µs floor);
    by 4 µs they are not, and the warm-up runs to its limit."""
    from itertools import cycle

    from kernelcup.harness import timing

    class Scripted(timing.CpuTimer):
        def __init__(self, times: list[float]) -> None:
            super().__init__()
            self._times = cycle(times)

        def wall_call(self, function: Any, data: Any) -> float:
            return next(self._times)

    jitter = [40_000.0] * 5 + [41_500.0] * 5  # batch medians alternate 40.0 and 41.5 µs
    steady = timing.warm_up(Scripted(jitter), lambda data: None, lambda: None, 0.0, 2.0)
    assert steady.steady and steady.seconds < 1.0, steady
    wide = [40_000.0] * 5 + [44_000.0] * 5
    unsteady = timing.warm_up(Scripted(wide), lambda data: None, lambda: None, 0.0, 0.2)
    assert not unsteady.steady and unsteady.seconds >= 0.2, unsteady


def test_input_samples_travel_as_plain_data_and_tolerate_last_bit_noise() -> None:
    from kernelcup.harness import witness as w

    witnesses = w.Witnesses(torch.device("cpu"))
    data = (torch.randn(50, 20), torch.full((64,), float("nan")), 7, torch.empty(0))
    seen = [w.Witness.from_message(m.to_message()) for m in witnesses.take_each(data)]
    assert len(seen) == 2 and all(s is not None for s in seen)
    kept = [s for s in seen if s is not None]
    assert w.inputs_differ(kept, data) == ""
    nudged = (torch.nextafter(data[0], torch.tensor(float("inf"))), data[1].clone(), 7, torch.empty(0))
    assert w.inputs_differ(kept, nudged) == ""  # a generator's last-bit noise is no tampering
    filled = (data[0], torch.zeros(64), 7, torch.empty(0))
    assert "input tensor 1" in w.inputs_differ(kept, filled)
    for bad in (
        {"tensor": 0},
        {"tensor": -1, "positions": [[0] * w.INPUT_SAMPLES], "values": ""},
        {"tensor": 0, "positions": [[0.5] * w.INPUT_SAMPLES], "values": ""},
        "x",
        None,
    ):
        assert w.Witness.from_message(bad) is None


class _RoundRobinPools:
    """torch's stream pools as the harness sees them: per priority, 32 handles handed out in turn."""

    def __init__(self) -> None:
        self.handles = {0: [1000 + k for k in range(32)], -1: [2000 + k for k in range(32)]}
        self.counter = {0: 5, -1: 0}  # torch's own code may have taken some already

    def take(self, priority: int) -> int:
        handle = self.handles[priority][self.counter[priority] % 32]
        self.counter[priority] += 1
        return handle

    def listed(self) -> list[tuple[int, list[int], int]]:
        """What the child lists before the submission is imported (timing._pool_streams)."""
        pools = []
        for priority in (0, -1):
            found: list[int] = []
            misses = made = 0
            while misses < 40:
                handle = self.take(priority)
                made += 1
                if handle in found:
                    misses += 1
                else:
                    found.append(handle)
                    misses = 0
            pools.append((priority, found, made))
        return pools


def _available_memory_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def test_an_output_past_two_gib_comes_over_the_host_whole() -> None:
    # ctypes.string_at takes a C int: a 4 GiB tensor came back as b"", one past 2 GiB as a C
    # string, and the harness judged a correct Cholesky factor "payload too short".
    size = (2 << 30) + 4096
    if _available_memory_bytes() < 3 * size:
        pytest.skip("needs about 7 GiB of free memory")
    tensor = torch.zeros(size, dtype=torch.uint8)
    tensor[-1] = 7
    raw = transfer.host_bytes(tensor)
    assert len(raw) == size and raw[-1] == 7 and raw[0] == 0
    del raw, tensor


def test_the_output_taken_over_the_host_scales_with_the_case() -> None:
    small = [torch.zeros(1024), torch.zeros(8, dtype=torch.int64)]
    assert transfer.nbytes_of({"a": small, "b": (torch.zeros(2),)}) == 4096 + 64 + 8
    assert transfer.payload_limit(2 << 30, small) == 2 << 30
    # Sizes only (meta tensors): a 4 GiB input lets twice that come back, never past the cap.
    assert transfer.payload_limit(2 << 30, torch.empty((1 << 20, 1 << 10), device="meta")) == 8 << 30
    assert transfer.payload_limit(2 << 30, torch.empty((1 << 40,), device="meta")) == transfer.MAX_PAYLOAD


def test_the_imports_warmed_for_a_leaderboards_check_never_fail_the_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from kernelcup.harness import __main__ as harness_main

    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    monkeypatch.setattr(harness_main, "WARM_IMPORTS", ("kernelcup_no_such_module", "colorsys"))
    harness_main._warm_imports()  # a failure stops the warming quietly: the check reports it
    assert "colorsys" not in sys.modules
    monkeypatch.setattr(harness_main, "WARM_IMPORTS", ("colorsys",))
    harness_main._warm_imports()
    assert "colorsys" in sys.modules


class _Event:
    def __init__(self) -> None:
        self.at: float | None = None  # GPU time it ran, ns


class _ModelGpu:
    """One stream's queue against a host clock, in ns: enough of a GPU to follow the order in
    which ``CudaTimer.time_call`` records its events, runs its sleep and joins the pool streams.
    Each launch or record costs the host ``launch_ns`` and reaches the GPU ``latency_ns`` later;
    a synchronize returns ``wake_ns`` after the GPU is done."""

    def __init__(self, launch_ns: float = 2_000.0, latency_ns: float = 4_000.0, wake_ns: float = 3_000.0) -> None:
        self.host = 0.0
        self.free = 0.0  # when the GPU is done with what is queued
        self.launch_ns, self.latency_ns, self.wake_ns = launch_ns, latency_ns, wake_ns

    def now(self) -> int:
        return int(self.host)

    def queue(self, duration_ns: float) -> float:
        start = max(self.host + self.latency_ns, self.free)
        self.free = start + duration_ns
        self.host += self.launch_ns
        return start

    def record(self, event: _Event, stream: object) -> None:
        event.at = self.queue(0.0)

    def done(self, event: _Event) -> bool:
        return event.at is not None and event.at <= self.host

    def elapsed_ms(self, a: _Event, b: _Event) -> float:
        assert a.at is not None and b.at is not None
        return (b.at - a.at) / 1e6

    def synchronize(self) -> None:
        self.host = max(self.host, self.free) + self.wake_ns


def _add(gpu: _ModelGpu, host_ns: float, kernel_ns: float) -> Any:
    def call(data: Any) -> Any:
        gpu.host += host_ns
        gpu.queue(kernel_ns)
        return data

    return call


def _speeds(rng: random.Random, count: int, centre_ns: float) -> list[float]:
    return [centre_ns * (1 + rng.uniform(-0.003, 0.003)) for _ in range(count)]


def test_calls_at_two_speeds_range_over_both_so_two_jobs_of_one_submission_tie() -> None:
    from kernelcup.harness import benchmark
    from kernelcup.harness.spec import GpuInfo

    # vectoradd's 10000² case on an H100: one job ran 18% of its calls near 199 µs and the rest
    # near 229 µs, the next 36% near 229 µs and the rest near 200 µs (medians 228.9, 200.5 µs).
    rng = random.Random(7)
    slow = _speeds(rng, 60, 229_000.0) + _speeds(rng, 13, 199_000.0)
    fast = _speeds(rng, 145, 200_500.0) + _speeds(rng, 82, 229_000.0)
    published = []
    for times in (slow, fast):
        halves = [_round(times[0::2]), _round(times[1::2])]  # two rounds of the same mixture
        combined = benchmark.combine_rounds(halves, _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]
        published.append(combined.result)
    (low_slow, high_slow), (low_fast, high_fast) = ((r.ci_low_ns, r.ci_high_ns) for r in published)
    assert low_slow is not None and high_slow is not None and low_fast is not None and high_fast is not None
    assert published[0].median_ns is not None and published[0].median_ns > 225_000.0
    assert published[1].median_ns is not None and published[1].median_ns < 205_000.0
    assert low_slow < 200_000.0 and high_fast > 228_000.0  # each covers the other speed...
    assert low_slow <= high_fast and low_fast <= high_slow  # ...so the two jobs tie
    assert "18% of its calls ran near 199" in published[0].message and "more than one speed" in published[0].message
    assert "36% of its calls ran near 229" in published[1].message
    # One job, one round (benchmark mode): the same.
    single = benchmark.combine_rounds([_round(slow)], _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]
    assert single.result.ci_low_ns is not None and single.result.ci_low_ns < 200_000.0


def test_a_long_tail_or_a_few_slow_calls_are_not_a_second_speed() -> None:
    from kernelcup.harness import benchmark

    rng = random.Random(11)
    steady = _speeds(rng, 200, 100_000.0)
    assert benchmark.other_speeds(steady, 100_000.0) == []
    # 8% of calls 30% slower (a spike now and then): under the share.
    assert benchmark.other_speeds(steady + _speeds(rng, 17, 130_000.0), 100_000.0) == []
    # 20% of calls spread 2-12% slower (a tail, not a speed of its own).
    tail = [100_000.0 * (1.02 + 0.10 * i / 49) for i in range(50)]
    assert benchmark.other_speeds(steady + tail, 100_000.0) == []
    # The same share at one speed, 10% slower, is one.
    speeds = benchmark.other_speeds(steady + _speeds(rng, 50, 110_000.0), 100_000.0)
    assert len(speeds) == 1 and speeds[0][0] == pytest.approx(110_000.0, rel=0.005)
    assert speeds[0][1] == pytest.approx(0.2)
    # Too few calls to tell.
    assert benchmark.other_speeds(_speeds(rng, 20, 100_000.0) + _speeds(rng, 10, 120_000.0), 100_000.0) == []


def test_a_host_bound_case_stops_once_its_interval_is_within_the_range_it_is_published_with() -> None:
    """A launch-bound case is shown with at least ±3% (``benchmark.widen``): timing it on towards
    ±0.25% would only spend the round's time, so it stops within its range, and a GPU-bound case
    as noisy does not."""
    import time as clock

    from kernelcup.harness import benchmark
    from kernelcup.harness.session import Timed

    def calls(idle: float) -> list[Timed]:
        return [Timed(100_000.0 * (1 + 0.01 * (i % 5 - 2)), 90_000.0, 120_000.0, idle_share=idle) for i in range(40)]

    rule = benchmark.RANKED_PLAN.rule
    now = clock.monotonic()
    assert benchmark._timed_enough(calls(0.9), 40, now, rule, "cuda")
    assert not benchmark._timed_enough(calls(0.1), 40, now, rule, "cuda")
    assert not benchmark._timed_enough(calls(0.9), 40, now, rule, "cpu")  # on the CPU the host is all there is


def test_the_host_clock_catches_a_cpu_timer_that_under_reports_every_call() -> None:
    """Behind the child's watch on its own objects (harness/integrity.py): a clock slowed by
    means the watch cannot see still reads every call far below what the harness's own clock
    saw, and the fastest call the harness saw is held to the child's median."""
    from kernelcup.harness import benchmark
    from kernelcup.harness.session import Timed
    from kernelcup.harness.verdict import RunEnded

    slowed = [Timed(3_000_000.0, 3_000_000.0, 40_000_000.0, call_ns=30_000_000.0 + i) for i in range(20)]
    with pytest.raises(RunEnded, match="timer tampering"):
        benchmark._check_host_clock(slowed, "benchmark 1 of 1")
    loaded = [Timed(3_000_000.0, 3_000_000.0, 40_000_000.0, call_ns=3_100_000.0 + 20e6 * (i % 2)) for i in range(20)]
    benchmark._check_host_clock(loaded, "benchmark 1 of 1")  # some calls delayed, not all: no charge


def test_a_quick_ranks_next_answer_waits_for_the_next_gather() -> None:
    """Rank 1 says "loading" and "ready" before rank 0's "loading" comes: the first gather takes
    both "loading"s, the next both "ready"s (a multi-GPU job on a loaded CI box failed with
    "rank 1's process answered out of turn while starting (got 'ready')")."""
    import time as clock

    from kernelcup.harness.rank_group import RankGroup, Side

    group = RankGroup.__new__(RankGroup)
    group.world_size = 2
    group.deadline = clock.monotonic() + 30
    side = Side("ranks", [])
    for rank, kind in ((1, "loading"), (1, "ready"), (0, "loading"), (0, "ready")):
        side.inbox.put((rank, {"msg": kind, "rank": rank}, b""))
    loading = group.gather(side, ("loading",))
    ready = group.gather(side, ("ready",))
    assert [m["msg"] for m, _ in loading] == ["loading", "loading"]
    assert [(m["msg"], m["rank"]) for m, _ in ready] == [("ready", 0), ("ready", 1)]


def test_the_childs_environment_carries_the_operators_record_switches() -> None:
    """KERNELCUP_HARNESS_RECORD and KERNELCUP_HARNESS_CUPTI_LIB are read in the submission's
    process (harness/record.py, harness/cupti.py): its allow-listed environment keeps them."""
    from pathlib import Path

    from kernelcup.harness.process import child_environment

    told = {"KERNELCUP_HARNESS_RECORD": "torch-profiler", "KERNELCUP_HARNESS_CUPTI_LIB": "/opt/libcupti.so.13"}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in told.items():
            patch.setenv(key, value)
        patch.setenv("KERNELCUP_DATABASE_URL", "sqlite:////secret.db")
        env = child_environment(Path("/tmp/home"), {})
    assert {key: env.get(key) for key in told} == told
    assert "KERNELCUP_DATABASE_URL" not in env


def test_the_watch_holds_the_harness_objects_it_relies_on_and_lets_plain_data_change(tmp_path: Any) -> None:
    """A forged record object put in the timer's place is a change; the timer's flush buffer
    made on first use (plain data) is not."""
    from types import SimpleNamespace

    from kernelcup.harness.integrity import Watch

    holder = SimpleNamespace(record=Watch(), buffer=None, now=len)
    watch = Watch.before_submission(tmp_path, {"the timer": holder})
    assert watch.changed() == ""
    holder.buffer = [1.0] * 4
    assert watch.changed() == ""
    holder.record = Watch()
    assert watch.changed() == "the timer.record was replaced"


def test_a_notice_from_the_child_is_kept_for_the_operator_and_the_output_still_arrives() -> None:
    """Where CUDA IPC fails in the sandbox the child copies its output through the host and says
    so on the channel, not in the contestant's stderr; the harness keeps the note for the
    result's ``system.notes`` (the local runner logs it) and reads the output that follows."""
    import time as clock
    from types import SimpleNamespace

    from kernelcup.harness import transfer
    from kernelcup.harness.session import Session

    tree, tensors = transfer.flatten(torch.arange(4.0))
    placements, payload = transfer.pack(tensors, None)
    note = "outputs copied through the host: CUDA IPC unavailable (CUDA error 201)"
    queued = [
        ({"msg": "notice", "text": note}, b""),
        ({"msg": "notice", "text": note}, b""),
        ({"msg": "output", "tree": tree, "placements": placements, "fingerprint": None, "inputs": []}, payload),
    ]
    channel = SimpleNamespace(recv=lambda deadline, max_payload: queued.pop(0), send=lambda message: None)
    session = Session(SimpleNamespace(channel=channel), clock.monotonic() + 30, 30.0, device="cpu")  # type: ignore[arg-type]
    shipped = session.collect(1 << 20)
    assert torch.equal(shipped.output, torch.arange(4.0))
    assert session.notes == [note]
