"""When a pending workload may start (pure: no Django; issue 26 point 4).

An estimate, never a promise: per candidate pool, the GPUs free now, when the running workloads' GPUs come back
(the earlier of their exec timeout and the median run time of the pool's recently finished workloads of their
size), and the workloads ahead in the pool's queue, each taking its GPUs for its own expected run time. The queue
is walked in position order with backfill, as admission does: a later, smaller workload may start in a gap that a
larger one ahead of it cannot use, but never delays one ahead of it. A workload waiting on its quota (QUOTA, LIMIT,
NO_OVER_QUOTA) also waits until its project's (or department's) own running work in the pool frees enough of that
quota. What none of this can foresee (work submitted later at a higher priority, reclaim, nodes lost, a gang's
replicas not fitting on the nodes that free up) is left out, and every answer says what it rests on, in words; with
no basis the answer is "unknown".

Times are seconds since the epoch, GPUs whole GPUs (a gang's total: replicas x per replica).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field
from statistics import median

HISTORY = 50  # finished runs per pool the medians are taken over (the newest)
MIN_HISTORY = 3  # fewer finished runs than this (in a size bucket, else in the pool) are no basis
MAX_AHEAD = 200  # workloads ahead in a queue that are walked; deeper in the queue the answer is "unknown"
CYCLE_SECONDS = 60.0  # "within a minute": the next admission cycles, when the GPUs are free now
QUOTA_CODES = ("QUOTA", "LIMIT", "NO_OVER_QUOTA")
CLOSED = {"MAINTENANCE": "is in maintenance", "OFFLINE": "is offline (its backend has not synced recently)"}
INF = math.inf


@dataclass(frozen=True, slots=True)
class Running:
    """A workload holding GPUs in the pool (admitted, dispatched or running)."""

    gpus: int
    started: float | None  # None: admitted, not running yet (its run is counted from now)
    timeout: float | None  # exec timeout in seconds
    project: str = ""
    department: str = ""
    preempting: bool = False  # being reclaimed: its GPUs come back now


@dataclass(frozen=True, slots=True)
class Queued:
    """A pending workload in the pool's queue."""

    id: str
    gpus: int
    position: int
    timeout: float | None = None


@dataclass(slots=True)
class PoolFacts:
    name: str
    capacity: int  # GPUs of the pool's Ready, schedulable nodes
    free: int  # of those, free now
    running: list[Running] = field(default_factory=list)
    queue: list[Queued] = field(default_factory=list)
    history: list[tuple[int, float]] = field(default_factory=list)  # (GPUs, run seconds), newest first
    status: str = "ONLINE"
    waits: list[tuple[int, float]] = field(default_factory=list)  # (GPUs, seconds queued) of the last started



@dataclass(frozen=True, slots=True)
class Wanted:
    """A pending workload to estimate: its GPUs, candidate pools in order, queue positions and reasons by pool
    ({pool: (code, details)}, details in the API's units: GPUs)."""

    id: str
    gpus: int
    pools: tuple[str, ...]
    positions: dict[str, int]
    reasons: dict[str, tuple[str, dict]] = field(default_factory=dict)
    project: str = ""
    department: str = ""
    waited: float = 0.0  # seconds in the queue so far (this attempt's)


@dataclass(frozen=True, slots=True)
class Estimate:
    pool: str
    position: int | None
    at: float | None  # None: unknown
    basis: str


@dataclass(frozen=True, slots=True)
class Forecast:
    """A workload's estimate: the earliest of its pools' (`at`, `basis`), and each pool's."""

    at: float | None
    basis: str
    pools: tuple[Estimate, ...]


def after_upstream(reason: str) -> Forecast:
    """A workflow's group waiting for others (WAITING): when they end is not foreseen; its reason says which."""
    return Forecast(None, f"unknown: {reason[:1].lower()}{reason[1:]}", ())


def span(seconds: float) -> str:
    """A duration as people say it: "under a minute", "40 min", "2 h", "1.5 h", "3 d"."""
    if seconds < 60:
        return "under a minute"
    if round(seconds / 60) < 60:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        hours = round(seconds / 3600 * 2) / 2
        return f"{hours:g} h"
    return f"{round(seconds / 86400)} d"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def bucket(gpus: int) -> tuple[int, int]:
    """The size bucket of a gang's GPU total, as (low, high): 0, 1, 2, 3-4, 5-8, 9-16, ..."""
    if gpus <= 2:
        return (max(gpus, 0), max(gpus, 0))
    high = 1 << (gpus - 1).bit_length()
    return (high // 2 + 1, high)


def _bucket_words(low: int, high: int) -> str:
    if low == high:
        return "with no GPU" if low == 0 else f"of {_plural(low, 'GPU')}"
    return f"of {low}-{high} GPUs"


class RunTimes:
    """The medians of a pool's recent run times (or waits: `words` names what the samples are), per size bucket
    where there are enough, else over the pool."""

    def __init__(self, pool: str, history: list[tuple[int, float]],
                 words: str = "the last {n} finished workloads{size} in pool {pool}"):
        self.pool, self.words = pool, words
        recent = [(gpus, max(0.0, seconds)) for gpus, seconds in history[:HISTORY]]
        self.all = sorted(seconds for _, seconds in recent)
        self.by_bucket: dict[tuple[int, int], list[float]] = {}
        for gpus, seconds in recent:
            self.by_bucket.setdefault(bucket(gpus), []).append(seconds)
        for samples in self.by_bucket.values():
            samples.sort()

    def _samples(self, gpus: int) -> tuple[list[float], str] | None:
        samples = self.by_bucket.get(bucket(gpus), [])
        if len(samples) >= MIN_HISTORY:
            size = " " + _bucket_words(*bucket(gpus))
            return samples, self.words.format(n=len(samples), size=size, pool=self.pool)
        if len(self.all) >= MIN_HISTORY:
            return self.all, self.words.format(n=len(self.all), size="", pool=self.pool)
        return None

    def typical(self, gpus: int) -> tuple[float, str] | None:
        """(median run time, what it is the median of), or None without enough history."""
        found = self._samples(gpus)
        if found is None:
            return None
        samples, words = found
        return median(samples), words

    def remaining(self, gpus: int, elapsed: float) -> tuple[float, str] | None:
        """How much longer a run that has lasted `elapsed` is expected to last: the median of the runs that lasted
        longer, minus `elapsed`; None without history, or when no recent run lasted as long."""
        found = self._samples(gpus)
        if found is None:
            return None
        samples, words = found
        longer = samples[bisect_right(samples, elapsed):]
        if not longer:
            return None
        return median(longer) - elapsed, words


@dataclass(frozen=True, slots=True)
class _Release:
    at: float
    gpus: int
    source: str  # "timeout", "history", "reclaim", "queue"
    project: str = ""
    department: str = ""
    words: str = ""  # history: what the median is of


class _Profile:
    """Free GPUs over time from now: a step function kept as breakpoints (`times`) and the free GPUs from each
    (`free`), for conservative backfill (a reservation never makes an earlier one later)."""

    def __init__(self, now: float, free: int, releases: list[_Release]):
        self.times, self.free = [now], [free]
        for release in sorted(releases, key=lambda r: r.at):
            at = max(release.at, now)
            if at > self.times[-1]:
                self.times.append(at)
                self.free.append(self.free[-1])
            self.free[-1] += release.gpus

    def earliest(self, need: int, duration: float, after: int = 0) -> float | None:
        """The first breakpoint (from index `after`) from which `need` GPUs are free for `duration`: one pass over
        the runs of segments with enough free."""
        times, free = self.times, self.free
        last, first = len(times) - 1, None
        for j in range(after, last + 1):
            if free[j] < need:
                first = None
                continue
            if first is None:
                first = j
            if j == last or times[j + 1] - times[first] >= duration:
                return times[first]
        return None

    def _split(self, at: float) -> int:
        i = bisect_left(self.times, at)
        if i < len(self.times) and self.times[i] == at:
            return i
        self.times.insert(i, at)
        self.free.insert(i, self.free[i - 1])
        return i

    def reserve(self, start: float, duration: float, gpus: int) -> None:
        i = self._split(start)
        j = self._split(start + duration) if duration < INF else len(self.times)
        for k in range(i, j):
            self.free[k] -= gpus


def _running_releases(facts: PoolFacts, times: RunTimes, now: float) -> list[_Release]:
    """When each running workload's GPUs come back: now for one being reclaimed; else the earlier of its exec
    timeout and its expected end from the pool's run times; never, as far as we know, without either."""
    releases = []
    for run in facts.running:
        tag = {"project": run.project, "department": run.department}
        if run.preempting:
            releases.append(_Release(now, run.gpus, "reclaim", **tag))
            continue
        elapsed = max(0.0, now - run.started) if run.started is not None else 0.0
        deadline = now - elapsed + run.timeout if run.timeout else None
        expected = times.remaining(run.gpus, elapsed)
        if expected is not None and (deadline is None or now + expected[0] < deadline):
            releases.append(_Release(now + expected[0], run.gpus, "history", words=expected[1], **tag))
        elif deadline is not None:
            releases.append(_Release(max(now, deadline), run.gpus, "timeout", **tag))
    return releases


def _duration(gpus: int, timeout: float | None, times: RunTimes) -> float:
    """How long a queued workload will hold its GPUs once started: the median run time of its size, else its exec
    timeout (the earlier of the two when both are known), else for ever (as far as we know)."""
    typical = times.typical(gpus)
    if typical is not None and (not timeout or typical[0] < timeout):
        return typical[0]
    return timeout or INF


def _lead(seconds: float) -> str:
    return "within a minute: " if seconds < 60 else f"about {span(seconds)}: "


def _why(releases: list[_Release], until: float, now: float, pool: str, free: int, need: int,
         scattered: bool) -> str:
    """The basis of a start at `until` in words: what frees the GPUs by then."""
    came = [r for r in releases if r.at <= until]
    parts = []
    timeouts = [r for r in came if r.source == "timeout"]
    if timeouts:
        parts.append(f"{_plural(len(timeouts), 'running workload')} reach"
                     + ("es its exec timeout" if len(timeouts) == 1 else " their exec timeouts"))
    history = [r for r in came if r.source == "history"]
    if history:
        words = sorted({r.words for r in history})
        parts.append(f"{_plural(len(history), 'running workload')} end{'s' if len(history) == 1 else ''} (as "
                     f"expected from the median run time of {'; '.join(words)})")
    reclaimed = [r for r in came if r.source == "reclaim"]
    if reclaimed:
        parts.append(f"{_plural(len(reclaimed), 'workload')} being reclaimed stop{'s' if len(reclaimed) == 1 else ''}")
    queued = [r for r in came if r.source == "queue"]
    if queued:
        parts.append(f"{_plural(len(queued), 'workload')} ahead in the queue "
                     f"finish{'es' if len(queued) == 1 else ''} first")
    freed = sum(r.gpus for r in came if r.source != "queue")
    lead = _lead(until - now)
    if not parts or until <= now:
        if scattered:
            return (f"{lead}{free} GPUs are free in pool {pool} now, enough by count for its {need}, though not on "
                    "few enough nodes for its replicas at the last admission cycle")
        return f"{lead}{free} GPUs are free in pool {pool} now (it needs {need}); the next admission cycles should " \
               "admit it"
    return f"{lead}{_plural(freed, 'GPU')} free up in pool {pool} when {' and '.join(parts)}"


def _quota_wait(wanted: Wanted, code: str, details: dict, releases: list[_Release], now: float,
                pool: str) -> tuple[float | None, str]:
    """When the project's (or department's) own running work in the pool frees the quota this workload waits for:
    (time, words), or (None, why unknown)."""
    unit, name = details.get("unit", "project"), details.get("name", "")
    resource = details.get("resource", "gpu")
    if resource != "gpu":
        return None, f"unknown: it waits for {unit} {name}'s {resource} quota in pool {pool}, which estimates do not " \
                     "follow (they count GPUs)"
    bound = details.get("limit") if code == "LIMIT" else details.get("deserved")
    used = details.get("in_use_guaranteed") if code == "QUOTA" else details.get("in_use")
    try:
        short = float(details.get("requested") or 0) - (float(bound or 0) - float(used or 0))
    except (TypeError, ValueError):
        return None, f"unknown: it waits for {unit} {name}'s quota in pool {pool}"
    mine = sorted((r for r in releases if r.source != "queue"
                   and (r.project == name if unit == "project" else r.department == name)), key=lambda r: r.at)
    freed = 0.0
    for count, release in enumerate(mine, 1):
        if freed >= short:
            break
        freed += release.gpus
        if freed >= short:
            return release.at, (f"{unit} {name} gets {_plural(math.ceil(short), 'GPU')} of its quota back in pool "
                                f"{pool} when {count} of its running workloads end" + ("s" if count == 1 else ""))
    if short <= 0:
        return now, ""
    return None, (f"unknown: it waits for {unit} {name}'s quota in pool {pool}, and none of enough of its running "
                  "work there has a foreseeable end (no exec timeout, no run-time history)")


def _walk(facts: PoolFacts, wanted: dict[str, Wanted], now: float) -> dict[str, Estimate]:
    """Every wanted workload's estimate in one pool: the queue walked once, in position order."""
    times = RunTimes(facts.name, facts.history)
    releases = sorted(_running_releases(facts, times, now), key=lambda r: r.at)
    profile = _Profile(now, max(0, facts.free), releases)
    deepest = max(w.positions[facts.name] for w in wanted.values())
    result: dict[str, Estimate] = {}
    queue = sorted((q for q in facts.queue if q.position <= deepest), key=lambda q: (q.position, q.id))
    walked = 0
    for item in queue:
        want = wanted.get(item.id)
        if want is not None:
            result[item.id] = _one(facts, want, item, profile, releases, times, now, walked)
        if walked >= MAX_AHEAD:
            continue
        walked += 1
        if item.gpus <= 0 or item.gpus > facts.capacity:
            continue  # takes no GPUs, or never fits: holds nothing back
        duration = _duration(item.gpus, item.timeout, times)
        start = profile.earliest(item.gpus, duration)
        if start is None:
            continue
        profile.reserve(start, duration, item.gpus)
        if duration < INF:
            insort(releases, _Release(start + duration, item.gpus, "queue"), key=lambda r: r.at)
    for want in wanted.values():  # wanted but not found in the queue as loaded (it moved since): alone
        if want.id not in result:
            alone = Queued(want.id, want.gpus, want.positions[facts.name])
            result[want.id] = _one(facts, want, alone, _Profile(now, max(0, facts.free), releases), releases, times,
                                   now, 0)
    return result


def _one(facts: PoolFacts, want: Wanted, item: Queued, profile: _Profile, releases: list[_Release],
         times: RunTimes, now: float, ahead: int) -> Estimate:
    pool, need = facts.name, want.gpus
    code, details = want.reasons.get(pool, ("", {}))

    def unknown(words: str) -> Estimate:
        return Estimate(pool, item.position, None, f"unknown: {words}")

    if facts.status in CLOSED:
        return unknown(f"pool {pool} {CLOSED[facts.status]}")
    if ahead >= MAX_AHEAD:
        return unknown(f"more than {MAX_AHEAD} workloads are ahead of it in pool {pool}'s queue")
    if need <= 0:
        return unknown("it asks for no GPU, and estimates count GPUs")
    if need > facts.capacity:
        return unknown(f"it needs {need} GPUs, more than the {facts.capacity} of pool {pool}'s ready nodes")
    duration = _duration(need, item.timeout, times)
    scattered = code in ("CAPACITY", "GANG") and profile.free[0] >= need
    # GPUs free by count but not placeable now: wait for the next change of what is free.
    start = profile.earliest(need, duration, after=1 if scattered else 0)
    if start is None:
        waited = _recent_waits(facts, want, item, now)
        if waited is not None:
            return waited
        if scattered:
            return unknown(f"{profile.free[0]} GPUs are free in pool {pool}, but not on few enough nodes for its "
                           "replicas, and no running workload there has a foreseeable end (no exec timeout, no "
                           "run-time history)")
        return unknown(f"it needs {need} GPUs in pool {pool} ({facts.free} free now), and not enough of the running "
                       "work there has a foreseeable end (no exec timeout, no finished workloads to learn run times "
                       "from)")
    words = _why(releases, start, now, pool, profile.free[0], need, scattered)
    if code in QUOTA_CODES:
        quota_at, quota_words = _quota_wait(want, code, details, releases, now, pool)
        if quota_at is None:
            return Estimate(pool, item.position, None, quota_words)
        if quota_words and quota_at > start:
            start = quota_at
            words = f"{_lead(start - now)}{quota_words}"
        elif quota_words:
            words = f"{words}, and {quota_words}"
    return Estimate(pool, item.position, max(start, now + (CYCLE_SECONDS if start <= now else 0.0)), words)


def _recent_waits(facts: PoolFacts, want: Wanted, item: Queued, now: float) -> Estimate | None:
    """When the GPUs' return cannot be foreseen (work we did not submit holds them, or ours has no end in sight):
    how long the pool's recent starters waited, those of its size where there are enough (the median of the waits
    longer than this one's so far, minus it), or None."""
    waits = RunTimes(facts.name, facts.waits, "the last {n} workloads{size} that started in pool {pool}")
    found = waits.remaining(want.gpus, want.waited)
    if found is None:
        return None
    left, words = found
    return Estimate(facts.name, item.position, now + max(left, CYCLE_SECONDS),
                    f"{_lead(max(left, CYCLE_SECONDS))}the median wait of {words} (the GPUs it needs are held by "
                    "work with no foreseeable end)")


def estimate(pools: dict[str, PoolFacts], wanted: list[Wanted], now: float) -> dict[str, Forecast]:
    """Each wanted workload's forecast: one estimate per candidate pool it is queued in (in its pools' order) and
    the earliest of them. A pool missing from `pools` (or a workload not yet numbered in its queue) is unknown."""
    by_pool: dict[str, dict[str, Wanted]] = {}
    for want in wanted:
        for pool in want.pools:
            if pool in want.positions and pool in pools:
                by_pool.setdefault(pool, {})[want.id] = want
    found: dict[tuple[str, str], Estimate] = {}
    for pool, members in by_pool.items():
        for workload_id, result in _walk(pools[pool], members, now).items():
            found[(workload_id, pool)] = result
    forecasts = {}
    for want in wanted:
        estimates = tuple(found.get((want.id, pool)) or Estimate(
            pool, want.positions.get(pool), None,
            "unknown: not in this pool's queue yet (the next admission cycle numbers it)")
            for pool in want.pools)
        known = [e for e in estimates if e.at is not None]
        if known:
            best = min(known, key=lambda e: e.at)
            forecasts[want.id] = Forecast(best.at, best.basis, estimates)
        elif estimates:
            forecasts[want.id] = Forecast(None, estimates[0].basis, estimates)
        else:
            forecasts[want.id] = Forecast(None, "unknown: it has no candidate pool", estimates)
    return forecasts
