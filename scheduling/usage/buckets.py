"""The arithmetic of the hourly rollup, pure (no Django): spans of use clipped to an hour, summed per
(pool, platform, project, department, user); the part above each project's deserved GPUs in a pool (borrowed,
preemptible work first, docs/architecture/decisions.md "Usage by priority"); capacity-seconds per pool; and the
seconds a project waited with work pending while its use in a pool was under its deserved quota.

Times are seconds since the epoch (floats); results are whole seconds (GPU-seconds, millicore-seconds,
byte-seconds), rounded once per bucket."""

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

HOUR = 3600

Key = tuple[str, str, str, str, str]  # pool, platform, project, department, user
PoolProject = tuple[str, str]


@dataclass(slots=True)
class Span:
    key: Key
    start: float
    end: float
    gpu: int = 0
    cpu: int = 0  # millicores
    memory: int = 0  # bytes
    preemptible: bool = False
    preempted: bool = False  # the attempt it belongs to was preempted: its GPU-seconds were lost work
    pod: tuple[str, str] | None = None  # (namespace, pod name) of our pods: their utilization can be measured


@dataclass(slots=True)
class Figures:
    gpu_seconds: float = 0.0
    cpu_seconds: float = 0.0
    memory_byte_seconds: float = 0.0
    borrowed_seconds: float = 0.0
    preempted_gpu_seconds: float = 0.0
    # Utilization x GPU-seconds, over the GPU-seconds that were measured: any grouping's weighted average is
    # sum(gpu_util_seconds) / sum(gpu_measured_seconds), and unmeasured time does not count as idle.
    gpu_util_seconds: float = 0.0
    gpu_measured_seconds: float = 0.0

    def rounded(self) -> dict[str, int]:
        return {name: round(getattr(self, name)) for name in self.__slots__}


@dataclass(slots=True)
class ProjectFigures:
    deserved_gpu_seconds: float = 0.0
    starved_seconds: float = 0.0
    pending_seconds: float = 0.0
    departments: set = field(default_factory=set)


def hour_floor(moment: float) -> int:
    return int(moment // HOUR * HOUR)


def hours_of(start: float, end: float) -> range:
    """The hour starts that [start, end) overlaps."""
    if end <= start:
        return range(0)
    return range(hour_floor(start), hour_floor(end - 1e-9) + HOUR, HOUR)


def by_hour(spans: Iterable[Span], first: int, last: int) -> dict[int, list[Span]]:
    """Spans clipped to each hour from `first` to `last` (hour starts, inclusive)."""
    hours: dict[int, list[Span]] = defaultdict(list)
    for span in spans:
        start, end = max(span.start, first), min(span.end, last + HOUR)
        for hour in hours_of(start, end):
            piece_start, piece_end = max(start, hour), min(end, hour + HOUR)
            if piece_end > piece_start:
                hours[hour].append(Span(span.key, piece_start, piece_end, span.gpu, span.cpu, span.memory,
                                        span.preemptible, span.preempted, span.pod))
    return hours


def _borrowed(spans: list[Span], deserved: float) -> list[float]:
    """Per span, its GPU-seconds above `deserved` (the sum of the group's GPUs at each moment over it), the
    preemptible spans' share first: a rate per GPU for each class between consecutive events, integrated once,
    so each span's part is its GPUs times the rate's integral over its own lifetime (n log n)."""
    if sum(span.gpu for span in spans) <= deserved:
        return [0.0] * len(spans)  # never above deserved, even all at once
    events: dict[float, list[int]] = defaultdict(lambda: [0, 0])  # moment -> [delta preemptible, delta other]
    for span in spans:
        index = 0 if span.preemptible else 1
        events[span.start][index] += span.gpu
        events[span.end][index] -= span.gpu
    moments = sorted(events)
    integral_pre, integral_non = [0.0], [0.0]  # cumulative rate integrals at each moment
    pre = non = 0
    for index, moment in enumerate(moments[:-1]):
        pre += events[moment][0]
        non += events[moment][1]
        borrowed = max(0.0, pre + non - deserved)
        from_pre = min(borrowed, pre)
        seconds = moments[index + 1] - moment
        integral_pre.append(integral_pre[-1] + (from_pre / pre * seconds if pre else 0.0))
        integral_non.append(integral_non[-1] + ((borrowed - from_pre) / non * seconds if non else 0.0))

    def at(integral: list[float], moment: float) -> float:
        return integral[bisect_right(moments, moment) - 1]

    return [span.gpu * (at(integral_pre if span.preemptible else integral_non, span.end)
                        - at(integral_pre if span.preemptible else integral_non, span.start)) for span in spans]


def hour_figures(spans: list[Span], deserved: Mapping[PoolProject, float],
                 utilization: Mapping[tuple[str, str], float] | None = None) -> dict[Key, Figures]:
    """The figures of one hour's (clipped) spans, per key; `utilization`: the hour's average percent of the pods
    that were measured."""
    utilization = utilization or {}
    figures: dict[Key, Figures] = defaultdict(Figures)
    groups: dict[PoolProject, list[Span]] = defaultdict(list)
    for span in spans:
        seconds = span.end - span.start
        row = figures[span.key]
        row.gpu_seconds += span.gpu * seconds
        row.cpu_seconds += span.cpu * seconds
        row.memory_byte_seconds += span.memory * seconds
        if span.preempted:
            row.preempted_gpu_seconds += span.gpu * seconds
        percent = utilization.get(span.pod) if span.pod and span.gpu else None
        if percent is not None:
            row.gpu_measured_seconds += span.gpu * seconds
            row.gpu_util_seconds += percent * span.gpu * seconds
        if span.gpu:
            groups[(span.key[0], span.key[2])].append(span)
    for group, members in groups.items():
        for span, borrowed in zip(members, _borrowed(members, deserved.get(group, 0.0)), strict=True):
            figures[span.key].borrowed_seconds += borrowed
    return figures


def covered(intervals: Iterable[tuple[float, float]], start: float, end: float) -> list[tuple[float, float]]:
    """The union of `intervals` clipped to [start, end), sorted and disjoint."""
    merged: list[list[float]] = []
    for low, high in sorted((max(low, start), min(high, end)) for low, high in intervals):
        if high <= low:
            continue
        if merged and low <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], high)
        else:
            merged.append([low, high])
    return [(low, high) for low, high in merged]


def starved_seconds(pending: list[tuple[float, float]], use: list[Span], deserved: float,
                    start: float, end: float) -> tuple[float, float]:
    """(seconds with work pending, seconds with work pending while the GPUs in use were under `deserved`)
    within [start, end): the number that says a project was starved in a pool."""
    waiting = covered(pending, start, end)
    pending_total = sum(high - low for low, high in waiting)
    if not waiting or deserved <= 0:
        return pending_total, 0.0
    deltas: dict[float, int] = defaultdict(int)
    for span in use:
        deltas[max(span.start, start)] += span.gpu
        deltas[min(span.end, end)] -= span.gpu
    # Walk the use steps and the waiting intervals together.
    moments = sorted({start, end, *deltas, *(t for pair in waiting for t in pair)})
    in_use = 0
    starved = 0.0
    for index, moment in enumerate(moments[:-1]):
        in_use += deltas.get(moment, 0)
        following = moments[index + 1]
        if in_use < deserved and any(low <= moment < high for low, high in waiting):
            starved += following - moment
    return pending_total, starved


def capacity_seconds(spans: Iterable[tuple[str, float, float, int]], hour: int) -> dict[str, float]:
    """Per pool, GPU-seconds of capacity in [hour, hour + 1 h) from (pool, start, end, gpus) spans."""
    seconds: dict[str, float] = defaultdict(float)
    for pool, start, end, gpus in spans:
        overlap = min(end, hour + HOUR) - max(start, hour)
        if overlap > 0:
            seconds[pool] += gpus * overlap
    return seconds
