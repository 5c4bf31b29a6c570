"""Server-side SVG charts of GPUs used and free (stacked areas) over the last 24 hours: geometry, and the
chart's markup built here (`Chart.html`), so no chart library and no script is needed, and the chart prints
and works without JavaScript. A hundred charts through a template include took longer than the rest of
the page. Two sizes: the pool page's chart with its axes, and the overview's sparkline per pool (`SPARK`).
Until a pool has two snapshots its chart says when the first points come, not an empty plot."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from math import ceil
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
class Frame:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    axes: bool = True

    @property
    def plot_w(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> int:
        return self.height - self.top - self.bottom


LARGE = Frame(WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM)
SPARK = Frame(120, 28, 1, 1, 2, 1, axes=False)


def collecting(points: Sequence[Point], now: datetime, interval: timedelta) -> str:
    """What a chart with fewer than two points says instead (a new install, or a new pool)."""
    if not points:
        minutes = max(1, ceil(interval.total_seconds() / 60))
        return f"Collecting, first point in {minutes} minute{'' if minutes == 1 else 's'}."
    minutes = max(1, ceil((points[-1].at + interval.total_seconds() - now.timestamp()) / 60))
    return f"Collecting, one point so far; the next in {minutes} minute{'' if minutes == 1 else 's'}."


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
    frame: Frame = LARGE

    @property
    def empty(self) -> bool:
        return self.latest is None

    @property
    def width(self) -> int:
        return self.frame.width

    @property
    def height(self) -> int:
        return self.frame.height

    @property
    def html(self) -> SafeString:
        """The chart and its summary (which describes it to screen readers), or the empty state. Ids come
        from the pool's name, unique on a page. A sparkline is described by its own title."""
        if self.empty:
            return format_html('<p class="chart-empty muted" data-testid="chart-collecting">{}</p>', self.summary)
        if not self.frame.axes:
            return format_html('<svg class="sparkline" viewBox="0 0 {} {}" role="img" aria-label="{}">'
                               '<title>{}</title>{}</svg>', self.width, self.height, self.summary, self.summary,
                               self.drawing)
        return format_html(
            '<svg class="gpu-chart" viewBox="0 0 {width} {height}" role="img" aria-labelledby="chart-{id}-title" '
            'aria-describedby="chart-{id}-summary"><title id="chart-{id}-title">{title}</title>{drawing}</svg>\n'
            '<p class="chart-summary" id="chart-{id}-summary">{summary}</p>',
            width=self.width, height=self.height, id=self.pool, title=self.title, drawing=self.drawing,
            summary=self.summary)

    @property
    def drawing(self) -> SafeString:
        """Grid, areas and tick labels: numbers and fixed words only, so nothing to escape."""
        f = self.frame
        grid = "".join(f'<line class="grid" x1="{f.left}" x2="{f.width - f.right}" y1="{y}" y2="{y}"/>'
                       f'<text class="tick" x="{f.left - 4}" y="{y}" text-anchor="end" dominant-baseline="middle">'
                       f'{label}</text>' for y, label in self.y_ticks)
        # Used is painted over the used + free area.
        areas = "".join([*(f'<path class="free" d="{d}"/>' for d in self.free_paths),
                         *(f'<path class="used" d="{d}"/>' for d in self.used_paths)])
        x_axis = "".join(f'<text class="tick" x="{x}" y="{f.height - 4}" text-anchor="middle">{label}</text>'
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
              hours: int = CHART_HOURS, frame: Frame = LARGE) -> Chart:
    """`points` oldest first, `at` in seconds since the epoch, as `snapshots.series` gives them."""
    title = f"{pool}: GPUs used and free, last {hours} hours"
    if len(points) < 2:
        return Chart(pool, title, collecting(points, now, interval), frame=frame)
    span, end = hours * 3600, now.timestamp()
    start = end - span
    _, used, free, total = zip(*points, strict=True)
    y_max = max(1, max(total), max(map(add, used, free)))

    def x(at: float) -> float:  # no clamping: the snapshots are those of the window
        return frame.left + (at - start) / span * frame.plot_w

    def y(value: float) -> float:
        return frame.top + frame.plot_h - value / y_max * frame.plot_h

    used_paths, free_paths = [], []
    base = frame.top + frame.plot_h
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
    if not frame.axes:
        return Chart(pool, title, f"{pool}: {summary}", used_paths, free_paths, latest=latest, frame=frame)
    y_ticks = [(f"{y(value):.1f}", formatting.number(value)) for value in sorted({0, y_max // 2, y_max})]
    step = hours // 4 or 1
    x_ticks = [(f"{x(end - h * 3600):.1f}", "now" if h == 0 else f"\u2212{h} h")
               for h in range(hours, -1, -step)]
    return Chart(pool, title, summary, used_paths, free_paths, y_ticks, x_ticks, latest=latest)
