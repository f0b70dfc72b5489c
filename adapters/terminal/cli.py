"""The scriptable ``kernelcup`` command. Every core command becomes a subcommand built from the
registry (so a command added to the core appears here too); ``serve`` and ``db`` are the
terminal's own. A command runs in the ``kernelcup serve`` of the same database when one runs on
this box (adapters/terminal/handoff.py), else embedded; only what it uses is imported.

Exit status: 0 when the request succeeded and, for a submission, every job passed; 1 when the
request was refused or failed (a job failed, an unknown leaderboard); 2 for a command line that
cannot be read (a wrong option); 3 when the database or the server cannot be reached; 4 when the
setup cannot work (a bad setting, a package that is not installed). Errors are one message and
a hint; ``--debug`` (or KERNELCUP_DEBUG=1) shows the stack of an unexpected one."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from kernelcup.adapters.terminal.output import JsonOutput, Output, TextOutput, ask
from kernelcup.adapters.terminal.session import read_local_files, terminal_user
from kernelcup.core.commands.catalog import commands
from kernelcup.core.commands.parsing import fill_positionals
from kernelcup.core.commands.registry import Command, Kind, Param, usage
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.errors import SetupError, StoreUnavailable, UserError
from kernelcup.core.messages import Actor, Attachment, Reply, Request

if TYPE_CHECKING:  # the core, the store and the runners are imported by the commands that use them
    from kernelcup.core.app import Kernelcup
    from kernelcup.core.leaderboards.catalog import SyncReport
    from kernelcup.core.pipeline.runner import Runner

FILES_DIR = Path("var/files")
LOG_FILE = Path("var/kernelcup.log")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_SETUP = 0, 1, 2, 3, 4
TOKEN_ENV = "KERNELCUP_TOKEN"
SERVER_ENV = "KERNELCUP_SERVER"
DEBUG_ENV = "KERNELCUP_DEBUG"

class _Command(TyperCommand):
    def get_help_option(self, ctx: Any) -> Any:
        return _flag_label(super().get_help_option(ctx))


class _Group(TyperGroup):
    def get_help_option(self, ctx: Any) -> Any:
        return _flag_label(super().get_help_option(ctx))


def _flag_label(option: Any) -> Any:
    """A flag takes no value, so its help row shows none (Typer's default says ``<bool>``)."""
    if option is not None and getattr(option, "is_flag", False):
        option.metavar = ""
    return option


app = typer.Typer(help="kernelcup: GPU-kernel leaderboards.", no_args_is_help=True, add_completion=False, cls=_Group)
db_app = typer.Typer(help="Database maintenance.", no_args_is_help=True, cls=_Group)
app.add_typer(db_app, name="db")
_server: dict[str, str | None] = {"url": None}  # --server, set by the callback below
_debug = {"on": False}  # --debug, set by the callback below


@app.callback()
def options(
    server: str = typer.Option(
        None, "--server", envvar=SERVER_ENV, show_default=False, metavar="URL",
        help=f"a kernelcup server's URL: commands go to its HTTP API (token from {TOKEN_ENV}); "
             "default: config web.cli_server, else the embedded kernelcup",
    ),
    debug: bool = typer.Option(False, "--debug", envvar=DEBUG_ENV, metavar="",
                               help="show the stack of an unexpected error"),
) -> None:
    _server["url"] = server
    _debug["on"] = debug


def remote_server() -> str | None:
    """--server / KERNELCUP_SERVER, else the config's web.cli_server; None: the embedded core."""
    if _server["url"]:
        return _server["url"]
    configured = (load_settings().sections.get("web") or {}).get("cli_server")
    return str(configured) if configured else None


@app.command(cls=_Command)
def serve(
    console: bool = typer.Option(
        None, "--console/--no-console", metavar="",
        help="run the terminal chat (default: when no chat adapter is configured)",
    ),
) -> None:
    """Run the bot: workers, scheduler and every adapter whose settings are present."""
    from kernelcup.adapters.terminal.serve import serve as run_serve

    raise typer.Exit(run_serve(console))


@app.command(cls=_Command)
def init(
    folder: str = typer.Argument(".", help="the folder to write into (made if missing)"),
    force: bool = typer.Option(False, "--force", metavar="", help="replace files that exist (other files stay)"),
) -> None:
    """Write a folder to run kernelcup in: the shipped leaderboards, config/kernelcup.yml, .env.example."""
    from kernelcup.adapters.terminal.starter import next_steps, write_starter

    try:
        written = write_starter(Path(folder), force=force)
    except UserError as exc:
        Console(stderr=True).print(f"[red]{escape(exc.message)}[/red] {escape(exc.hint)}", highlight=False)
        raise typer.Exit(EXIT_FAILED) from None
    out = Console()
    boards = {path.parts[1] for path in written if path.parts[0] == "leaderboards" and len(path.parts) > 2}
    out.print(f"[green]Wrote {len(boards)} leaderboards, config/kernelcup.yml and .env.example into "
              f"{escape(str(folder))}.[/green]", highlight=False)
    out.print("Next:", highlight=False)
    for line in next_steps(Path(folder)):
        out.print(f"  {escape(line)}", highlight=False)


@db_app.command("upgrade", cls=_Command)
def db_upgrade() -> None:
    """Bring the database schema up to date (the bot also does this on start)."""
    from kernelcup.core.store.db import check_reachable, upgrade

    out = Console(stderr=True)
    url = load_settings().database_url
    try:  # only the store: no runners, no GPU detection
        check_reachable(url)
        upgrade(url)
    except StoreUnavailable as exc:
        out.print(f"[red]{exc}[/red]")
        raise typer.Exit(EXIT_UNAVAILABLE) from exc
    out.print("[green]The database schema is up to date.[/green]")


JSON_FLAG, OUTPUT_OPTION = "kernelcup_json", "kernelcup_output"  # the parameters every command adds
OPTION_SUFFIX = "__option"  # a positional parameter given by name: ``submit --mode test FILE``


def _typer_command(cmd: Command) -> Callable[..., None]:
    """A Typer command whose signature is built from the core command's parameters. A positional
    parameter may also be named (``--mode``); either way the words fill the ones not named."""
    params = []
    for p in cmd.params:
        params.extend(_typer_params(p))
    params.append(inspect.Parameter(JSON_FLAG, inspect.Parameter.KEYWORD_ONLY, annotation=bool, default=typer.Option(
        False, "--json", metavar="", help="print one JSON document, shaped as the REST API's answer (README)")))
    params.append(inspect.Parameter(OUTPUT_OPTION, inspect.Parameter.KEYWORD_ONLY, annotation=str | None,
                                    default=typer.Option(None, "--output", metavar="text|json",
                                                         help="json: the same as --json", show_default=False)))

    def callback(**values: Any) -> None:
        raise typer.Exit(run(cmd, *_command_line(cmd, values)))

    params.sort(key=lambda param: param.kind)  # arguments before options, each in the registry's order
    callback.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    callback.__doc__ = cmd.help
    return callback


def _typer_params(p: Param) -> list[inspect.Parameter]:
    flags = [f"--{name.replace('_', '-')}" for name in (*p.aliases, p.name)]
    annotation: Any = int if p.kind is Kind.INT else bool if p.kind is Kind.FLAG else str
    if p.many:
        annotation = list[str] | None
    elif p.kind is not Kind.FLAG:
        annotation = annotation | None
    words = f": {', '.join(p.choices)}" if p.choices else ""
    words += "".join(f"; {alias} = {choice}" for alias, choice in p.choice_aliases)
    metavar = p.name.upper()
    if p.kind is Kind.FLAG:
        return [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                                  default=typer.Option(False, flags[-1], help=p.help, metavar=""))]
    option = typer.Option(None, *flags, help=p.help + words, show_default=False, metavar=metavar)
    if not p.positional:
        return [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=option)]
    shown = f"{p.help}{words} (or {flags[-1]})"
    return [
        inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation,
                          default=typer.Argument(None, help=shown, show_default=False, metavar=metavar)),
        inspect.Parameter(p.name + OPTION_SUFFIX, inspect.Parameter.KEYWORD_ONLY, annotation=annotation,
                          default=typer.Option(None, *flags, hidden=True, show_default=False)),
    ]


def _command_line(cmd: Command, values: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The command's arguments from Typer's values, and whether JSON was asked for. Exit 2 for a
    required positional parameter given neither way, or one given both ways."""
    as_json = bool(values.pop(JSON_FLAG, False)) or str(values.pop(OUTPUT_OPTION, None) or "").lower() == "json"
    args: dict[str, Any] = {}
    words: list[str] = []
    for p in cmd.params:
        value = values.get(p.name)
        value = list(value) if isinstance(value, tuple) else value
        if not p.positional:
            args[p.name] = value
            continue
        named = values.get(p.name + OPTION_SUFFIX)
        args[p.name] = list(named) if isinstance(named, tuple) else named
        if value is not None:
            words.extend(value if isinstance(value, list) else [str(value)])
    try:
        fill_positionals(cmd, args, words)
    except UserError as exc:
        _usage_error(f"{exc.message} {exc.hint}")
    missing = [p.name for p in cmd.params if p.positional and p.required and args.get(p.name) in (None, [])]
    if missing:
        _usage_error(f"{cmd.name} needs {' and '.join(missing)}. {usage(cmd)}")
    return args, as_json


def _usage_error(message: str) -> NoReturn:
    Console(stderr=True).print(f"[red]{escape(message)}[/red]", highlight=False)
    raise typer.Exit(EXIT_USAGE)


def run(cmd: Command, args: dict[str, Any], as_json: bool = False) -> int:
    """Run the command where it runs (a server, the ``serve`` of this database, embedded), asking
    for a missing leaderboard or GPU on a terminal and sending it again with the answer."""
    asking = sys.stdin.isatty()
    output: TextOutput | JsonOutput = (JsonOutput(asking=asking) if as_json
                                       else TextOutput(Console(), files_folder(cmd, args), asking=asking))
    try:
        attachments = read_local_files(cmd, args)
    except UserError as exc:
        output.fail(exc.message, exc.hint, exc.kind)
        output.finish()
        return EXIT_FAILED
    while True:
        code = asyncio.run(_dispatch(cmd, dict(args), list(attachments), output))
        if output.choice is None or not output.asking:
            break
        answer = ask(output.choice, Console(stderr=True))
        if answer is None:  # said once, as where no one could be asked
            output.asking = False
            if output.held is not None:
                output.reply(output.held)
            break
        many = any(p.many for p in cmd.params if p.name == output.choice.param)
        args[output.choice.param] = answer.split(",") if many else answer
    output.finish()
    return code


def files_folder(cmd: Command, args: dict[str, Any]) -> Path:
    """Where saved files go: a folder per leaderboard for a command that names one, so the task
    files of one leaderboard never replace another's."""
    value = args.get("leaderboard") if any(p.kind is Kind.LEADERBOARD for p in cmd.params) else ""
    board = "-".join(map(str, value)) if isinstance(value, list) else str(value or "")  # export names several
    name = Path(board).name
    return FILES_DIR / name if name and name not in (".", "..") else FILES_DIR


async def _dispatch(cmd: Command, args: dict[str, Any], attachments: list[Attachment], output: Output) -> int:
    server = remote_server()
    if server:
        try:
            from kernelcup.adapters.terminal.remote import run_remote
        except ModuleNotFoundError as exc:
            raise SetupError(f"Commands for a server ({server}) need the package {exc.name}, which is not "
                             "installed.", "pip install 'kernelcup[remote]'") from None
        token = os.environ.get(TOKEN_ENV) or None
        return await run_remote(cmd, args, attachments, server, output, token)
    return await run_here(cmd, args, attachments, output)


async def run_here(cmd: Command, args: dict[str, Any], attachments: list[Attachment],
                   output: Output) -> int:
    """On this box: in the ``kernelcup serve`` of this database where one answers (its store is
    open and its harness warm), else embedded. A submission's harness starts first, so its
    torch import overlaps the opening of the store."""
    from kernelcup.adapters.terminal.handoff import hand_off

    settings = load_settings()
    user = terminal_user()
    handed = await hand_off(settings, cmd.name, args, attachments, user, output)
    if handed.exit_code is not None:
        return handed.exit_code
    from kernelcup.adapters.terminal.session import start_logging

    start_logging(settings, LOG_FILE)
    import structlog

    said = structlog.get_logger("kernelcup.cli")
    if handed.refused:  # a socket another user could have made: worth a line at every level
        said.warning("refused to hand the command to the socket: running embedded", reason=handed.reason)
    else:
        said.debug("no kernelcup server to hand the command to", reason=handed.reason)
    started = await _start_runners_early(settings) if cmd.name == "submit" else None
    try:
        kernelcup = await asyncio.to_thread(_open, settings, started)
    except BaseException as exc:
        if started is not None:
            await _close_runners(started)
        if not isinstance(exc, StoreUnavailable):
            raise
        output.fail(str(exc))
        return EXIT_UNAVAILABLE
    request = Request(actor=Actor(identity=f"console:{user}", display_name=user), command=cmd.name, args=args,
                      attachments=attachments, from_this_machine=True)
    return await handle_request(kernelcup, request, output)


async def _start_runners_early(settings: Settings) -> dict[str, Runner]:
    """The registry's runners, each started one-shot as soon as it is built: the local runner's
    harness is on its way before another runner's SDK or the store's libraries are imported."""
    from kernelcup.core.plugins import each_runner

    runners: dict[str, Runner] = {}
    try:
        for name, runner in each_runner(settings):
            runners[name] = runner
            start = getattr(runner, "start", None)
            if start is not None:
                await start(one_shot=True)
    except BaseException:
        await _close_runners(runners)
        raise
    return runners


async def _close_runners(runners: dict[str, Runner]) -> None:
    for runner in runners.values():
        close = getattr(runner, "aclose", None)
        if close is not None:
            await close()


def _open(settings: Settings, runners: dict[str, Runner] | None) -> Kernelcup:
    """The store and the core (logging is set up already); without ``runners``, the registry's,
    built only if the command needs one."""
    from kernelcup.adapters.terminal.session import open_store
    from kernelcup.core.app import Kernelcup
    from kernelcup.core.plugins import load_runners

    engine = open_store(settings)
    return Kernelcup(settings, engine, runners if runners is not None else (lambda: load_runners(settings)))


async def handle_request(kernelcup: Kernelcup, request: Request, renderer: Output) -> int:
    report = await asyncio.to_thread(kernelcup.sync_if_empty)
    if report is not None:
        show_sync_errors(report, Console(stderr=True))
    if request.command != "submit":
        reply = await kernelcup.handle(request)
        renderer.reply(reply)
        return EXIT_OK if reply.ok else EXIT_FAILED
    try:
        await kernelcup.start_for_one_submission()
        reply = await kernelcup.handle(request)
        renderer.reply(reply)
        if reply.submission_id is None:
            return EXIT_FAILED
        from kernelcup.adapters.terminal.follow import follow_submission

        final: Reply = await follow_submission(kernelcup, reply.submission_id, renderer.console)
        renderer.reply(final)
        return EXIT_OK if final.ok else EXIT_FAILED
    finally:
        # All of it, runners too: a harness the local runner started for the next job must end
        # (and its pipes close) while the event loop still runs.
        await kernelcup.stop()


def show_sync_errors(report: SyncReport, err: Console) -> None:
    """Leaderboard folders the first start could not load, one line per reason."""
    by_reason: dict[str, list[str]] = {}
    for folder, reason in report.errors.items():
        by_reason.setdefault(reason, []).append(folder)
    for reason, folders in by_reason.items():
        err.print(f"[yellow]Not loaded: {escape(', '.join(sorted(folders)))}: {escape(reason)}[/yellow]",
                  highlight=False)


admin_app = typer.Typer(help="Admin commands.", no_args_is_help=True, cls=_Group)
app.add_typer(admin_app, name="admin")
for _cmd in commands():
    (admin_app if _cmd.group == "admin" else app).command(_cmd.name, help=_cmd.help, cls=_Command)(
        _typer_command(_cmd))


def main() -> None:
    try:
        app(prog_name="kernelcup")
        code: int | str | None = EXIT_OK
    except SystemExit as ended:  # how Typer ends every command
        code = ended.code
    except SetupError as exc:
        Console(stderr=True).print(f"[red]{escape(exc.message)}[/red] {escape(exc.hint)}".rstrip(), highlight=False)
        code = EXIT_SETUP
    except Exception as exc:
        if _debug["on"] or os.environ.get(DEBUG_ENV):
            raise
        Console(stderr=True).print(
            f"[red]kernelcup stopped on an unexpected error: {type(exc).__name__}: {escape(str(exc))}[/red] "
            "Run it again with --debug to see where.", highlight=False)
        code = EXIT_FAILED
    end(code)


def end(code: int | str | None) -> NoReturn:
    """Exit without tearing the interpreter down: clearing SQLAlchemy's, pydantic's and the
    engine's objects module by module takes 0.15-0.3 s that a finished command has no use for
    (BENCHMARKS.md, CLI latency). Output is flushed and exit handlers run first; the log
    flushes every line, and SQLite needs no close to keep what was committed. A thread still
    running (none should be) gets the ordinary exit, which waits for it."""
    if not isinstance(code, int):
        if code is not None:
            print(code, file=sys.stderr)
        code = EXIT_OK if code is None else EXIT_FAILED
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
