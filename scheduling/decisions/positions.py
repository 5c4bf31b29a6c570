"""Queue positions (pure: no Django). The admission cycle numbers every pending workload in each candidate pool's
queue (1 is next) and stores them on the row; `positions_of` is how every page, API answer and CLI command reads
them, so that all of them show one number for one workload and pool. `moves_back` says why a workload's number
grew between two cycles: who came ahead of it, and by which rule of the queue's order (within-deserved before
borrowing, then priority, then submission time)."""

from bisect import bisect_right, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass

NOT_QUEUED = float("inf")  # the old position of a workload that was in no queue of the pool (a new arrival)


def positions_of(stored: dict | None, pools: Iterable[str], keep: Callable[[str], bool] | None = None
                 ) -> dict[str, int]:
    """A workload's position in each of its candidate pools' queues, in the order of its pools (`keep`: the pools
    the viewer may see)."""
    stored = stored or {}
    return {pool: stored[pool] for pool in pools if pool in stored and (keep is None or keep(pool))}


def first_position(positions: dict[str, int]) -> tuple[str | None, int | None]:
    """(pool, position) in the first of `positions_of`'s pools: a workload's one-number place in the queue."""
    for pool, position in positions.items():
        return pool, position
    return None, None


@dataclass(frozen=True, slots=True)
class MoveBack:
    pool: str
    before: int
    after: int
    within_deserved: int  # came ahead within their projects' deserved quota while this one borrows
    higher_priority: int
    earlier: int  # same class, submitted earlier (back in the queue: requeued, or its pools changed)

    def message(self) -> str:
        causes = []
        if self.higher_priority:
            causes.append(f"{self.higher_priority} workload{_s(self.higher_priority)} of higher priority")
        if self.within_deserved:
            causes.append(f"{self.within_deserved} workload{_s(self.within_deserved)} within their project's "
                          "deserved quota (this one borrows, and borrowing work queues after it)")
        if self.earlier:
            causes.append(f"{self.earlier} workload{_s(self.earlier)} submitted earlier, back in the queue")
        why = f": {' and '.join(causes)} came ahead of it" if causes else ""
        return f"Moved back in pool {self.pool}'s queue from #{self.before} to #{self.after}{why}."


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def moves_back(order: list[str], new: dict[str, dict[str, int]], old: dict[str, dict[str, int]],
               classes: dict[str, tuple[bool, int]]) -> dict[str, list[MoveBack]]:
    """Each workload whose position in a pool grew from `old` to `new`, with the workloads now ahead of it that
    were not before, counted by why they sort first. `order`: the cycle's queue order; `classes`: each workload's
    (borrowing, priority rank). O(n log n) per pool."""
    queues: dict[str, list[str]] = {}
    for workload_id in order:
        for pool in new.get(workload_id, {}):
            queues.setdefault(pool, []).append(workload_id)
    moved: dict[str, list[MoveBack]] = {}
    for pool, ids in queues.items():
        ahead: dict[tuple[bool, int], list[float]] = {}  # class -> sorted old positions of those ahead so far
        for workload_id in ids:
            before = old.get(workload_id, {}).get(pool)
            after = new[workload_id][pool]
            borrowing, rank = classes[workload_id]
            if before is not None and after > before:
                counts = {"within_deserved": 0, "higher_priority": 0, "earlier": 0}
                for (their_borrowing, their_rank), olds in ahead.items():
                    came = len(olds) - bisect_right(olds, before)  # ahead now, behind (or absent) before
                    if not came:
                        continue
                    if their_borrowing < borrowing:
                        counts["within_deserved"] += came
                    elif their_rank > rank:
                        counts["higher_priority"] += came
                    else:
                        counts["earlier"] += came
                moved.setdefault(workload_id, []).append(MoveBack(pool, before, after, **counts))
            insort(ahead.setdefault((borrowing, rank), []), NOT_QUEUED if before is None else before)
    return moved
