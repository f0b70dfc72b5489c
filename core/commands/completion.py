"""Autocomplete values for command parameters, the same for every platform that offers it."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from kernelcup.core.commands.registry import Kind
from kernelcup.core.config import Settings
from kernelcup.core.leaderboards.catalog import runnable_gpus
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard

MAX_CHOICES = 25  # Discord's and Slack's limit for a menu


def complete(engine: Engine, settings: Settings, kind: Kind, prefix: str, args: dict[str, Any]) -> list[str]:
    prefix = prefix.lower()
    if kind is Kind.LEADERBOARD:
        with session_scope(engine) as session:
            names = session.exec(
                select(Leaderboard.name).where(Leaderboard.visibility == "public").order_by(col(Leaderboard.name))
            ).all()
        return [n for n in names if n.lower().startswith(prefix)][:MAX_CHOICES]
    if kind is Kind.GPU:
        gpus = list(settings.gpus)
        board_name = args.get("leaderboard")
        if board_name:
            with session_scope(engine) as session:
                # Public ones only, as the names offered: a hidden leaderboard's GPUs would reveal it.
                board = session.exec(select(Leaderboard).where(Leaderboard.name == board_name,
                                                               Leaderboard.visibility == "public")).first()
                if board is not None and board.id is not None:
                    gpus = runnable_gpus(session, board)
        return [g for g in gpus if g.lower().startswith(prefix)][:MAX_CHOICES]
    return []
