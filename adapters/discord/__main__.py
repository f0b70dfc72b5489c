"""``python -m adapters.discord sync-commands``: register the slash commands with Discord.

Run it after installing or upgrading kernelcup (a new core command appears on Discord only once
the tree is synced). It talks to Discord's REST API only: no gateway, no database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from adapters.discord.adapter import DiscordAdapter
from adapters.discord.config import TOKEN_ENV
from core.config import load_settings


async def sync_commands() -> dict[str, int]:
    adapter = DiscordAdapter(load_settings(), dict(os.environ))
    try:
        await adapter.client.login(adapter.token)
        return await adapter.sync_commands()
    finally:
        await adapter.client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m adapters.discord", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["sync-commands"], help="what to do")
    parser.parse_args(argv)
    if not os.environ.get(TOKEN_ENV, "").strip():
        print(f"Set {TOKEN_ENV} to the bot's token first.", file=sys.stderr)
        return 2
    counts = asyncio.run(sync_commands())
    for where, count in counts.items():
        print(f"{where}: {count} top-level commands registered")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
