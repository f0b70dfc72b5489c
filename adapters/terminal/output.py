"""Where a command's answer goes: Rich blocks for a person, or with ``--json`` one JSON document
for a script. The document has the REST API's shape for the same command (its schemas in
adapters/web/schemas.py, no second shape): a reply as ``POST /api/commands/{name}`` answers it
(for a submission, the final report as ``GET /api/submissions/{id}/report`` answers it, with its
``submission_id``), or ``{"detail", "hint", "kind"}`` where no reply came (no file, no server).

A reply that asks for a missing leaderboard or GPU (``needs_choice``) is held back on a terminal,
so the CLI can ask and send the command again; elsewhere it is one line (text) or the document.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console

from kernelcup.adapters.terminal.render import TerminalRenderer
from kernelcup.core.messages import Reply
from kernelcup.core.wire import reply_to_wire

if TYPE_CHECKING:
    from pathlib import Path


class Output(Protocol):
    """What the embedded, hand-off and remote paths write to."""

    @property
    def console(self) -> Console:
        """Where live progress is drawn."""
        ...

    def reply(self, reply: Reply) -> None: ...

    def fail(self, message: str, hint: str = "", kind: str = "unavailable") -> None: ...


@dataclass(frozen=True)
class Choice:
    """A value the core asked for: the parameter, its options, and the question."""

    param: str
    options: list[str]
    question: str


def choice_of(reply: Reply) -> Choice | None:
    if reply.problem is None or reply.problem.kind != "needs_choice" or not reply.choices:
        return None
    param, options = next(iter(reply.choices.items()))
    question = next((line for line in reply.text().splitlines() if line.strip()), f"Which {param}?")
    return Choice(param, list(options), question)


class TextOutput(TerminalRenderer):
    """Rich blocks on stdout. A choice is held back for the prompt where one can be asked, else
    said in one line naming the option and the values it takes."""

    def __init__(self, console: Console, files_dir: Path, *, asking: bool) -> None:
        super().__init__(console, files_dir)
        self.asking = asking
        self.choice: Choice | None = None
        self.held: Reply | None = None  # the reply that asked for ``choice``

    def reply(self, reply: Reply) -> None:
        self.choice = choice_of(reply)
        self.held = reply if self.choice is not None else None
        if self.choice is None:
            super().reply(reply)
        elif not self.asking:
            choice = self.choice
            self.console.print(f"{choice.question} Choose with --{choice.param}: {', '.join(choice.options)}.",
                               style="bold red", highlight=False, soft_wrap=True)

    def finish(self) -> None:
        """Everything was printed as it came."""


class JsonOutput:
    """One document on stdout when the command ends; progress on stderr only where someone watches."""

    def __init__(self, *, asking: bool) -> None:
        self._console = Console(stderr=True, quiet=not sys.stderr.isatty())
        self.asking = asking
        self.choice: Choice | None = None
        self.held: Reply | None = None
        self.document: dict[str, Any] | None = None
        self._submission_id: int | None = None

    @property
    def console(self) -> Console:
        return self._console

    def reply(self, reply: Reply) -> None:
        self.choice = choice_of(reply) if self.asking else None
        self.held = reply
        self._submission_id = reply.submission_id or self._submission_id
        shaped = reply_to_wire(reply)
        shaped["submission_id"] = shaped["submission_id"] or self._submission_id  # a report names its submission
        self.document = shaped

    def fail(self, message: str, hint: str = "", kind: str = "unavailable") -> None:
        from kernelcup.adapters.web.schemas import ErrorOut

        self.document = ErrorOut(detail=message, hint=hint, kind=kind).model_dump(mode="json")

    def finish(self) -> None:
        if self.document is not None:
            sys.stdout.write(json.dumps(self.document, indent=2, ensure_ascii=False) + "\n")


def ask(choice: Choice, err: Console) -> str | None:
    """The user's pick among ``choice.options`` (a number or a name, several for a GPU list);
    None at end of input or after three answers that name none of them."""
    err.print(choice.question, style="bold", highlight=False)
    for number, option in enumerate(choice.options, 1):
        err.print(f"  {number}. {option}", highlight=False)
    by_name = {option.lower(): option for option in choice.options}
    for _ in range(3):
        try:
            answer = err.input(f"{choice.param} (number or name): ")
        except EOFError:
            return None
        picked = [_pick(word, choice.options, by_name) for word in answer.replace(",", " ").split()]
        if picked and all(picked):
            return ",".join(p for p in picked if p)
        err.print(f"Answer with a number from 1 to {len(choice.options)} or a name.", style="yellow")
    return None


def _pick(word: str, options: list[str], by_name: dict[str, str]) -> str | None:
    if word.isdigit() and 1 <= int(word) <= len(options):
        return options[int(word) - 1]
    return by_name.get(word.lower())
