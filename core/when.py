"""Instants in and out: every deadline is a tz-aware UTC instant, shown in UTC and relative terms."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from kernelcup.core.errors import UserError

_RELATIVE = re.compile(r"^\+(\d+(?:\.\d+)?)\s*([wdhm])$")
_UNITS = {"w": "weeks", "d": "days", "h": "hours", "m": "minutes"}


def parse_when(text: str, now: datetime) -> datetime:
    """``+3d``, ``+12h``, ``+2w``, or ISO 8601 with a zone (``2026-12-31T23:59Z``)."""
    text = text.strip()
    match = _RELATIVE.match(text)
    if match:
        return now + timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError as exc:
        raise UserError(
            f"Cannot read {text!r} as a time.", "Write 2026-12-31T23:59Z, or relative like +3d or +12h."
        ) from exc
    if value.tzinfo is None:
        raise UserError(f"{text!r} has no time zone.", "Add one, e.g. 2026-12-31T23:59Z or +02:00.")
    return value.astimezone(UTC)


def relative(moment: datetime, now: datetime) -> str:
    """'closes in 2 days 3 hours' style, for either direction."""
    delta = moment - now
    seconds = abs(delta.total_seconds())
    parts: list[str] = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        count = int(seconds // size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
            seconds -= count * size
        if len(parts) == 2:
            break
    text = " ".join(parts) or "less than a minute"
    return f"in {text}" if delta.total_seconds() >= 0 else f"{text} ago"


def show_utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
