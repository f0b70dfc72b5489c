"""Opening the embedded kernelcup for a terminal: settings, logs, the store, the runners."""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcup.core.commands.registry import Command, Kind
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.errors import UserError
from kernelcup.core.messages import Actor, Attachment

if TYPE_CHECKING:  # the store and the core are imported only by a command that opens them
    from sqlalchemy.engine import Engine

    from kernelcup.core.app import Kernelcup
    from kernelcup.core.pipeline.runner import Runner


def terminal_actor() -> Actor:
    name = terminal_user()
    return Actor(identity=f"console:{name}", display_name=name)


def terminal_user() -> str:
    return os.environ.get("KERNELCUP_USER") or getpass.getuser()


def start_logging(settings: Settings, log_file: Path | None = None) -> None:
    from kernelcup.core.logging import configure_logging

    level = settings.logging.get("level", "INFO")
    if log_file is not None:
        # 0700 when new: the default database lives in the same var/, whose folder must not be
        # writable by others (core/store/sqlite_file.py).
        log_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        configure_logging(level, "json", stream=log_file.open("a", encoding="utf-8"))
    else:
        configure_logging(level, settings.logging.get("format", "auto"))


def open_store(settings: Settings) -> Engine:
    """The database, reachable and on the newest schema (one query when it already is).
    Raises kernelcup.core.errors.StoreUnavailable when the database cannot be reached."""
    from kernelcup.core.store.db import check_reachable, ensure_schema, make_engine

    check_reachable(settings.database_url)
    engine = make_engine(settings.database_url)
    ensure_schema(engine)
    return engine


def open_app(settings: Settings | None = None, *, log_file: Path | None = None,
             runners: Mapping[str, Runner] | Callable[[], Mapping[str, Runner]] | None = None) -> Kernelcup:
    """Raises kernelcup.core.errors.StoreUnavailable when the database cannot be reached. ``runners``:
    default, the registry's, built when a command first needs one."""
    from kernelcup.core.app import Kernelcup
    from kernelcup.core.plugins import load_runners

    settings = settings or load_settings()
    start_logging(settings, log_file)
    engine = open_store(settings)
    chosen = runners if runners is not None else (lambda: load_runners(settings))
    return Kernelcup(settings, engine, chosen)


def read_local_files(cmd: Command, args: dict[str, Any]) -> list[Attachment]:
    """The terminal's files are paths: read them here, as chat platforms upload theirs."""
    out: list[Attachment] = []
    for p in cmd.params:
        value = args.get(p.name)
        if p.kind is Kind.FILE and value:
            path = Path(str(value))
            if not path.is_file():
                raise UserError(f"There is no file {path}.")
            out.append(Attachment(path.name, path.read_bytes()))
            args[p.name] = path.name
        elif p.kind is Kind.FOLDER and value:
            path = Path(str(value))
            if not path.is_dir():
                raise UserError(f"There is no folder {path}.")
            args[p.name] = str(path.resolve())
        elif p.kind is Kind.SOURCE and value and Path(str(value)).expanduser().is_dir():
            # A folder by its path here, so a `kernelcup serve` it is handed to finds the same one.
            args[p.name] = str(Path(str(value)).expanduser().resolve())
    return out
