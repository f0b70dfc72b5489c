"""Autogenerate the next revision against a scratch SQLite database at head, so the script
holds exactly what the models changed since. Review it before committing: autogenerate misses
renames and server defaults, and a new non-null column needs a ``server_default``."""

from __future__ import annotations

import argparse
import re
import tempfile

from alembic import command

from kernelcup.core.store.db import MIGRATIONS_DIR, alembic_config, make_engine, upgrade


def next_revision_id() -> str:
    numbers = [
        int(match.group(1))
        for path in (MIGRATIONS_DIR / "versions").glob("*.py")
        if (match := re.match(r"(\d{4})_", path.name))
    ]
    return f"{max(numbers, default=0) + 1:04d}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kernelcup.core.store.migrations")
    parser.add_argument("message", help='what the revision does, e.g. "add job priority"')
    parser.add_argument("--url", help="diff against this database instead of a scratch one")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        url = args.url or f"sqlite:///{scratch}/scratch.db"
        upgrade(url)
        engine = make_engine(url)
        try:
            with engine.begin() as connection:
                command.revision(
                    alembic_config(connection),
                    message=args.message,
                    autogenerate=True,
                    rev_id=next_revision_id(),
                )
        finally:
            engine.dispose()


if __name__ == "__main__":
    main()
