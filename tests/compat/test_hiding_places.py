"""No hiding place pays, and honest patterns carry no charge (issue #36).

A call's time runs from the start of the first GPU activity it launched (kernel, memcpy, memset,
on any stream, from any thread of the submission's process) to the end of the last; GPU work
another thread launches outside the timed calls is charged to the call before it and said in
the case's message.

Cheats: each hides work that the honest baseline (``add_once``: one add on the current stream)
also does, and all but one hide more of it (two or three adds), so that work that is counted
reads clearly above the baseline and work that is hidden clearly below. Each is asserted at or
above the baseline on every case, or failed. Honest patterns: passed, no charge in any case's
message, and within 10% of the baseline where they do the same GPU work.

Every job runs in ``benchmark`` mode on the ``side_streams`` leaderboard (out = a + b at 4096,
1 Mi and 8 Mi float32 elements: ~3 µs to ~50 µs of work), one at a time, since timings side by
side must not share the GPU (so no other file's jobs beside it either: no pytest-xdist workers on
the GPU machine). A job runs when a test first asks for it, so ``-k`` runs only the jobs it
needs. The multi-GPU cheat runs on the shipped ``allreduce`` leaderboard, where 2 GPUs are.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kernelcup.harness.spec import JobSpec, Mode, Result, Status
from tests.compat.support import compat_spec, submission
from tests.harness.conftest import DEVICE, REPO, leaderboard_spec, run_many

pytestmark = pytest.mark.skipif(DEVICE != "cuda", reason="hiding places are GPU patterns (KERNELCUP_TEST_DEVICE=cuda)")

LEADERBOARD = "side_streams"
BASELINE = "add_once"
ALLREDUCE = REPO / "leaderboards" / "allreduce"

# Cheats that hide more work than the baseline's one add: counted, they read above it at every
# size with room to spare, so they are held to the claim itself, no allowance.
MORE_WORK = (
    "side_stream_unjoined_two",  # a pool stream never joined, two adds
    "side_stream_unjoined_three",  # three adds
    "driver_stream_unjoined",  # cuStreamCreate(&h, 1) wrapped as torch.cuda.ExternalStream, two adds
    "graph_on_side_stream",  # a CUDA graph of two adds replayed on a side stream, copies in and out
    "side_stream_record_stream",  # the add into a temporary, then a copy, record_stream for a join
    "side_stream_new_each_call",  # a new torch.cuda.Stream() each call, two adds
    "side_stream_every_other",  # joined on every other call only, two adds
)
# Hides exactly the baseline's work (one add on a pool stream never joined): counted, it reads
# the baseline's own kernel, so it may read below it by what separates two jobs timing the same
# kernel: max(1%, 0.2 µs) per case (the bound bench/gpu/repeatability.py holds back-to-back
# ranked pairs of one submission to). Hidden, it reads far below that.
SAME_WORK = ("side_stream_unjoined",)
SAME_WORK_NOISE_SHARE = 0.01
SAME_WORK_NOISE_NS = 200.0
# Launched by another thread after the call returned (two adds): failed as late work, or
# charged to the call; either way never faster than the baseline.
LATE_WORK = "thread_fills_after_return"

# Honest patterns, each with the first case (by index) from which it does the baseline's GPU
# work, one add's worth, and is held within HONEST_SHARE of the baseline's median.
HONEST_SHARE = 0.10
SAME_WORK_FROM = {
    "synchronize_per_call": 0,  # the add, then torch.cuda.synchronize()
    "host_hiccup": 0,  # the add after 300 µs of host time on every 50th call
    "slow_host": 0,  # the add after 700 µs of host time on every call
    # One generated kernel in place of ATen's: at 4096 elements either kernel's time is its fixed
    # cost of starting blocks (~2 µs), which differs between two code generators by more than 10%
    # of it; from 1 Mi elements on the bytes moved decide, and those are the same.
    "triton_autotuned": 1,
}
# Honest patterns whose GPU work is not (or not surely) one add's, so no time bound: cudagraph
# trees copy each input that is not static into the graph's own buffers before a replay
# (max-autotune, whose new tensor is then copied into the output; reduce-overhead, unless its
# torch skips the graph for the mutated output); the hand-captured graph copies in and out;
# `.item()` adds a reduction and a device-to-host copy; the loop launches 50 kernels. Measured
# on an H100 (2026-11-28, BENCHMARKS.md): Inductor's code for `out[...] = a + b` (compiled_default,
# an output it mutates) read 1.32x and 1.44x the add at 1 Mi and 8 Mi elements; the second half
# of two_streams_joined starts a host launch and an event wait after the first, and the GPU's idle
# time between them is in the call's span: 3.4x the add at 8 Mi.
OTHER_WORK = (
    "compiled_default",
    "two_streams_joined",
    "compiled_reduce_overhead",
    "compiled_max_autotune",
    "cuda_graph",
    "item_per_call",
    "loop_of_launches",
)
CHARGES = ("continued", "outside its timed call")
SLOW_TO_START = {"compiled_default", "compiled_reduce_overhead", "compiled_max_autotune", "triton_autotuned"}


class Jobs:
    """Harness jobs by name, each run once, when a test first asks for it, alone on the GPU."""

    def __init__(self, spec_for: Callable[[str], JobSpec]) -> None:
        self._spec_for = spec_for
        self._results: dict[str, Result] = {}

    def result(self, name: str) -> Result:
        if name not in self._results:
            self._results[name] = run_many({name: self._spec_for(name)}, workers=1)[name].outcome()
        return self._results[name]


def _side_streams_spec(name: str) -> JobSpec:
    timeout_s = 240.0 if name in SLOW_TO_START else 90.0  # max-autotune compiles for a minute
    return compat_spec(LEADERBOARD, submission(name), Mode.BENCHMARK, timeout_s=timeout_s)


@pytest.fixture(scope="module")
def jobs() -> Jobs:
    return Jobs(_side_streams_spec)


def _medians(result: Result) -> list[float]:
    return [case.median_ns or 0.0 for case in result.benchmarks]


def _passed_medians(name: str, result: Result) -> list[float]:
    assert result.status is Status.PASSED, f"{name}: {result.status.value}: {result.verdict}"
    return _medians(result)


def _never_cheaper(name: str, cheat: Result, honest: Result, allowance: Callable[[float], float]) -> None:
    """The claim for one cheat: failed, or at least the honest median (less ``allowance``) on
    every case."""
    if cheat.status is Status.FAILED:
        return
    honest_ns = _passed_medians("the honest baseline", honest)
    cheat_ns = _passed_medians(name, cheat)
    pairs = list(zip(cheat_ns, honest_ns, strict=True))
    assert all(c >= h - allowance(h) for c, h in pairs), f"{name} vs honest per case (ns): {pairs}"


# Work done in another process (a helper started at import, the inputs shared through CUDA IPC)
# is in no record of the submission's process: the call launched nothing there, so the host clock
# times it, the wait for the helper included. Where the sandbox keeps the helper from starting,
# the job does not pass, which does not pay either.
ELSEWHERE = "helper_process"


def test_work_done_in_another_process_is_never_cheaper_than_the_honest_add(jobs: Jobs) -> None:
    elsewhere = jobs.result(ELSEWHERE)
    if elsewhere.status is not Status.PASSED:
        return
    _never_cheaper(ELSEWHERE, elsewhere, jobs.result(BASELINE), lambda h: 0.0)


@pytest.mark.parametrize("name", MORE_WORK)
def test_hidden_extra_work_is_never_cheaper_than_the_honest_add(jobs: Jobs, name: str) -> None:
    _never_cheaper(name, jobs.result(name), jobs.result(BASELINE), lambda h: 0.0)


@pytest.mark.parametrize("name", SAME_WORK)
def test_the_honest_add_on_an_unjoined_stream_is_timed_as_the_add(jobs: Jobs, name: str) -> None:
    _never_cheaper(
        name, jobs.result(name), jobs.result(BASELINE), lambda h: max(SAME_WORK_NOISE_SHARE * h, SAME_WORK_NOISE_NS)
    )


def test_work_another_thread_launches_after_the_call_fails_or_is_charged(jobs: Jobs) -> None:
    cheat = jobs.result(LATE_WORK)
    assert cheat.status in (Status.FAILED, Status.PASSED), f"{cheat.status.value}: {cheat.verdict}"
    _never_cheaper(LATE_WORK, cheat, jobs.result(BASELINE), lambda h: 0.0)


def _uncharged(name: str, result: Result) -> list[float]:
    medians = _passed_medians(name, result)
    messages = [case.message for case in result.benchmarks]
    assert not any(charge in message for message in messages for charge in CHARGES), f"{name}: {messages}"
    return medians


@pytest.mark.parametrize("name", [BASELINE, *SAME_WORK_FROM, *OTHER_WORK])
def test_an_honest_pattern_passes_with_no_charge(jobs: Jobs, name: str) -> None:
    _uncharged(name, jobs.result(name))


@pytest.mark.parametrize("name", list(SAME_WORK_FROM))
def test_an_honest_pattern_doing_one_add_is_timed_like_one_add(jobs: Jobs, name: str) -> None:
    medians = _uncharged(name, jobs.result(name))
    baseline = _uncharged(BASELINE, jobs.result(BASELINE))
    pairs = list(zip(medians, baseline, strict=True))[SAME_WORK_FROM[name] :]
    assert all(abs(t - b) <= HONEST_SHARE * b for t, b in pairs), f"{name} vs {BASELINE} per case (ns): {pairs}"


# --- multi-GPU: a collective never waited on -------------------------------------------------


def _allreduce_spec(name: str) -> JobSpec:
    code = {
        "all_reduce": (ALLREDUCE / "solutions" / "all_reduce.py").read_text(),
        "collective_unwaited": submission("collective_unwaited"),
    }[name]
    spec: JobSpec = leaderboard_spec(ALLREDUCE, code, Mode.BENCHMARK, timeout_s=240)
    return spec


@pytest.fixture(scope="module")
def collectives() -> Jobs:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("a collective across ranks needs 2 GPUs")
    return Jobs(_allreduce_spec)


def test_a_collective_started_async_and_never_waited_on_is_never_cheaper(collectives: Jobs) -> None:
    """Two all_reduces with ``async_op=True`` (one on a scratch copy: more work than the honest
    in-place all_reduce), neither waited on: timed at least as the honest one, or failed."""
    _never_cheaper(
        "collective_unwaited",
        collectives.result("collective_unwaited"),
        collectives.result("all_reduce"),
        lambda h: 0.0,
    )
