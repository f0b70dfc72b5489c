"""Multi-GPU leaderboards through the real harness: one process per rank, gloo on the CPU.

The shipped multi-GPU leaderboards' solutions get their expected verdicts in
``test_shipped_leaderboards.py`` (2 ranks each); here: ranked runs with per-rank times, and
what ends a job early on one rank: a rank that never joins the collective the other waits in
(a timeout naming it, no process left behind), a rank whose process dies, a rank that raises;
a group whose rank crashes while starting (started once more, where the time allows); and the
secret seed, which no rank can find.
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, REPO, HarnessRun, leaderboard_spec, read_run, run_many, start_harness

from kernelcup.harness.children import MIN_RESTART_S
from kernelcup.harness.spec import JobSpec, Mode, Status
from kernelcup.harness.stats import RANKED_ROUNDS

SHIPPED = REPO / "leaderboards"
ALLREDUCE = SHIPPED / "allreduce"
GEMM_RS = SHIPPED / "gemm_rs"
MULTI = FIXTURES / "multi_gpu"
SECRET = 918273645546372819


def _fixture(name: str) -> str:
    text: str = (MULTI / f"{name}.py.txt").read_text()
    return text


def _ranked(folder: Path, solution: str) -> JobSpec:
    spec: JobSpec = leaderboard_spec(folder, (folder / "solutions" / solution).read_text(), Mode.RANKED,
                                     timeout_s=120, secret_seed=SECRET)
    spec.task.benchmarks = spec.task.tests[-2:]  # GPU-sized benchmarks would take minutes here
    return spec


@pytest.fixture(scope="module")
def runs() -> dict[str, HarnessRun]:
    specs = {
        "gemm_rs": _ranked(GEMM_RS, "reduce_scatter.py"),
        "dies": leaderboard_spec(ALLREDUCE, _fixture("rank1_dies"), timeout_s=60),
        "raises": leaderboard_spec(ALLREDUCE, _fixture("rank1_raises"), timeout_s=60),
        "hunter": leaderboard_spec(ALLREDUCE, _fixture("secret_hunter"), Mode.RANKED, timeout_s=120,
                                   secret_seed=SECRET),
        # A limit with room for every round even on a loaded box; the job ends when they are done.
        "rounds": leaderboard_spec(ALLREDUCE, _fixture("says_its_process"), Mode.RANKED, timeout_s=180,
                                   secret_seed=SECRET),
    }
    specs["rounds"].task.benchmarks = specs["rounds"].task.tests[-2:]
    specs["hunter"].task.benchmarks = specs["hunter"].task.tests[-1:]
    batch: dict[str, HarnessRun] = run_many(specs)
    return batch


# Each leaderboard's ranked run: allreduce's is "rounds", whose submission is allreduce's shipped
# kernel and a line that says its process.
RANKED_RUNS = {"allreduce": "rounds", "gemm_rs": "gemm_rs"}


@pytest.mark.parametrize("leaderboard", sorted(RANKED_RUNS))
def test_a_multi_gpu_leaderboard_ranks_with_every_ranks_time(leaderboard: str, runs: dict[str, HarnessRun]) -> None:
    result = runs[RANKED_RUNS[leaderboard]].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert "on 2 ranks" in result.verdict and result.score_s is not None
    if result.system.device == "cpu":
        assert result.system.ranks == ["rank 0: cpu (gloo)", "rank 1: cpu (gloo)"]
    else:  # the GPU rerun (KERNELCUP_TEST_DEVICE=cuda) on a machine with two cards
        assert [line.split(" = ")[0] for line in result.system.ranks] == ["rank 0: cuda:0", "rank 1: cuda:1"]
    for case in result.benchmarks:
        assert len(case.rank_median_ns) == 2
        # a call's time is its slowest rank's, so the case's median is at least each rank's
        assert case.median_ns is not None and case.median_ns >= 0.99 * min(case.rank_median_ns)


def test_each_ranked_round_of_a_multi_gpu_job_starts_its_ranks_afresh(runs: dict[str, HarnessRun]) -> None:
    # As single-GPU rounds: a process can be a few percent fast or slow for its whole life (the
    # H100's modes), and a group that ran the tests has compiled and cached for their sizes.
    result = runs["rounds"].outcome()
    assert result.status is Status.PASSED, result.verdict
    # Every round ran, or the verdict names those that did not fit (a loaded box); two at least.
    fitted = re.search(rf"timed in (\d) rounds? of {RANKED_ROUNDS}", result.verdict)
    ran = int(fitted.group(1)) if fitted else RANKED_ROUNDS
    assert ran >= 2, result.verdict
    loaded = [line for line in result.stdout.splitlines() if line.startswith("submission loaded in process")]
    # The tests' ranks, then each round's (and the extra round's, where cases disagreed), 2 ranks
    # each (each group in its own PID namespace under the sandbox, so the numbers repeat).
    groups = len(loaded) // 2
    assert len(loaded) % 2 == 0 and groups in (1 + ran, 2 + ran), result.stdout
    assert f"[ranks started {groups}]" in result.stdout
    for case in result.benchmarks:
        assert ran <= len(case.round_median_ns) <= ran + 1 and len(case.rank_median_ns) == 2
        assert case.median_ns is not None and case.ci_low_ns is not None and case.ci_high_ns is not None
        # the interval covers both rounds' medians, and at least the job-to-job floor either side
        assert case.ci_low_ns <= min(case.round_median_ns) and case.ci_high_ns >= max(case.round_median_ns)
        assert case.ci_low_ns <= 0.995 * case.median_ns and case.ci_high_ns >= 1.005 * case.median_ns
        # Where a case's rounds shared ranks (an extra round with no time for a fresh group), it
        # says so, with fewer groups than rounds; its medians can still number `ran`, once a round
        # run in a slow spell is left out (benchmark.ROUND_OUTLIER).
        shared = re.search(r"its (\d+) rounds ran in (\d+) process", case.message)
        if shared:
            assert int(shared.group(2)) < int(shared.group(1)) and int(shared.group(2)) <= groups - 1, case.message


def test_a_rank_that_never_joins_the_collective_times_out_by_name_and_leaves_nothing() -> None:
    marker = f"kcmg{secrets.token_hex(3)}"
    spec = leaderboard_spec(ALLREDUCE, _fixture("rank1_never_joins").replace("@MARKER@", marker), timeout_s=30)
    harness = start_harness()
    stdout, stderr = harness.communicate(spec.to_json(), timeout=90)
    result = read_run(stdout, stderr, harness.returncode, spec.result_key).outcome()
    assert result.status is Status.TIMED_OUT, result.verdict
    assert "rank 1 never joined the collective that rank 0 waited in" in result.verdict
    assert "test 1 of" in result.verdict
    assert not _processes(lambda comm, cmdline: comm == marker)
    assert not _processes(lambda comm, cmdline: "harness.rank_" in cmdline and str(harness.pid) in cmdline)


def test_a_rank_whose_process_dies_ends_the_job_naming_it(runs: dict[str, HarnessRun]) -> None:
    result = runs["dies"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert result.verdict.startswith("rank 1's process exited with code 3 in test 1 of"), result.verdict


def test_a_rank_that_raises_ends_the_job_naming_it(runs: dict[str, HarnessRun]) -> None:
    result = runs["raises"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert "rank 1: the submission raised an exception" in result.verdict
    assert "rank 1 gives up" in result.verdict


def test_no_rank_finds_the_secret_seed(runs: dict[str, HarnessRun]) -> None:
    result = runs["hunter"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert "HUNTER: looked in" in result.stdout
    assert str(SECRET) not in result.to_json()


def test_a_multi_gpu_job_on_a_machine_without_its_gpus_is_an_error_in_words() -> None:
    spec = leaderboard_spec(ALLREDUCE, (ALLREDUCE / "solutions" / "all_reduce.py").read_text(), timeout_s=60)
    spec.device = "cuda"  # the helper would fall back to the CPU here
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has the GPUs")
    result = run_many({"one": spec})["one"].outcome()
    assert result.status is Status.ERROR
    assert "CUDA is not available" in result.verdict or "this machine gave the job" in result.verdict
    assert "started again" not in result.stderr, result.stderr


def _processes(match: object) -> list[int]:
    """Live processes for which ``match(comm, cmdline)`` holds, after a moment to be reaped."""
    time.sleep(0.5)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and match(comm, cmdline):  # type: ignore[operator]
            found.append(int(entry.name))
    return found




def test_a_killed_harness_takes_every_rank_and_reference_with_it() -> None:
    import signal

    marker = f"kcmk{secrets.token_hex(3)}"
    spec = leaderboard_spec(ALLREDUCE, _fixture("rank1_never_joins").replace("@MARKER@", marker), timeout_s=120)
    harness = start_harness()
    assert harness.stdin is not None
    harness.stdin.write(spec.to_json())
    harness.stdin.close()
    until = time.monotonic() + 90
    while len(_processes(lambda comm, cmdline: comm == marker)) < 2 and time.monotonic() < until:
        time.sleep(0.5)
    assert len(_processes(lambda comm, cmdline: comm == marker)) == 2, "the ranks never started"
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    until = time.monotonic() + 10
    while _processes(lambda comm, cmdline: comm == marker or ("kernelcup.harness.rank_reference" in cmdline
                     and f" {harness.pid} " in cmdline)) and time.monotonic() < until:
        time.sleep(0.5)
    left = _processes(lambda comm, cmdline: comm == marker)
    chains = [subprocess.run(["ps", "-o", "pid,ppid,pgid,stat,args", "-p", ",".join(_ancestors(pid))],
                             capture_output=True, text=True).stdout for pid in left]
    assert not left, chains
    reference = "kernelcup.harness.rank_reference"
    assert not _processes(lambda comm, cmdline: reference in cmdline and f" {harness.pid} " in cmdline)


def _ancestors(pid: int) -> list[str]:
    chain = [str(pid)]
    while pid > 1:
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        chain.append(str(pid))
    return chain


def test_the_ranks_also_run_without_the_sandbox_each_in_its_own_user_namespace() -> None:
    from conftest import run_harness

    spec = leaderboard_spec(ALLREDUCE, (ALLREDUCE / "solutions" / "all_reduce.py").read_text(), timeout_s=60)
    result = run_harness(spec, env={"KERNELCUP_HARNESS_SANDBOX": "off"}).outcome()
    assert result.status is Status.PASSED, result.verdict
    assert result.system.isolation.startswith("no sandbox"), result.system.isolation


def _crashing(crashes: int, timeout_s: float) -> JobSpec:
    """A passing solution on a copy of allreduce whose rank 0 dies of SIGSEGV while its group
    starts, before the submission is loaded, on the job's first ``crashes`` group starts."""
    spec: JobSpec = leaderboard_spec(ALLREDUCE, (ALLREDUCE / "solutions" / "all_reduce.py").read_text(),
                                     timeout_s=timeout_s)
    spec.files["reference.py"] += _fixture("crashes_while_starting").replace("@CRASHES@", str(crashes))
    return spec


@pytest.fixture(scope="module")
def crashing() -> dict[str, HarnessRun]:
    batch: dict[str, HarnessRun] = run_many({"once": _crashing(1, 120), "twice": _crashing(2, 120)})
    # Less left than a start again needs; alone, so that its first start fits in what it has.
    batch.update(run_many({"no_time": _crashing(2, MIN_RESTART_S - 5)}))
    return batch


SEGFAULT_WHILE_STARTING = "rank 0's process was killed by a segmentation fault (SIGSEGV) while starting"


def test_a_group_whose_ranks_crash_before_the_submission_loads_is_started_once_more(
    crashing: dict[str, HarnessRun],
) -> None:
    result = crashing["once"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert result.stderr.startswith(f"[kernelcup: the ranks were started again after: {SEGFAULT_WHILE_STARTING}")
    assert result.stderr.count("rank 0 started (") == 2, result.stderr
    assert "[ranks started 2]" in result.stderr


def test_a_group_that_crashes_while_starting_twice_ends_the_job(crashing: dict[str, HarnessRun]) -> None:
    result = crashing["twice"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert result.verdict.startswith(SEGFAULT_WHILE_STARTING), result.verdict
    assert result.stderr.count("rank 0 started (") == 2, result.stderr


def test_a_group_is_not_started_again_without_the_time_for_it(crashing: dict[str, HarnessRun]) -> None:
    result = crashing["no_time"].outcome()
    assert "started again" not in result.stderr and result.stderr.count("rank 0 started (") <= 1, result.stderr
    if result.status is Status.TIMED_OUT:  # a box so loaded that even the first start took its time
        assert "while starting" in result.verdict, result.verdict
        pytest.skip(f"the first start did not fit in {MIN_RESTART_S - 5:.0f} s on this box: {result.verdict}")
    assert result.status is Status.CRASHED, result.verdict
    assert result.verdict.startswith(SEGFAULT_WHILE_STARTING), result.verdict
    assert result.stderr.count("rank 0 started (") == 1, result.stderr
