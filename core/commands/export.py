"""Data out: an admin exports runs (``export``); a user chooses to be named in exports
(``publish-name``). The rows and the files: ``kernelcup.core.export``."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from kernelcup.core.commands.registry import CommandContext, Kind, Param, command
from kernelcup.core.errors import UserError
from kernelcup.core.messages import File, Reply, Request, Text
from kernelcup.core.roles import Role

FORMATS = ("parquet", "dataset")


@command(
    "export",
    "a leaderboard's or a season's runs as Parquet, or a Hugging Face datasets folder (zipped)",
    Param("leaderboard", Kind.LEADERBOARD, "leaderboards to export", positional=True, many=True),
    Param("season", Kind.TEXT, "instead: every leaderboard whose deadline falls in a year (2026) or a span "
          "(2026-01-01..2026-07-01)"),
    Param("format", Kind.CHOICE, "parquet (one file) or dataset (a datasets folder, zipped)", choices=FORMATS,
          default="parquet"),
    role=Role.ADMIN,
    group="admin",
)
def export_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.access.visibility import default_code_public
    from kernelcup.core.export.files import dataset_zip, pyarrow, write_parquet
    from kernelcup.core.export.runs import batches, boards_closing_in, boards_of, pseudonym_key
    from kernelcup.core.leaderboards.catalog import missing_leaderboard
    from kernelcup.core.store.db import session_scope

    pyarrow()  # refuse at once, in one line, where the extra is missing
    names, season = list(request.args["leaderboard"] or []), request.args["season"]
    if bool(names) == bool(season):
        raise UserError("Name the leaderboards to export, or a --season.", "e.g. `export vectoradd` or "
                        "`export --season 2026`.")
    now, public = app.now(), default_code_public(app.settings)
    with session_scope(app.engine) as session:
        if season:
            start, end = season_span(str(season))
            boards = boards_closing_in(session, start, end, now, public)
            title = f"kernelcup-season-{str(season).replace('..', '-to-')}"
        else:
            boards = boards_of(session, names, now, public)
            missing = sorted(set(names) - {b.name for b in boards})
            if missing:
                raise missing_leaderboard(session, missing[0])
            title = f"kernelcup-{'-'.join(sorted(names))}"
        if not boards:
            raise UserError(f"No leaderboard's deadline falls in {season}.")
        rows = batches(session, boards, pseudonym_key(session))
        shown = sorted(b.name for b in boards)
        if request.args["format"] == "dataset":
            content = dataset_zip(rows, title, shown, now)
            name = f"{title}-dataset.zip"
        else:
            sink = io.BytesIO()
            write_parquet(rows, sink)
            content, name = sink.getvalue(), f"{title}.parquet"
    return Reply([Text(f"Exported the runs of {', '.join(shown)}.", style="success"),
                  File(name, content, f"runs of {', '.join(shown)}")], ephemeral=True)


def season_span(text: str) -> tuple[datetime, datetime]:
    """``2026`` -> [2026-01-01, 2027-01-01); ``A..B`` -> [A, B), dates or instants, UTC where no zone."""
    try:
        if text.isdigit():
            year = int(text)
            return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
        first, _, last = text.partition("..")
        start, end = (datetime.fromisoformat(part.strip()) for part in (first, last))
    except ValueError as exc:
        raise UserError(f"{text!r} is not a season.", "A year (2026), or 2026-01-01..2026-07-01.") from exc
    start, end = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (start, end))
    if end <= start:
        raise UserError(f"{text!r} ends before it starts.")
    return start, end


@command(
    "publish-name",
    "be named (on) or anonymous (off, the default) in published data sets",
    Param("choice", Kind.CHOICE, "on or off (nothing: show yours)", positional=True, choices=("on", "off")),
)
def publish_name_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.access.users import user_for
    from kernelcup.core.store.db import session_scope

    with session_scope(app.engine) as session:
        user = user_for(session, request.actor)
        if request.args["choice"]:
            user.named_in_exports = request.args["choice"] == "on"
            session.add(user)
        named = user.named_in_exports
    words = (f"Published data sets name you as {request.actor.display_name}." if named
             else "Published data sets show you under a pseudonym (the default); `publish-name on` names you.")
    return Reply([Text(words, style="success" if request.args["choice"] else "plain")], ephemeral=True)
