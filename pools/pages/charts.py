"""Server-side SVG charts of GPUs used and free (stacked areas) over the last 24 hours: geometry, and the
chart's markup built here (`Chart.html`), so no chart library and no script is needed, and the chart prints
and works without JavaScript. A hundred charts through a template include took longer than the rest of
the page."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from operator import add

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

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

    @property
    def empty(self) -> bool:
        return self.latest is None

    @property
    def html(self) -> SafeString:
        """The chart and its summary (which describes it to screen readers), or the empty state. Ids come
        from the pool's name, unique on a page."""
        if self.empty:
            return format_html('<p class="chart-empty muted">{} Snapshots are stored every few minutes by the '
                               '<code>record_usage_snapshots</code> task.</p>', self.summary)
        return format_html(
            '<svg class="gpu-chart" viewBox="0 0 {width} {height}" role="img" aria-labelledby="chart-{id}-title" '
            'aria-describedby="chart-{id}-summary"><title id="chart-{id}-title">{title}</title>{drawing}</svg>\n'
            '<p class="chart-summary" id="chart-{id}-summary">{summary}</p>',
            width=self.width, height=self.height, id=self.pool, title=self.title, drawing=self.drawing,
            summary=self.summary)

    @property
    def drawing(self) -> SafeString:
        """Grid, areas and tick labels: numbers and fixed words only, so nothing to escape."""
        grid = "".join(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}"/>'
                       f'<text class="tick" x="{LEFT - 4}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                       f'{label}</text>' for y, label in self.y_ticks)
        # Used is painted over the used + free area.
        areas = "".join([*(f'<path class="free" d="{d}"/>' for d in self.free_paths),
                         *(f'<path class="used" d="{d}"/>' for d in self.used_paths)])
        x_axis = "".join(f'<text class="tick" x="{x}" y="{HEIGHT - 4}" text-anchor="middle">{label}</text>'
                         for x, label in self.x_ticks)
        return mark_safe(f"{grid}\n{areas}\n{x_axis}")


def _segments(points: Sequence[Point], gap: float) -> list[list[Point]]:
    """A gap in the snapshots (beat was down) breaks the area instead of drawing a made-up slope."""
    segments: list[list[Point]] = []
    for point in points:
        if segments and point.at - segments[-1][-1].at <= gap:
            segments[-1].append(point)
        else:
            segments.append([point])
    return segments


def _thin(points: Sequence[Point], start: float, span: float) -> list[Point]:
    """At most MAX_POINTS points (one per slot, the one with the most GPUs used, so peaks survive; the later
    one of a tie): the plot is a few hundred pixels wide, and the page carries one chart per pool."""
    slots: dict[int, Point] = {}
    for point in points:
        slot = int((point.at - start) / span * MAX_POINTS)
        kept = slots.get(slot)
        if kept is None or point.used >= kept.used:
            slots[slot] = point
    return sorted(slots.values())


def _area(xs: list[int], ys: list[int], base: int) -> str:
    # Integer coordinates and implicit line-tos keep a chart near 1 kB of markup.
    return f"M{xs[0]},{base} L{' '.join(map('{},{}'.format, xs, ys))} {xs[-1]},{base}Z"


def gpu_chart(pool: str, points: Sequence[Point], now: datetime, interval: timedelta,
              hours: int = CHART_HOURS) -> Chart:
    """`points` oldest first, `at` in seconds since the epoch, as `snapshots.series` gives them."""
    title = f"{pool}: GPUs used and free, last {hours} hours"
    if not points:
        return Chart(pool, title, f"No usage recorded for {pool} in the last {hours} hours.")
    span, end = hours * 3600, now.timestamp()
    start = end - span
    _, used, free, total = zip(*points, strict=True)
    y_max = max(1, max(total), max(map(add, used, free)))

    def x(at: float) -> float:  # no clamping: the snapshots are those of the window
        return LEFT + (at - start) / span * PLOT_W

    def y(value: float) -> float:
        return TOP + PLOT_H - value / y_max * PLOT_H

    used_paths, free_paths = [], []
    base = TOP + PLOT_H
    gap = max(3 * interval, timedelta(minutes=15)).total_seconds()
    # Gaps are found before thinning: the points kept in two neighbouring slots can be further apart than
    # the snapshots between them.
    for run in _segments(points, gap):
        segment = _thin(run, start, span)
        xs = [round(x(p.at)) for p in segment]
        if len(segment) == 1:  # a lone snapshot still shows, as a thin bar
            segment, xs = [segment[0], segment[0]], [xs[0] - 1, xs[0] + 1]
        # Free is drawn as the whole (used + free) area with used painted over it: one outline each.
        used_paths.append(_area(xs, [round(y(p.used)) for p in segment], base))
        free_paths.append(_area(xs, [round(y(p.used + p.free)) for p in segment], base))

    latest = points[-1]
    latest_at = formatting.absolute(datetime.fromtimestamp(latest.at, UTC))
    summary = (f"Now {formatting.number(latest.used)} of {formatting.number(latest.total)} GPUs used and "
               f"{formatting.number(latest.free)} free (at {latest_at}); at most {formatting.number(max(used))} "
               f"used in the last {hours} hours.")
    y_ticks = [(f"{y(value):.1f}", formatting.number(value)) for value in sorted({0, y_max // 2, y_max})]
    step = hours // 4 or 1
    x_ticks = [(f"{x(end - h * 3600):.1f}", "now" if h == 0 else f"\u2212{h} h")
               for h in range(hours, -1, -step)]
    return Chart(pool, title, summary, used_paths, free_paths, y_ticks, x_ticks, latest=latest)
