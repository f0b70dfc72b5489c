"""``python -m kernelcup.adapters.discord sync-commands``: register the slash commands with Discord.

Run it after installing or upgrading kernelcup (a new core command appears on Discord only once
the tree is synced). It talks to Discord's REST API only: no gateway, no database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from kernelcup.adapters.discord.settings import TOKEN_ENV
from kernelcup.core.config import load_settings
from kernelcup.core.errors import SetupError


async def sync_commands() -> dict[str, int]:
    from kernelcup.adapters.discord.adapter import DiscordAdapter  # discord.py: kernelcup[discord]

    adapter = DiscordAdapter(load_settings(), dict(os.environ))
    try:
        await adapter.client.login(adapter.token)
        return await adapter.sync_commands()
    finally:
        await adapter.client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelcup.adapters.discord", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["sync-commands"], help="what to do")
    parser.parse_args(argv)
    if not os.environ.get(TOKEN_ENV, "").strip():
        print(f"Set {TOKEN_ENV} to the bot's token first.", file=sys.stderr)
        return 2
    try:
        counts = asyncio.run(sync_commands())
    except ModuleNotFoundError as exc:
        print(f"The Discord adapter needs the package {exc.name}: pip install 'kernelcup[discord]'", file=sys.stderr)
        return 4
    except SetupError as exc:
        print(f"{exc.message} {exc.hint}".rstrip(), file=sys.stderr)
        return 4
    for where, count in counts.items():
        print(f"{where}: {count} top-level commands registered")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
