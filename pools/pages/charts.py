"""Server-side SVG charts of GPUs used and free (stacked areas) over the last 24 hours. Pure geometry:
the template `pages/_chart.svg.html` draws the paths computed here, so no chart library and no
script is needed, and the chart prints and works without JavaScript."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from . import formatting
from .snapshots import CHART_HOURS, Point

WIDTH, HEIGHT = 320, 132
LEFT, RIGHT, TOP, BOTTOM = 34, 16, 8, 20
PLOT_W, PLOT_H = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
MAX_POINTS = 96


@dataclass(frozen=True)
class Chart:
    pool: str
    title: str
    summary: str
    used_paths: list[str] = field(default_factory=list)
    free_paths: list[str] = field(default_factory=list)
    y_ticks: list[tuple[str, str]] = field(default_factory=list)  # (y, label), coordinates preformatted
    x_ticks: list[tuple[str, str]] = field(default_factory=list)
    latest: Point | None = None
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    tick_left: int = LEFT - 4
    tick_baseline: int = HEIGHT - 4

    @property
    def empty(self) -> bool:
        return self.latest is None


def _segments(points: Sequence[Point], gap: timedelta) -> list[list[Point]]:
    """A gap in the snapshots (beat was down) breaks the area instead of drawing a made-up slope."""
    segments: list[list[Point]] = []
    for point in points:
        if segments and point.at - segments[-1][-1].at <= gap:
            segments[-1].append(point)
        else:
            segments.append([point])
    return segments


def _thin(points: Sequence[Point], start: datetime, span: float) -> list[Point]:
    """At most MAX_POINTS points (one per slot, the one with the most GPUs used, so peaks survive):
    the plot is a few hundred pixels wide, and the page carries one chart per pool."""
    slots: dict[int, Point] = {}
    for point in points:
        slot = int((point.at - start).total_seconds() / span * MAX_POINTS)
        kept = slots.get(slot)
        if kept is None or point.used >= kept.used:
            slots[slot] = point
    return sorted(slots.values(), key=lambda point: point.at)


def _area(xs: list[int], ys: list[float], base: int) -> str:
    # Integer coordinates and implicit line-tos keep a chart near 1 kB of markup.
    line = " ".join(f"{px},{round(py)}" for px, py in zip(xs, ys, strict=True))
    return f"M{xs[0]},{base} L{line} {xs[-1]},{base}Z"


def gpu_chart(pool: str, points: Sequence[Point], now: datetime, interval: timedelta,
              hours: int = CHART_HOURS) -> Chart:
    title = f"{pool}: GPUs used and free, last {hours} hours"
    if not points:
        return Chart(pool, title, f"No usage recorded for {pool} in the last {hours} hours.")
    start = now - timedelta(hours=hours)
    span = (now - start).total_seconds()
    y_max = max(1, *(max(p.total, p.used + p.free) for p in points))

    def x(at: datetime) -> float:
        return LEFT + max(0.0, min(1.0, (at - start).total_seconds() / span)) * PLOT_W

    def y(value: float) -> float:
        return TOP + PLOT_H - value / y_max * PLOT_H

    used_paths, free_paths = [], []
    base = TOP + PLOT_H
    for segment in _segments(_thin(points, start, span), max(3 * interval, timedelta(minutes=15))):
        xs = [round(x(p.at)) for p in segment]
        if len(segment) == 1:  # a lone snapshot still shows, as a thin bar
            segment, xs = [segment[0], segment[0]], [xs[0] - 1, xs[0] + 1]
        # Free is drawn as the whole (used + free) area with used painted over it: one outline each.
        used_paths.append(_area(xs, [y(p.used) for p in segment], base))
        free_paths.append(_area(xs, [y(p.used + p.free) for p in segment], base))

    latest = points[-1]
    peak = max(points, key=lambda p: p.used)
    summary = (f"Now {formatting.number(latest.used)} of {formatting.number(latest.total)} GPUs used and "
               f"{formatting.number(latest.free)} free (at {formatting.absolute(latest.at)}); at most "
               f"{formatting.number(peak.used)} used in the last {hours} hours.")
    y_ticks = [(f"{y(value):.1f}", formatting.number(value)) for value in sorted({0, y_max // 2, y_max})]
    step = hours // 4 or 1
    x_ticks = [(f"{x(now - timedelta(hours=h)):.1f}", "now" if h == 0 else f"\u2212{h} h")
               for h in range(hours, -1, -step)]
    return Chart(pool, title, summary, used_paths, free_paths, y_ticks, x_ticks, latest=latest)
