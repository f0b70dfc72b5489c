"""Settings: the documented defaults in config/kernelcup.yml, overridden by environment variables.

Secrets never live in the file; adapters read their tokens straight from the environment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "config" / "kernelcup.yml"
ENV_PREFIX = "KERNELCUP_"


@dataclass(frozen=True)
class GpuConfig:
    name: str
    runner: str
    peak_bandwidth_gbps: float | None = None
    peak_tflops: float | None = None
    options: dict[str, Any] = field(default_factory=dict)  # runner-specific (Modal GPU string, ...)


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 1_048_576
    max_reply_chars: int = 1800
    heartbeat_s: float = 5.0
    max_attempts: int = 2
    runner_grace_s: float = 60.0
    default_timeout_s: float = 180.0
    submissions_per_hour: int = 30  # per user, every leaderboard and mode; admins exempt; 0: none


@dataclass(frozen=True)
class Settings:
    database_url: str = "sqlite:///var/kernelcup.db"
    leaderboards_dir: Path = Path("leaderboards")
    default_deadline_days: int = 365
    limits: Limits = field(default_factory=Limits)
    gpus: dict[str, GpuConfig] = field(default_factory=dict)
    runners: dict[str, dict[str, Any]] = field(default_factory=dict)
    roles: dict[str, list[str]] = field(default_factory=dict)
    announcements: dict[str, dict[str, str]] = field(default_factory=dict)
    logging: dict[str, str] = field(default_factory=dict)
    # Top-level sections this loader does not read itself (an adapter's own, e.g. ``slack:``),
    # env overrides applied, so a plugin's settings live in the same file without a core change.
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def runner_concurrency(self, runner: str, gpu: str | None = None) -> int:
        """Jobs a runner runs at once: one number for the runner, or per GPU kind when the config
        gives a mapping (``concurrency: {default: 8, B200: 2}``)."""
        value: Any = self.runners.get(runner, {}).get("concurrency", 1)
        if isinstance(value, dict):
            value = value.get(gpu or "default", value.get("default", 1))
        return int(value)

    def concurrency_per_gpu(self, runner: str) -> bool:
        """True when each GPU kind of the runner has its own slots (a lane per GPU kind)."""
        return isinstance(self.runners.get(runner, {}).get("concurrency"), dict)

    def runner_grace_s(self, runner: str) -> float:
        """A runner's limit beyond the harness's (start-up, waiting for a remote GPU, transfer)."""
        return float(self.runners.get(runner, {}).get("grace_s", self.limits.runner_grace_s))


def load_settings(path: Path | None = None, env: dict[str, str] | None = None) -> Settings:
    env = dict(os.environ if env is None else env)
    path = path or Path(env.get(ENV_PREFIX + "CONFIG", DEFAULT_CONFIG))
    raw: dict[str, Any] = yaml.safe_load(path.read_text()) or {}
    _apply_env(raw, env)
    gpus = {
        name: GpuConfig(
            name=name,
            runner=str(entry.get("runner", "local")),
            peak_bandwidth_gbps=entry.get("peak_bandwidth_gbps"),
            peak_tflops=entry.get("peak_tflops"),
            options={k: v for k, v in entry.items() if k not in _GPU_KEYS},
        )
        for name, entry in (raw.get("gpus") or {}).items()
    }
    limits = Limits(**{k: type(getattr(Limits, k))(v) for k, v in (raw.get("limits") or {}).items()})
    return Settings(
        database_url=str(raw.get("database_url", Settings.database_url)),
        leaderboards_dir=Path(raw.get("leaderboards_dir", "leaderboards")),
        default_deadline_days=int(raw.get("default_deadline_days", 365)),
        limits=limits,
        gpus=gpus,
        runners=dict(raw.get("runners") or {}),
        roles={k: as_list(v) for k, v in (raw.get("roles") or {}).items()},
        announcements=dict(raw.get("announcements") or {}),
        logging={k: str(v) for k, v in (raw.get("logging") or {}).items()},
        sections={k: dict(v) for k, v in raw.items() if k not in _READ_KEYS and isinstance(v, dict)},
    )


_READ_KEYS = {"database_url", "leaderboards_dir", "default_deadline_days", "limits", "gpus", "runners", "roles",
              "announcements", "logging"}


_GPU_KEYS = {"runner", "peak_bandwidth_gbps", "peak_tflops"}


def _apply_env(raw: dict[str, Any], env: dict[str, str]) -> None:
    """KERNELCUP_A__B=v sets raw["a"]["b"]; values are parsed as YAML scalars ("2", "true")."""
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX) or key == ENV_PREFIX + "CONFIG":
            continue
        path = key[len(ENV_PREFIX) :].lower().split("__")
        node = raw
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        parsed = yaml.safe_load(value) if value else value
        if isinstance(node.get(path[-1]), list) and not isinstance(parsed, list):
            parsed = as_list(value)  # a list key set from the environment: "a b" or "a,b"
        node[path[-1]] = value if isinstance(parsed, dict) else parsed


def as_list(value: Any) -> list[str]:
    """A list-valued setting: a YAML list, or a string of items separated by commas (when it
    has any: a role name may hold spaces) or else by spaces; never a string taken character by
    character."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = value.split(",") if "," in value else value.split()
        return [item.strip() for item in parts if item.strip()]
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    return [str(value)]
