"""When a workload counts as idle: it holds GPUs and every sample of every one of its GPUs stayed under
OSMO_IDLE_GPU_PERCENT for the last OSMO_IDLE_GPU_MINUTES, which needs its pods to have run that long. Pure."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


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


# ---- Stopping idle notebooks (issue 43, docs/admin/idle-notebooks.md) ----------------------------------------

WARN_AT = 0.8  # the owner is told at 80 % of the idle limit or of the lifetime


@dataclass(frozen=True)
class NotebookRule:
    """Stop a notebook whose GPUs stayed under `under_percent` for `minutes`; and one older than
    `max_lifetime_hours` whatever it does (None: no lifetime)."""

    under_percent: float
    minutes: int
    max_lifetime_hours: float | None = None


@dataclass(frozen=True)
class Verdict:
    action: str  # "stop", "warn" or "" (nothing to do)
    code: str = ""  # "IDLE" or "LIFETIME"
    message: str = ""


def parse_rules(data: Any, where: str = "OSMO_NOTEBOOK_IDLE_RULES") -> dict[str, NotebookRule]:
    """`{"pool/NAME" or "project/NAME": {"under_percent", "minutes", "max_lifetime_hours"}}`; ValueError naming
    the key at fault."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object of \"pool/NAME\" or \"project/NAME\" keys")
    rules = {}
    for key, item in data.items():
        scope, _, name = str(key).partition("/")
        here = f"{where}.{key}"
        if scope not in ("pool", "project") or not name:
            raise ValueError(f"{here}: a key is pool/NAME or project/NAME")
        if not isinstance(item, dict) or set(item) - {"under_percent", "minutes", "max_lifetime_hours"}:
            raise ValueError(f"{here}: expected under_percent, minutes and max_lifetime_hours")
        percent, minutes, lifetime = item.get("under_percent"), item.get("minutes"), item.get("max_lifetime_hours")
        if not _number(percent) or not 0 < percent <= 100:
            raise ValueError(f"{here}.under_percent: a percent above 0, at most 100")
        if isinstance(minutes, bool) or not isinstance(minutes, int) or not 1 <= minutes <= 7 * 24 * 60:
            raise ValueError(f"{here}.minutes: whole minutes from 1 to {7 * 24 * 60}")
        if lifetime is not None and (not _number(lifetime) or lifetime <= 0):
            raise ValueError(f"{here}.max_lifetime_hours: hours above 0")
        rules[f"{scope}/{name}"] = NotebookRule(float(percent), minutes, None if lifetime is None else float(lifetime))
    return rules


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def rule_for(rules: dict[str, NotebookRule], project: str, pool: str) -> NotebookRule | None:
    """The project's rule, else its pool's, else none."""
    return rules.get(f"project/{project}") or rules.get(f"pool/{pool}")


def _span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


def notebook_verdict(rule: NotebookRule, *, started_at: datetime, now: datetime, under_since: datetime | None,
                     warned_idle: bool, warned_lifetime: bool) -> Verdict:
    """What the sweep does with a running notebook now. `under_since`: since when its GPUs stayed under the
    rule's percent (None: they did not, or nothing measured them); `warned_*`: the owner was already told in this
    stretch (or this life)."""
    if rule.max_lifetime_hours is not None:
        lifetime = timedelta(hours=rule.max_lifetime_hours)
        age = now - started_at
        if age >= lifetime:
            return Verdict("stop", "LIFETIME", f"Running for {_span(age)}: past the maximum lifetime of "
                                               f"{_span(lifetime)} of notebooks here.")
    idle = timedelta(minutes=rule.minutes)
    if under_since is not None and now - under_since >= idle:
        return Verdict("stop", "IDLE", f"Its GPUs stayed under {rule.under_percent:g} % for {_span(now - under_since)}"
                                       f" (the limit is {_span(idle)}).")
    if rule.max_lifetime_hours is not None and not warned_lifetime:
        lifetime = timedelta(hours=rule.max_lifetime_hours)
        if now - started_at >= lifetime * WARN_AT:
            return Verdict("warn", "LIFETIME", f"It reaches the maximum lifetime of {_span(lifetime)} in "
                                               f"{_span(started_at + lifetime - now)} and is then stopped.")
    if under_since is not None and not warned_idle and now - under_since >= idle * WARN_AT:
        return Verdict("warn", "IDLE", f"Its GPUs stayed under {rule.under_percent:g} % for "
                                       f"{_span(now - under_since)}; it is stopped after {_span(idle)} of that.")
    return Verdict("")
