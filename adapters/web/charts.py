"""Score-over-time charts as inline SVG, drawn on the server: the pages need no JavaScript
library (and the machines that serve them may have no network to fetch one)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from kernelcup.core.pipeline.report import format_seconds

PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2")
WIDTH, HEIGHT = 560, 240
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 12, 30


@dataclass(frozen=True)
class Point:
    at: datetime
    value: float  # seconds, lower is better
    label: str = ""  # the dot's tooltip


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[Point]
    step: bool = True  # a best-so-far staircase through the points
    dots: bool = True
    color: str = field(default="")


def _scale(lo: float, hi: float, log: bool) -> tuple[float, float]:
    if log:
        lo, hi = math.log10(lo), math.log10(hi)
    pad = (hi - lo) * 0.08 or (abs(hi) * 0.1 or 1.0)
    return lo - pad, hi + pad


def score_chart(series: Sequence[Series], *, title: str, now: datetime | None = None) -> Markup:
    """An SVG chart of score against time; a log scale when scores span more than 20x."""
    drawn = [s for s in series if s.points]
    if not drawn:
        return Markup('<p class="hint">No ranked results yet.</p>')
    values = [p.value for s in drawn for p in s.points if p.value > 0]
    times = [p.at for s in drawn for p in s.points]
    t0, t1 = min(times), max([*times, now] if now else times)
    if t1 - t0 < timedelta(minutes=1):
        t0, t1 = t0 - timedelta(minutes=30), t1 + timedelta(minutes=30)
    lo, hi = (min(values), max(values)) if values else (1e-6, 1e-3)
    log = hi / lo > 20
    y0, y1 = _scale(lo, hi, log)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(at: datetime) -> float:
        return LEFT + plot_w * (at - t0).total_seconds() / (t1 - t0).total_seconds()

    def y(value: float) -> float:
        v = math.log10(max(value, 1e-15)) if log else value
        return TOP + plot_h * (1 - (v - y0) / (y1 - y0))

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{escape(title)}" '
        'xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" class="plot"/>',
    ]
    for i in range(5):  # y grid and labels
        v = y0 + (y1 - y0) * i / 4
        value = 10**v if log else v
        yy = y(value)
        parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{yy:.1f}" y2="{yy:.1f}" class="grid"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{yy + 4:.1f}" text-anchor="end">{escape(format_seconds(value))}</text>')
    span = t1 - t0
    for i in range(4):  # x labels
        at = t0 + span * i / 3
        label = at.strftime("%H:%M") if span < timedelta(days=2) else at.strftime("%b %d")
        anchor = "start" if i == 0 else "end" if i == 3 else "middle"
        parts.append(f'<text x="{x(at):.1f}" y="{HEIGHT - 10}" text-anchor="{anchor}">{label}</text>')
    for index, s in enumerate(drawn):
        color = s.color or PALETTE[index % len(PALETTE)]
        points = sorted(s.points, key=lambda p: p.at)
        if s.step:
            best, path = points[0].value, [f"M{x(points[0].at):.1f},{y(points[0].value):.1f}"]
            for p in points[1:]:
                best = min(best, p.value)
                path.append(f"H{x(p.at):.1f}V{y(best):.1f}")
            path.append(f"H{x(t1):.1f}")
            parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{color}" stroke-width="2"/>')
        if s.dots:
            for p in points:
                tip = escape(p.label or f"{format_seconds(p.value)} · {p.at:%Y-%m-%d %H:%M} UTC")
                parts.append(f'<circle cx="{x(p.at):.1f}" cy="{y(p.value):.1f}" r="3.5" fill="{color}">'
                             f"<title>{tip}</title></circle>")
    parts.append("</svg>")
    if len(drawn) > 1:
        legend = "".join(f'<span><i style="background:{s.color or PALETTE[i % len(PALETTE)]}"></i>'
                         f"{escape(s.name)}</span>" for i, s in enumerate(drawn))
        parts.append(f'<div class="legend">{legend}</div>')
    return Markup("".join(parts))
