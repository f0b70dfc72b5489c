"""The ``schedule:`` section of config/kernelcup.yml: reminders, graces, the final standings."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from kernelcup.core.config import Settings

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")
_UNIT_S = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_duration(value: object) -> timedelta:
    """``24h``, ``1h30m``, ``90s``, ``2d``, or a number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return timedelta(seconds=value)
    text = str(value).strip().lower().replace(" ", "")
    parts = _DURATION.findall(text)
    if not text or "".join(number + unit for number, unit in parts) != text:
        raise ValueError(f"cannot read {value!r} as a duration: write it like 24h, 90m, 30s or 2d")
    return timedelta(seconds=sum(float(number) * _UNIT_S[unit] for number, unit in parts))


def _durations(value: object) -> tuple[timedelta, ...]:
    """A YAML list, or the text of one from an environment variable ("[24h, 1h]" or "24h,1h")."""
    items = value if isinstance(value, list | tuple) else str(value).strip("[] ").replace(",", " ").split()
    return tuple(sorted({parse_duration(item) for item in items}, reverse=True))


@dataclass(frozen=True)
class ScheduleConfig:
    """The ``schedule:`` section of config/kernelcup.yml, checked at start."""

    reminders: tuple[timedelta, ...] = (timedelta(hours=24), timedelta(hours=1))
    final_top_n: int = 5
    final_rounds: int = 3
    misfire_grace: timedelta = timedelta(hours=6)
    reminder_grace: timedelta = timedelta(minutes=15)
    final_poll: timedelta = timedelta(seconds=5)
    reconcile: timedelta = timedelta(minutes=5)
    start_delay: timedelta = timedelta(seconds=10)

    @classmethod
    def from_settings(cls, settings: Settings) -> ScheduleConfig:
        raw: dict[str, Any] = dict(settings.sections.get("schedule") or {})
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown schedule setting(s): {', '.join(sorted(unknown))}")
        values: dict[str, Any] = {}
        for name, value in raw.items():
            if name == "reminders":
                values[name] = _durations(value or [])
            elif name in ("final_top_n", "final_rounds"):
                values[name] = int(value)
                if values[name] < 1:
                    raise ValueError(f"schedule.{name} must be at least 1, not {value!r}")
            else:
                values[name] = parse_duration(value)
        return cls(**values)
