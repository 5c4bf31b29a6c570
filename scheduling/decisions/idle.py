"""When a workload counts as idle: it holds GPUs and every sample of every one of its GPUs stayed under
OSMO_IDLE_GPU_PERCENT for the last OSMO_IDLE_GPU_MINUTES, which needs its pods to have run that long. Pure."""

from datetime import datetime, timedelta


def idle_since(previous: datetime | None, *, peak: float | None, started_at: datetime | None, now: datetime,
               percent: float, minutes: int) -> datetime | None:
    """The start of the current idle stretch, or None. `peak`: the highest figure of any of its GPUs over the last
    `minutes` (None when a pod has none: what we cannot see is never called idle). A stretch found now started at
    least `minutes` ago; one already known keeps its earlier start."""
    if peak is None or peak >= percent or started_at is None:
        return None
    window_start = now - timedelta(minutes=minutes)
    if started_at > window_start:
        return None  # not running long enough for the window to say anything
    if previous is not None and previous <= window_start:
        return previous
    return window_start


def is_fresh(measured_at: datetime | None, now: datetime, stale_seconds: float) -> bool:
    """A figure is shown while the sampler keeps it up to date; after a missed few rounds it is "not measured"."""
    return measured_at is not None and now - measured_at <= timedelta(seconds=stale_seconds)
