"""The harness's orders to the submission's process and the messages it answers with.

One JSON object per line on the channel (``channel.py``), an order under ``op``, a message under
``msg``. Both sides build them with these types: the child its messages, the harness its orders.
The harness reads every message as untrusted (``session.py`` and ``rank_group.py`` check each
value they use); the types name the fields and bind the side that writes them. The tables of
``harness/NOTES.md`` (The harness and the submission's process) say what each one means.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

# --- orders: harness to child ------------------------------------------------------------------


class Load(TypedDict):
    op: Literal["load"]
    workdir: str
    submission: str
    env: dict[str, str]  # the job's build-cache variables
    rendezvous: NotRequired[dict[str, Any]]  # a rank of a multi-GPU job: how to join its group


class Run(TypedDict):
    """A checked call: make the case's inputs, call, ship the output."""

    op: Literal["run"]
    kwargs: dict[str, Any]


class WarmUp(TypedDict):
    op: Literal["warmup"]
    kwargs: dict[str, Any]
    min_s: float
    max_s: float
    cpu: NotRequired[int]  # the core the calling thread is pinned to from now on (harness/cpus.py)


class Time(TypedDict):
    """A timed call; its output stays in the child until ``ship``."""

    op: Literal["time"]
    kwargs: dict[str, Any]
    cpu: NotRequired[int]


class TimeRank(TypedDict):
    op: Literal["time_rank"]
    kwargs: dict[str, Any]


class Ship(TypedDict):
    op: Literal["ship"]


class Staging(TypedDict):
    """The answer to ``need_staging``: a CUDA IPC buffer the harness lends."""

    op: Literal["staging"]
    handle: str
    nbytes: int


class NoStaging(TypedDict):
    op: Literal["no_staging"]


class Exit(TypedDict):
    op: Literal["exit"]


Order = Load | Run | WarmUp | Time | TimeRank | Ship | Staging | NoStaging | Exit

# --- messages: child to harness ----------------------------------------------------------------


class Started(TypedDict):
    msg: Literal["started"]
    device: str  # "cuda" or "cpu"
    startup_s: float


class Loading(TypedDict):
    msg: Literal["loading"]


class Ready(TypedDict):
    msg: Literal["ready"]
    device: str
    info: dict[str, Any]  # torch, CUDA, the GPU (sysinfo)
    load_s: float


class Failure(TypedDict):
    """The job cannot go on: ``no_device``, ``problem_error`` (the leaderboard's code),
    ``tampered`` (the harness's code changed, harness/integrity.py), ``internal_error``."""

    msg: Literal["no_device", "problem_error", "tampered", "internal_error"]
    error: str


class LoadFailure(TypedDict):
    msg: Literal["load_error"]
    kind: str  # syntax, import or missing
    error: str


class Raised(TypedDict):
    msg: Literal["exception"]
    kind: str  # oom, cuda or exception
    error: str


class Warm(TypedDict):
    msg: Literal["warm"]
    calls: int
    seconds: float
    steady: bool
    median_ns: float
    cores: NotRequired[list[int]]  # where the calling thread may run, read back


class Calling(TypedDict):
    """Sent just before a timed call starts."""

    msg: Literal["calling"]


class Timed(TypedDict):
    msg: Literal["timed"]
    time_ns: float
    host_ns: float
    outside_ns: float
    idle_share: float
    waited: bool
    activities: int
    streams: int
    complete: bool  # False: the GPU's record was switched off inside the call
    cores: NotRequired[list[int]]


class RankTimed(TypedDict):
    msg: Literal["timed"]
    time_ns: float
    outside_ns: float
    complete: bool


class Output(TypedDict):
    """An output; its tensors' bytes follow the line or sit in the lent staging buffer."""

    msg: Literal["output"]
    tree: Any
    placements: list[Any]
    fingerprint: Any  # of the inputs (a checked call), None after a timed call
    inputs: list[dict[str, Any]]  # a timed call's input samples (harness/witness.py)


class BadOutput(TypedDict):
    msg: Literal["bad_output"]
    error: str


class NeedStaging(TypedDict):
    msg: Literal["need_staging"]
    nbytes: int


class Notice(TypedDict):
    """A fact for the operator (the result's system notes), not for the contestant."""

    msg: Literal["notice"]
    text: str


Answer = (
    Started | Loading | Ready | Failure | LoadFailure | Raised | Warm | Calling | Timed | RankTimed | Output
    | BadOutput | NeedStaging | Notice
)
