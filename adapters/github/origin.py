"""Where a submission's answer lives, written as the ``reply_to`` the core keeps for it:
``github:<owner>/<repo>#<number>/<check run id>/<comment id>/<key>`` (the key, a file's path and
mode, marks its comment). After a restart the adapter edits that check run and that comment
again (``kernelcup.core.pipeline.delivery``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "github:"
_FORM = re.compile(r"github:(?P<repo>[^/#]+/[^/#]+)#(?P<number>\d+)/(?P<check>\d+)/(?P<comment>\d+)/(?P<key>.+)")


@dataclass(frozen=True)
class Origin:
    repo: str
    number: int
    check_id: int
    comment_id: int
    key: str

    @property
    def reply_to(self) -> str:
        return f"{PREFIX}{self.repo}#{self.number}/{self.check_id}/{self.comment_id}/{self.key}"

    @classmethod
    def parse(cls, reply_to: str) -> Origin | None:
        match = _FORM.fullmatch(reply_to)
        if match is None:
            return None
        return cls(match["repo"], int(match["number"]), int(match["check"]), int(match["comment"]), match["key"])
