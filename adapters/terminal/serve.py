"""``kernelcup serve``: the workers and every adapter whose settings are present; the console
chat when no chat adapter is configured; the hand-off socket for terminal commands."""

from __future__ import annotations

import asyncio
import os
import signal
from importlib.metadata import entry_points

import structlog
from rich.console import Console
from sqlalchemy.engine import make_url

from kernelcup.adapters.terminal.handoff_listener import HandoffListener
from kernelcup.adapters.terminal.session import open_app
from kernelcup.core.app import Kernelcup
from kernelcup.core.errors import StoreUnavailable
from kernelcup.core.logging import throttle_accept_errors
from kernelcup.core.plugins import ADAPTERS, build_adapters

log = structlog.get_logger("kernelcup.serve")


def serve(console: bool | None) -> int:
    try:
        app = open_app()
    except StoreUnavailable as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]")
        return 3
    return asyncio.run(_serve(app, console))


async def _serve(app: Kernelcup, console: bool | None) -> int:
    env = dict(os.environ)
    chosen = build_adapters(app.settings, env, lambda name, factory: name != "console" and factory.configured(env))
    # The console is the chat of last resort: adapters that are no chat (the web pages) do not count.
    if console or (console is None and not any(getattr(a, "chat", True) for a in chosen)):
        chosen += build_adapters(app.settings, env, lambda name, _: name == "console")
    chosen.append(HandoffListener(app.settings))  # terminal commands of this box run here
    await app.start()
    _summary(app, [a.name for a in chosen])
    loop = asyncio.get_running_loop()
    throttle_accept_errors(loop)  # the web and Slack HTTP servers share this loop
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    runs = {adapter.name: asyncio.create_task(adapter.run(app)) for adapter in chosen}
    stopper = asyncio.create_task(stop.wait())
    # Chat adapters run until a signal; the console also ends the process at end of input.
    ends = [stopper] + ([runs["console"]] if "console" in runs else [])
    await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
    for adapter in chosen:
        await adapter.stop()
    for task in [*runs.values(), stopper]:
        task.cancel()
    await asyncio.gather(*runs.values(), stopper, return_exceptions=True)
    await app.stop()
    return 0


def _summary(app: Kernelcup, adapters: list[str]) -> None:
    """The one line a start says about itself: what is on, what is off (and why, for a runner),
    which GPUs are served and which database it uses. Nothing else at start is said unasked."""
    installed = set(entry_points(group=ADAPTERS).names)
    runners, runners_off = app.runner_states()
    log.info("serving", adapters=adapters, adapters_off=sorted(installed - set(adapters)), runners=runners,
             runners_off=runners_off, gpus=sorted(app.served_gpus()),
             database=make_url(app.settings.database_url).get_backend_name())
