"""Pictures for chat: a leaderboard's ranking with its noise ranges, and a ranked submission's
history against the leader, as ``Image`` blocks any adapter can send.

``plots`` reads what a chart shows from the store; ``drawing`` draws it with matplotlib, the
``charts`` extra. Callers ask ``charts_on()`` first: without matplotlib there are no pictures.
A chart that fails to draw is logged and left out: the reply it belongs to goes out without it.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog

from kernelcup.core.charts.drawing import NOTICE, charts_on, history_png, ranking_png
from kernelcup.core.charts.plots import HistoryPlot, RankingPlot
from kernelcup.core.messages import Image

__all__ = ["NOTICE", "charts_on", "history_images", "ranking_images"]

log = structlog.get_logger(__name__)


def ranking_images(plots: Iterable[tuple[str, RankingPlot]]) -> list[Image]:
    """Each (file name, plot) drawn: the ranking with each score's 95% range."""
    out: list[Image] = []
    for name, plot in plots:
        try:
            out.append(Image(name, ranking_png(plot), f"{plot.title}: each score with its 95% range"))
        except Exception:
            log.exception("ranking chart not drawn", chart=name)
    return out


def history_images(plots: Iterable[HistoryPlot]) -> list[Image]:
    """Each submission's history against the leader, drawn."""
    out: list[Image] = []
    for plot in plots:
        name = f"submission-{plot.submission_id}-{plot.gpu}-history.png"
        try:
            out.append(Image(name, history_png(plot), plot.title))
        except Exception:
            log.exception("history chart not drawn", chart=name)
    return out
