"""Process-wide switches kept in the database, so every bot instance sees the same value."""

from __future__ import annotations

from sqlmodel import Session

from kernelcup.core.store.models import Setting

PAUSED = "submissions_paused"


def submissions_paused(session: Session) -> bool:
    row = session.get(Setting, PAUSED)
    return row is not None and row.value == "1"


def set_submissions_paused(session: Session, paused: bool) -> None:
    row = session.get(Setting, PAUSED) or Setting(key=PAUSED, value="0")
    row.value = "1" if paused else "0"
    session.add(row)
