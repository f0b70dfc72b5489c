"""A kernelcup web server that runs out of descriptors on purpose, for
``test_connections.py::test_a_flood_of_failed_accepts_is_logged_as_a_few_lines_and_the_server_recovers``.

Usage: ``python tests/web/flood_server.py DB_PATH``. Prints ``{"port": N}`` once serving, then
holds every free descriptor (so each accept fails with EMFILE) until a line ``free`` arrives on
stdin, then gives them back, prints ``{"freed": true}`` and serves until terminated.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys

from kernelcup.adapters.web.adapter import WebAdapter
from kernelcup.core.logging import configure_logging
from kernelcup.core.store.db import make_engine, upgrade
from tests.web.conftest import Clock, ScriptedRunner, build_app, web_settings_of

DESCRIPTORS = 256


def hold_every_descriptor() -> list[int]:
    held = []
    while True:
        try:
            held.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            return held


async def main(db_path: str) -> None:
    configure_logging(fmt="json", stream=sys.stderr)
    engine = make_engine(f"sqlite:///{db_path}")
    upgrade(engine)
    app = build_app(engine, ScriptedRunner(), Clock())
    adapter = WebAdapter(web_settings_of(app.settings, port=0), {})
    serving = asyncio.create_task(adapter.run(app))
    await asyncio.wait_for(adapter.ready.wait(), 20)
    loop = asyncio.get_running_loop()
    command = loop.run_in_executor(None, sys.stdin.readline)  # its thread starts before the flood
    await asyncio.sleep(0.1)
    held = hold_every_descriptor()
    print(json.dumps({"port": adapter.port}), flush=True)
    await command
    for fd in held:
        os.close(fd)
    print(json.dumps({"freed": True}), flush=True)
    await serving


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))
    asyncio.run(main(sys.argv[1]))
