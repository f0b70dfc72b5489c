"""The roles a command may require. Apart from the tables (kernelcup.core.store.models re-exports it), so that
the command registry, and with it the terminal's command line, loads without the store."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    USER = "user"
    CREATOR = "creator"
    ADMIN = "admin"
