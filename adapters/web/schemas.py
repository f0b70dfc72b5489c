"""What the REST API returns. Every field is chosen here, explicitly: no table row is ever dumped
whole, so a column added to the store (a secret seed, say) cannot leak by accident."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelcup.core.messages import Reply
from kernelcup.core.wire import reply_to_wire


class ErrorOut(BaseModel):
    detail: str
    hint: str = ""
    kind: str = "invalid"  # kernelcup.core.messages.Refusal kinds, plus "unauthenticated"
    choices: dict[str, list[str]] | None = None  # needs_choice: e.g. {"gpu": ["H100", "A100"]}


class Me(BaseModel):
    user_id: int
    identity: str
    name: str
    role: str


class LeaderboardSummary(BaseModel):
    name: str
    deadline: datetime
    closed: bool
    gpus: list[str]
    entries: int
    lang: str
    hidden: bool = False
    url: str
    # A multi-GPU leaderboard: the GPUs (ranks) every run uses; 0 for a single-GPU one.
    world_size: int = 0


class LeaderboardDetail(LeaderboardSummary):
    description: str
    ranking_by: str
    tests: int
    benchmarks: int
    templates: list[str]
    code_public_after_deadline: bool


class RankingEntry(BaseModel):
    rank: int  # the place in the order
    rank_label: str  # the rank as shown: "2=" where the entry is tied within noise
    user_id: int
    user_name: str
    score_s: float
    # The score's noise range (from every benchmark's interval); entries whose ranges meet tie.
    score_low_s: float | None = None
    score_high_s: float | None = None
    submission_id: int
    submitted_at: datetime
    # From the entry's run when the problem defines them (geometric mean over the benchmark cases).
    gbps: float | None = None
    tflops: float | None = None
    percent_of_peak: float | None = None


class Ranking(BaseModel):
    leaderboard: str
    gpu: str
    entries: list[RankingEntry]


class JobEventOut(BaseModel):
    """A ``progress`` server-sent event: a job's phase, and its ``state`` as JobOut names it."""

    submission_id: int
    job_id: int
    gpu: str
    phase: str
    done: int = 0
    total: int = 0
    queue_position: int | None = None
    finished: bool = False
    state: str | None = None
    run_id: int | None = None
    error: str | None = None


class HistoryPoint(BaseModel):
    at: datetime
    score_s: float
    user_name: str
    submission_id: int


class CaseOut(BaseModel):
    case: dict[str, Any]
    passed: bool
    message: str = ""
    runs: int = 0
    median_s: float | None = None
    min_s: float | None = None
    ci_low_s: float | None = None
    ci_high_s: float | None = None
    round_median_s: list[float] = Field(default_factory=list)  # ranked: each kept round's median
    gbps: float | None = None
    tflops: float | None = None
    percent_of_peak: float | None = None


class JobOut(BaseModel):
    job_id: int
    gpu: str
    # The job's fate (queued, running, completed, errored, timed_out, cancelled); whether the
    # kernel passed is ``passed`` and ``verdict``: a completed job may have failed its checks.
    state: str
    phase: str
    done: int = 0
    total: int = 0
    queue_position: int | None = None
    finished: bool
    error: str | None = None
    passed: bool | None = None  # None until the harness's result is stored
    verdict: str | None = None
    score_s: float | None = None
    rank: int | None = None
    tests: list[CaseOut] = Field(default_factory=list)
    benchmarks: list[CaseOut] = Field(default_factory=list)
    system: dict[str, Any] | None = None
    # stdout, stderr, compile log, profiles: shown with the code (they can echo it), each cut to
    # its first 16 Ki characters; ``log_urls`` streams each one whole.
    logs: dict[str, str] | None = None
    log_urls: dict[str, str] | None = None


class SubmissionSummary(BaseModel):
    id: int
    leaderboard: str
    user_id: int
    user_name: str
    mode: str
    file_name: str
    created_at: datetime
    finished: bool
    passed: bool | None
    outcome: str  # one line per GPU, e.g. "cpu: passed 1.2 ms"
    url: str


class SubmissionOut(SubmissionSummary):
    jobs: list[JobOut]
    code_visible: bool
    code: str | None = None
    events_url: str


class UserOut(BaseModel):
    id: int
    name: str
    submissions: list[SubmissionSummary]


class Accepted(BaseModel):
    submission_id: int
    message: str
    url: str
    events_url: str
    report_url: str


# --- a core Reply on the wire (kernelcup.core.wire makes it; these models document it) --------


class TextOut(BaseModel):
    type: Literal["text"] = "text"
    text: str
    style: str = "plain"


class TableOut(BaseModel):
    type: Literal["table"] = "table"
    columns: list[str]
    rows: list[list[str]]
    title: str = ""


class CodeOut(BaseModel):
    type: Literal["code"] = "code"
    code: str
    language: str = ""


class FileOut(BaseModel):
    type: Literal["file"] = "file"
    name: str
    description: str = ""
    text: str | None = None  # UTF-8 content
    base64: str | None = None  # any other content


class ImageOut(BaseModel):
    type: Literal["image"] = "image"
    name: str
    alt: str
    png_base64: str


class ProgressOut(BaseModel):
    type: Literal["progress"] = "progress"
    job_id: int
    gpu: str
    phase: str
    done: int = 0
    total: int = 0
    queue_position: int | None = None


BlockOut = TextOut | TableOut | CodeOut | FileOut | ImageOut | ProgressOut


class ProblemOut(BaseModel):
    kind: str
    retry_after_s: float | None = None


class ReplyOut(BaseModel):
    ok: bool
    ephemeral: bool = False
    submission_id: int | None = None
    choices: dict[str, list[str]] | None = None
    problem: ProblemOut | None = None
    blocks: list[BlockOut] = Field(default_factory=list)
    text: str = ""  # every block's plain-text fallback


def reply_out(reply: Reply) -> ReplyOut:
    """The wire form read into the documented model: what the API's schema promises."""
    return ReplyOut.model_validate(reply_to_wire(reply))


class AttachmentIn(BaseModel):
    name: str = Field(max_length=200)
    text: str | None = Field(default=None, description="UTF-8 content")
    base64: str | None = Field(default=None, description="any content, base64-encoded (zips)")


class CommandInfo(BaseModel):
    name: str
    help: str
    group: str
    role: str
    params: list[dict[str, Any]]
