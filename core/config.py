"""Settings: the documented defaults in config/kernelcup.yml, overridden by environment variables.

Secrets never live in the file; adapters read their tokens straight from the environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from kernelcup.core.errors import SetupError

# config/kernelcup.yml, through a link in this package so that an installed wheel carries it too.
DEFAULT_CONFIG = Path(__file__).resolve().parent / "kernelcup.yml"
# A folder kernelcup runs in may carry its own (``kernelcup init`` writes it there), as it carries
# the default leaderboards/ and var/: read where KERNELCUP_CONFIG names no file.
LOCAL_CONFIG = Path("config") / "kernelcup.yml"
ENV_PREFIX = "KERNELCUP_"
MAX_DEADLINE_DAYS = 36500  # a deadline past year 9999 is no date


@dataclass(frozen=True)
class GpuConfig:
    name: str
    runner: str
    peak_bandwidth_gbps: float | None = None
    peak_tflops: float | None = None
    options: dict[str, Any] = field(default_factory=dict)  # runner-specific (Modal GPU string, ...)
    # Cards of one machine a job on this entry gets (``H200x2: {count: 2}``): the most ranks a
    # multi-GPU leaderboard may run on it. For ``cpu``: the most ranks (gloo processes) a job starts.
    count: int = 1

    @property
    def card(self) -> str:
        """The single card this entry is made of: ``card:`` in config, else the name without a
        trailing ``x<count>`` (``H200x2`` -> ``H200``)."""
        explicit = self.options.get("card")
        if explicit:
            return str(explicit)
        return re.sub(rf"x{self.count}$", "", self.name) if self.count > 1 else self.name


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
    """Raises SetupError, naming the file or the key, when the settings cannot be used."""
    env = dict(os.environ if env is None else env)
    path = path or config_path(env)
    raw = _read_file(path)
    _apply_env(raw, env)
    gpus = {
        str(name): GpuConfig(
            name=str(name),
            runner=str(entry.get("runner", "local")),
            peak_bandwidth_gbps=_number(entry, "peak_bandwidth_gbps", f"gpus.{name}", float, None),
            peak_tflops=_number(entry, "peak_tflops", f"gpus.{name}", float, None),
            options={k: v for k, v in entry.items() if k not in _GPU_KEYS},
            count=_card_count(entry, f"gpus.{name}"),
        )
        for name, entry in _section(raw, "gpus").items()
        if _is_section(entry, f"gpus.{name}")
    }
    limits_raw = _section(raw, "limits")
    unknown = sorted(set(limits_raw) - {f.name for f in fields(Limits)})
    if unknown:
        raise SetupError(f"There is no setting limits.{unknown[0]}.", _fix_hint(f"limits.{unknown[0]}"))
    limits = Limits(**{k: _number(limits_raw, k, "limits", type(getattr(Limits, k)), None) for k in limits_raw})
    deadline_days = _number(raw, "default_deadline_days", "", int, 365)
    if not 1 <= deadline_days <= MAX_DEADLINE_DAYS:
        raise SetupError(f"The setting default_deadline_days must be from 1 to {MAX_DEADLINE_DAYS}, not "
                         f"{deadline_days}.", _fix_hint("default_deadline_days"))
    return Settings(
        database_url=str(raw.get("database_url", Settings.database_url)),
        leaderboards_dir=Path(raw.get("leaderboards_dir", "leaderboards")),
        default_deadline_days=deadline_days,
        limits=limits,
        gpus=gpus,
        runners=dict(raw.get("runners") or {}),
        roles={k: as_list(v) for k, v in (raw.get("roles") or {}).items()},
        announcements=dict(raw.get("announcements") or {}),
        logging={k: str(v) for k, v in (raw.get("logging") or {}).items()},
        sections={k: dict(v) for k, v in raw.items() if k not in _READ_KEYS and isinstance(v, dict)},
    )


@cache
def shipped_settings() -> Settings:
    """The documented defaults alone: the shipped file, no environment."""
    return load_settings(DEFAULT_CONFIG, env={})


def runner_chosen(settings: Settings, runner: str) -> bool:
    """Whether the operator asked for ``runner`` in the settings: a GPU entry routes to it that
    the shipped defaults do not route there (one added, or switched with
    ``KERNELCUP_GPUS__H100__RUNNER=modal``), or its ``runners:`` section differs from the shipped
    one. The shipped file routes some GPUs to Modal as a ready example: by themselves they ask
    for nothing, so a runner they name that cannot serve is reported off in the start's summary
    line, not warned about. A runner also counts as chosen where its credentials are set (the
    runner checks those itself)."""
    shipped = shipped_settings()
    ours = {name for name, gpu in settings.gpus.items() if gpu.runner == runner}
    theirs = {name for name, gpu in shipped.gpus.items() if gpu.runner == runner}
    return bool(ours - theirs) or settings.runners.get(runner, {}) != shipped.runners.get(runner, {})


def config_path(env: Mapping[str, str]) -> Path:
    """KERNELCUP_CONFIG, else config/kernelcup.yml in the working folder, else the shipped defaults."""
    named = env.get(ENV_PREFIX + "CONFIG")
    if named:
        return Path(named)
    return LOCAL_CONFIG if LOCAL_CONFIG.is_file() else DEFAULT_CONFIG


def _read_file(path: Path) -> dict[str, Any]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise SetupError(f"Cannot read the config file {path}: {exc.strerror or exc}.",
                         f"Point {ENV_PREFIX}CONFIG at a readable file, or unset it for the defaults.") from exc
    except yaml.YAMLError as exc:
        raise SetupError(f"The config file {path} is not valid YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(raw, dict):
        raise SetupError(f"The config file {path} must hold a mapping of settings, not a {type(raw).__name__}.")
    return raw


def _fix_hint(key: str) -> str:
    return f"Fix it in the config file or in the environment ({ENV_PREFIX}{'__'.join(key.split('.')).upper()})."


def _is_section(value: Any, key: str) -> bool:
    if not isinstance(value, dict):
        raise SetupError(f"The setting {key} must be a mapping of keys to values, not {value!r}.")
    return True


def _section(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key) or {}
    _is_section(value, key)
    return dict(value)


def _number(raw: Mapping[str, Any], key: str, section: str, kind: type[Any], default: Any) -> Any:
    """``raw[key]`` as ``kind`` (int, float); a value that is no number is the operator's to fix."""
    value = raw.get(key)
    if value is None:
        return default
    try:
        if isinstance(value, bool) or (kind is int and isinstance(value, float) and not value.is_integer()):
            raise ValueError(value)
        return kind(value)
    except (TypeError, ValueError):
        name = f"{section}.{key}" if section else key
        whole = "whole " if kind is int else ""
        raise SetupError(f"The setting {name} must be a {whole}number, not {value!r}.", _fix_hint(name)) from None


_READ_KEYS = {"database_url", "leaderboards_dir", "default_deadline_days", "limits", "gpus", "runners", "roles",
              "announcements", "logging"}


_GPU_KEYS = {"runner", "peak_bandwidth_gbps", "peak_tflops", "count"}
MAX_CARDS = 64


def _card_count(entry: dict[str, Any], where: str) -> int:
    count = _number(entry, "count", where, int, 1)
    if not 1 <= count <= MAX_CARDS:
        raise SetupError(f"The setting {where}.count must be from 1 to {MAX_CARDS}, not {count}.",
                         _fix_hint(f"{where}.count"))
    return int(count)


def _apply_env(raw: dict[str, Any], env: dict[str, str]) -> None:
    """KERNELCUP_A__B=v sets raw["a"]["b"]; values are parsed as YAML scalars ("2", "true")."""
    for key, value in env.items():
        if not key.startswith(ENV_PREFIX) or key == ENV_PREFIX + "CONFIG":
            continue
        path = key[len(ENV_PREFIX) :].lower().split("__")
        if not value.strip() and not isinstance(_existing(raw, path), list):
            continue  # empty is unset (a .env line left blank), except a list: emptied
        node = raw
        for name in path[:-1]:
            part = _spelled(node, name)
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        path[-1] = _spelled(node, path[-1])
        parsed = yaml.safe_load(value) if value else value
        if isinstance(node.get(path[-1]), list) and not isinstance(parsed, list):
            parsed = as_list(value)  # a list key set from the environment: "a b" or "a,b"
        node[path[-1]] = value if isinstance(parsed, dict) else parsed


def _existing(raw: dict[str, Any], path: list[str]) -> Any:
    """What the settings hold at ``path`` (environment spelling) now, or None."""
    node: Any = raw
    for name in path:
        if not isinstance(node, dict):
            return None
        node = node.get(_spelled(node, name))
    return node


def _spelled(node: dict[str, Any], lower: str) -> str:
    """The key of ``node`` an environment name means: environment names are upper case, so a key
    the file spells otherwise (the GPU entry ``H100``) is matched regardless of case
    (``KERNELCUP_GPUS__H100__RUNNER=modal`` switches it); a new key is lower case."""
    return next((k for k in node if isinstance(k, str) and k.lower() == lower), lower)


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
