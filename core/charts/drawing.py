"""Charts as PNG bytes, drawn with matplotlib (the ``charts`` extra) on its Agg canvas.

No pyplot: a ``Figure`` on its own canvas keeps no global state, so charts are drawn safely in
the worker threads commands and reports run in, and no display is ever looked for. Without
matplotlib, charts are off and everything else works as before; one log line says so.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import structlog

from kernelcup.core.charts.plots import HistoryPlot, RankingPlot

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

NOTICE = "Charts are off: pip install 'kernelcup[charts]' turns them on."
WIDTH_IN, DPI = 8.0, 100
LOG_SPAN = 20  # scores spanning more than this factor are drawn on a log scale
TIED, SOLE, MINE, THEIRS = "#ea580c", "#2563eb", "#2563eb", "#dc2626"

log = structlog.get_logger(__name__)
_said = threading.Event()  # the notice is logged once per process


def charts_on() -> bool:
    """Whether matplotlib can be imported; the first time it cannot, ``NOTICE`` is logged."""
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        if not _said.is_set():
            _said.set()
            log.warning(NOTICE)
        return False
    return True


def unit_of(values: Sequence[float]) -> tuple[str, float]:
    """The time unit the largest value reads best in, and its size in seconds."""
    top = max(values, default=1.0)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if top >= scale:
            return unit, scale
    return "ns", 1e-9


def ranking_png(plot: RankingPlot) -> bytes:
    return _png(ranking_figure(plot))


def history_png(plot: HistoryPlot) -> bytes:
    return _png(history_figure(plot))


def ranking_figure(plot: RankingPlot) -> Figure:
    """One row per entry, best at the top: the score as a dot, its 95% range as an error bar;
    entries tied within noise in another colour, their rank marked "=" as in the table."""
    from matplotlib.figure import Figure

    entries = plot.entries
    figure = Figure(figsize=(WIDTH_IN, 1.6 + 0.32 * max(len(entries), 1)), dpi=DPI, layout="constrained")
    axes = figure.subplots()
    unit, scale = unit_of([e.high or e.score for e in entries])
    rows = list(range(len(entries)))
    scores = [e.score / scale for e in entries]
    below = [(e.score - e.low) / scale if e.low is not None else 0.0 for e in entries]
    above = [(e.high - e.score) / scale if e.high is not None else 0.0 for e in entries]
    for tied, colour in ((False, SOLE), (True, TIED)):
        shown = [i for i, e in enumerate(entries) if e.tied is tied]
        if shown:
            spans = [[below[i] for i in shown], [above[i] for i in shown]]
            axes.errorbar([scores[i] for i in shown], shown, xerr=spans, fmt="o", color=colour, elinewidth=2,
                          capsize=4)
    axes.set_yticks(rows, [f"{e.label}  {e.user_name}" for e in entries])
    axes.invert_yaxis()
    _scale(axes, "x", [v for e in entries for v in (e.low, e.score, e.high) if v is not None])
    axes.set_xlabel(f"score ({unit}), lower is better; bars: 95% range")
    axes.set_title(plot.title + (" · orange: tied within noise" if any(e.tied for e in entries) else ""))
    axes.grid(axis="x", alpha=0.3)
    return figure


def history_figure(plot: HistoryPlot) -> Figure:
    """Each line's scores as dots over time with its best so far as a staircase; the point of
    the submission the chart is about is ringed."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(WIDTH_IN, 4.0), dpi=DPI, layout="constrained")
    axes = figure.subplots()
    values = [p.score for line in plot.lines for p in line.points]
    unit, scale = unit_of(values)
    end = max((_day(p.at) for line in plot.lines for p in line.points), default=None)
    for line, colour in zip(plot.lines, (MINE, THEIRS), strict=False):
        if not line.points or end is None:
            continue
        times = [_day(p.at) for p in line.points]
        best = [min(p.score for p in line.points[: i + 1]) / scale for i in range(len(line.points))]
        axes.step([*times, end], [*best, best[-1]], where="post", color=colour, label=line.name)
        axes.scatter(times, [p.score / scale for p in line.points], color=colour, s=18, zorder=3)
    marked = [p for p in plot.lines[0].points if p.submission_id == plot.submission_id] if plot.lines else []
    if marked:
        axes.scatter([_day(p.at) for p in marked], [p.score / scale for p in marked], s=160, facecolors="none",
                     edgecolors="black", zorder=4, label=f"#{plot.submission_id}")
    axes.xaxis_date()
    _scale(axes, "y", values)
    axes.set_ylabel(f"score ({unit}), lower is better")
    axes.set_title(plot.title)
    axes.grid(alpha=0.3)
    axes.legend(loc="best")
    figure.autofmt_xdate()
    return figure


def _day(at: datetime) -> float:
    """matplotlib's number for a time (days since its epoch), what a date axis plots."""
    from matplotlib.dates import date2num

    return float(date2num(at))  # type: ignore[no-untyped-call]


def _scale(axes: Axes, which: str, values: Sequence[float]) -> None:
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > LOG_SPAN:
        (axes.set_xscale if which == "x" else axes.set_yscale)("log")


def _png(figure: Figure) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    buffer = io.BytesIO()
    FigureCanvasAgg(figure)  # the figure draws on Agg from now on
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
