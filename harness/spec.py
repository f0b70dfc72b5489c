"""The wire contract between a runner and the harness: a job spec in, a result out.

Both sides import this module. It needs only the standard library, so it runs unchanged in a
bare GPU image. Everything crosses the wire as JSON with a ``version`` field; a reader refuses
a version it does not know rather than guess.

Channel: the runner starts ``python -m kernelcup.harness`` and writes one JSON spec to its stdin (never
argv or the environment: the spec holds the secret seed and the result key). The harness
writes JSON lines to its own stdout: progress events, then exactly one result line signed
with HMAC-SHA256 under ``result_key``. The submission runs in a child process that never sees
the spec, the key or the harness's stdout, so it cannot forge a result.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

SPEC_VERSION = 1

Case = dict[str, Any]
"""Keyword arguments of one ``generate_input`` call, e.g. ``{"size": 1024, "seed": 31232}``."""


class Mode(StrEnum):
    TEST = "test"
    BENCHMARK = "benchmark"
    RANKED = "ranked"
    PROFILE = "profile"


class Status(StrEnum):
    """How a harness run ended. Only ``PASSED`` counts as success."""

    PASSED = "passed"
    COMPILE_ERROR = "compile_error"  # syntax error, missing custom_kernel, nvcc failure
    FAILED = "failed"  # a wrong answer, or a check that timing or outputs are honest failed
    CRASHED = "crashed"  # exception, segfault, os._exit, CUDA fault, out of memory
    TIMED_OUT = "timed_out"
    ERROR = "error"  # the harness itself or the leaderboard is broken: not the user's fault


class SpecError(ValueError):
    """A spec or result that does not follow this contract."""


@dataclass
class GpuInfo:
    """What the runner knows about the GPU it asked for, for roofline figures."""

    name: str = "cpu"
    peak_bandwidth_gbps: float | None = None
    peak_tflops: float | None = None


@dataclass
class TaskConfig:
    """The parts of a leaderboard's task.yml the harness needs, already parsed by the core."""

    lang: str = "py"  # "py" or "cu"
    main: str = "eval.py"  # for py: the entry file named in task.yml (run only by its own evaluator)
    sources: list[str] = field(default_factory=list)  # for cu: files to compile
    include_dirs: list[str] = field(default_factory=list)
    defines: dict[str, str] = field(default_factory=dict)
    compile_flags: list[str] = field(default_factory=list)
    tests: list[Case] = field(default_factory=list)
    benchmarks: list[Case] = field(default_factory=list)
    ranking_by: str = "last"  # "last" (GPU MODE's default), "mean" or "geom"
    # py: "auto", "standard" (kernelcup's harness) or "custom" (run ``main``): harness/evaluators.py
    evaluator: str = "auto"
    # A multi-GPU leaderboard (task.yml ``multi_gpu: true``): the ranks every case runs on, one
    # process per rank (harness/multi_gpu.py). 0: a single-GPU leaderboard.
    world_size: int = 0


@dataclass
class JobSpec:
    job_id: str
    mode: Mode
    task: TaskConfig
    # every leaderboard file by the name it must have, the submission included
    files: dict[str, str]
    submission_name: str  # which entry of ``files`` is the user's code
    timeout_s: float  # the harness's whole budget for this mode; runners allow more
    device: str = "auto"  # "auto" (cuda when present), "cuda" or "cpu"
    gpu: GpuInfo = field(default_factory=GpuInfo)
    secret_seed: int | None = None  # ranked mode only; mixed into every case seed
    result_key: str = ""  # hex HMAC key for the result line
    # Whose job it is: the build caches it may reuse are those of earlier jobs of the same
    # leaderboard and user, and of the same source (harness/workspace.py, cache_scope). ``leaderboard``
    # names it and its creator, so a board made again under a deleted one's name by another reuses nothing.
    leaderboard: str = ""
    user: str = ""  # the submitter's platform-namespaced identity ("discord:1234")
    version: int = SPEC_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        raw = _load_versioned(text)
        try:
            raw["mode"] = Mode(raw["mode"])
            raw["task"] = TaskConfig(**raw["task"])
            raw["gpu"] = GpuInfo(**raw.get("gpu", {}))
            return cls(**raw)
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"malformed job spec: {exc}") from exc


@dataclass
class CaseResult:
    """One test or benchmark case."""

    case: Case
    passed: bool
    message: str = ""
    # Benchmark statistics, in nanoseconds; absent for tests.
    runs: int = 0
    median_ns: float | None = None
    mean_ns: float | None = None
    min_ns: float | None = None
    max_ns: float | None = None
    std_ns: float | None = None
    ci_low_ns: float | None = None  # confidence interval of the median
    ci_high_ns: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    percent_of_peak: float | None = None
    # Host time inside custom_kernel, median per call (launching, Python, waiting on the GPU).
    host_median_ns: float | None = None
    # Multi-GPU: each rank's median, in rank order; ``median_ns`` above is the slowest rank's.
    rank_median_ns: list[float] = field(default_factory=list)
    # Ranked: each kept round's median, in the order they ran (each round in its own process
    # where time allowed); empty for a single round. The interval above covers all of them.
    round_median_ns: list[float] = field(default_factory=list)


@dataclass
class SystemInfo:
    device: str = "cpu"
    gpu: str = "cpu"
    driver: str = ""
    torch: str = ""
    cuda: str = ""
    triton: str = ""
    python: str = ""
    hostname: str = ""
    sm_clock_mhz_before: float | None = None
    sm_clock_mhz_after: float | None = None
    isolation: str = ""  # how the submission's process was isolated, e.g. "uid 65534 (nobody)"
    # GPU: where the timed calls ran (harness/cpus.py), read back from each process's timing thread.
    timing_cores: str = ""
    # Sampled every 200 ms while benchmarks ran (NVML): the SM and memory clocks' ranges, the
    # hottest the GPU got, the most power it drew, and what held its clock down at some point
    # (e.g. "power cap", "thermal").
    sm_clock_mhz_min: float | None = None
    sm_clock_mhz_max: float | None = None
    memory_clock_mhz_min: float | None = None
    memory_clock_mhz_max: float | None = None
    gpu_temp_c_max: float | None = None
    power_w_max: float | None = None
    clock_limits: list[str] = field(default_factory=list)
    # Multi-GPU: which card ran which rank, in rank order (e.g. "rank 1: cuda:1 = card 3, NVIDIA H100").
    ranks: list[str] = field(default_factory=list)
    # What the harness noticed of the machine, for its operator (e.g. outputs copied through the
    # host where CUDA IPC is unavailable in the sandbox): never a verdict, never the contestant's stderr.
    notes: list[str] = field(default_factory=list)


@dataclass
class Result:
    job_id: str
    mode: Mode
    status: Status
    verdict: str  # one line a user understands
    compile_log: str = ""
    tests: list[CaseResult] = field(default_factory=list)
    benchmarks: list[CaseResult] = field(default_factory=list)
    score_s: float | None = None  # ranked/benchmark score in seconds, lower is better
    # The score from every case's interval low / high (scoring.noise_range): its noise range.
    score_low_s: float | None = None
    score_high_s: float | None = None
    system: SystemInfo = field(default_factory=SystemInfo)
    stdout: str = ""  # the submission's output, capped
    stderr: str = ""
    files: dict[str, str] = field(default_factory=dict)  # full logs, profile reports
    duration_s: float = 0.0
    # Python jobs: seconds per phase (harness/run.py PHASES: until the submission's process was
    # ready, tests, benchmarks, closing; and that process's own start-up).
    phases_s: dict[str, float] = field(default_factory=dict)
    version: int = SPEC_VERSION

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Result:
        raw = dict(raw)
        _check_version(raw)
        try:
            raw["mode"] = Mode(raw["mode"])
            raw["status"] = Status(raw["status"])
            raw["tests"] = [CaseResult(**_known(CaseResult, c)) for c in raw.get("tests", [])]
            raw["benchmarks"] = [CaseResult(**_known(CaseResult, c)) for c in raw.get("benchmarks", [])]
            raw["system"] = SystemInfo(**_known(SystemInfo, raw.get("system", {})))
            return cls(**_known(cls, raw))
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"malformed result: {exc}") from exc

    @classmethod
    def from_json(cls, text: str) -> Result:
        return cls.from_dict(_load_versioned(text))


@dataclass
class Progress:
    """A progress event: phase is compiling, testing, benchmarking or profiling."""

    phase: str
    done: int = 0
    total: int = 0


def sign(result_json: str, key: str) -> str:
    return hmac.new(bytes.fromhex(key), result_json.encode(), hashlib.sha256).hexdigest()


def progress_line(event: Progress) -> str:
    return json.dumps({"event": "progress", **asdict(event)})


def result_line(result: Result, key: str) -> str:
    body = result.to_json()
    return json.dumps({"event": "result", "result": body, "mac": sign(body, key)})


def parse_line(line: str, key: str) -> Progress | Result | None:
    """Read one harness stdout line; None for anything that is not a valid event.

    A result whose MAC does not verify raises: someone other than the harness wrote it.
    """
    try:
        raw = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(raw, dict):
        return None
    if raw.get("event") == "progress":
        try:
            return Progress(str(raw["phase"]), int(raw.get("done", 0)), int(raw.get("total", 0)))
        except (KeyError, TypeError, ValueError):
            return None
    if raw.get("event") == "result":
        body, mac = raw.get("result"), raw.get("mac")
        if not isinstance(body, str) or not isinstance(mac, str):
            raise SpecError("result line without a body or MAC")
        if not hmac.compare_digest(sign(body, key), mac):
            raise SpecError("result line with a bad MAC: not written by the harness")
        return Result.from_json(body)
    return None


class ResultReader:
    """Reads one harness's output, line by line: its first signed result is the job's result.

    A second result line, even one that verifies, refuses the job: the harness writes exactly
    one, so a second means something else held the key or the output (a leftover process).
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self.result: Result | None = None

    def feed(self, line: str) -> Progress | Result | None:
        event = parse_line(line, self.key)
        if isinstance(event, Result):
            if self.result is not None:
                raise SpecError("a second result line followed the harness's result: the job is refused")
            self.result = event
        return event

    def read_all(self, lines: Iterable[str]) -> Result | None:
        for line in lines:
            self.feed(line)
        return self.result


def _load_versioned(text: str) -> dict[str, Any]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise SpecError("expected a JSON object")
    _check_version(raw)
    return raw


def _known(kind: type, raw: Any) -> dict[str, Any]:
    """``raw``'s entries that ``kind`` has fields for. A result may come from a harness of a later
    release on another machine (a Modal image, a GitHub workflow) that reports more: what this
    side does not know it ignores, as long as the version (the meaning of what both know) agrees."""
    if not isinstance(raw, dict):
        raise TypeError(f"expected an object, got {type(raw).__name__}")
    names = {f.name for f in fields(kind)}
    return {k: v for k, v in raw.items() if k in names}


def _check_version(raw: dict[str, Any]) -> None:
    if raw.get("version") != SPEC_VERSION:
        raise SpecError(
            f"unsupported version {raw.get('version')!r}; this side speaks {SPEC_VERSION}"
        )
