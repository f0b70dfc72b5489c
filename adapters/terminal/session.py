"""Opening the embedded kernelcup for a terminal: settings, logs, the store, the runners."""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any

from core.app import Kernelcup
from core.commands.registry import Command, Kind
from core.config import Settings, load_settings
from core.db import check_reachable, make_engine, upgrade
from core.errors import UserError
from core.logging import configure_logging
from core.messages import Actor, Attachment
from core.plugins import load_runners


def terminal_actor() -> Actor:
    name = os.environ.get("KERNELCUP_USER") or getpass.getuser()
    return Actor(identity=f"console:{name}", display_name=name)


def open_app(settings: Settings | None = None, *, log_file: Path | None = None) -> Kernelcup:
    """Raises core.errors.StoreUnavailable when the database cannot be reached."""
    settings = settings or load_settings()
    level = settings.logging.get("level", "INFO")
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        configure_logging(level, "json", stream=log_file.open("a", encoding="utf-8"))
    else:
        configure_logging(level, settings.logging.get("format", "auto"))
    check_reachable(settings.database_url)
    engine = make_engine(settings.database_url)
    upgrade(engine)
    return Kernelcup(settings, engine, load_runners(settings))


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
    return out
