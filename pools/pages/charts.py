"""Server-side SVG charts of GPUs used and free (stacked areas) over the last 24 hours. Pure geometry:
the template `pages/_chart.svg.html` draws the paths computed here, so no chart library and no
script is needed, and the chart prints and works without JavaScript."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from . import formatting
from .snapshots import CHART_HOURS, Point

WIDTH, HEIGHT = 320, 132
LEFT, RIGHT, TOP, BOTTOM = 34, 8, 8, 20
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM


@dataclass(frozen=True)
class Chart:
    title: str
    summary: str
    used_paths: list[str] = field(default_factory=list)
    free_paths: list[str] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    width: int = WIDTH
    height: int = HEIGHT
    plot: tuple[int, int, int, int] = (LEFT, TOP, PLOT_W, PLOT_H)
    latest: Point | None = None

    @property
    def empty(self) -> bool:
        return self.latest is None

    @property
    def baseline(self) -> int:
        return TOP + PLOT_H


def _segments(points: Sequence[Point], gap: timedelta) -> list[list[Point]]:
    """A gap in the snapshots (beat was down) breaks the area instead of drawing a made-up slope."""
    segments: list[list[Point]] = []
    for point in points:
        if segments and point.at - segments[-1][-1].at <= gap:
            segments[-1].append(point)
        else:
            segments.append([point])
    return segments


def gpu_chart(pool: str, points: Sequence[Point], now: datetime, interval: timedelta,
              hours: int = CHART_HOURS) -> Chart:
    title = f"{pool}: GPUs used and free, last {hours} hours"
    if not points:
        return Chart(title, f"No usage recorded for {pool} in the last {hours} hours.")
    start = now - timedelta(hours=hours)
    span = (now - start).total_seconds()
    y_max = max(1, *(max(p.total, p.used + p.free) for p in points))

    def x(at: datetime) -> float:
        return LEFT + max(0.0, min(1.0, (at - start).total_seconds() / span)) * PLOT_W

    def y(value: float) -> float:
        return TOP + PLOT_H - value / y_max * PLOT_H

    used_paths, free_paths = [], []
    for segment in _segments(points, max(3 * interval, timedelta(minutes=15))):
        xs = [x(p.at) for p in segment]
        if len(segment) == 1:  # a lone snapshot still shows, as a thin bar
            segment, xs = [segment[0], segment[0]], [xs[0] - 1, xs[0] + 1]
        used_line = [f"{px:.1f},{y(p.used):.1f}" for px, p in zip(xs, segment, strict=True)]
        top_line = [f"{px:.1f},{y(p.used + p.free):.1f}" for px, p in zip(xs, segment, strict=True)]
        base = TOP + PLOT_H
        used_paths.append(f"M{xs[0]:.1f},{base} L" + " L".join(used_line) + f" L{xs[-1]:.1f},{base} Z")
        free_paths.append("M" + " L".join(used_line) + " L" + " L".join(reversed(top_line)) + " Z")

    latest = points[-1]
    peak = max(points, key=lambda p: p.used)
    summary = (f"Now {formatting.number(latest.used)} of {formatting.number(latest.total)} GPUs used and "
               f"{formatting.number(latest.free)} free (at {formatting.absolute(latest.at)}); at most "
               f"{formatting.number(peak.used)} used in the last {hours} hours.")
    y_ticks = [(y(value), formatting.number(value)) for value in sorted({0, y_max // 2, y_max})]
    step = hours // 4 or 1
    x_ticks = [(x(now - timedelta(hours=h)), "now" if h == 0 else f"−{h} h") for h in range(hours, -1, -step)]
    return Chart(title, summary, used_paths, free_paths, y_ticks, x_ticks, latest=latest)
