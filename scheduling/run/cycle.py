"""One admission cycle, one at a time across all workers: the cycle holds the lock of the one
`AdmissionState` row (SELECT ... FOR UPDATE; on SQLite the write transaction serializes the same way),
reads the snapshot inside that transaction, decides (pure), and writes what changed: admitted and
preempted workloads with their events, reasons and positions only where they differ, and an event for each
position that moved back, naming why (scheduling.decisions.positions). Once it commits, each
admitted workload gets a dispatch message and each preempted one a stop message."""

import time
from dataclasses import dataclass, field

from django.db import connection, transaction
from django.utils import timezone

from pools.models.bulk import copy_values, gc_paused, update_rows_json
from scheduling.decisions import admission as pure
from scheduling.decisions.positions import moves_back
from scheduling.models import AdmissionState, Status, Workload, WorkloadEvent
from scheduling.run import dependencies, gangs, snapshot
from scheduling.run.outbox import dispatch_on_commit, stop_on_commit

EVENT_FIELDS = ["workload_id", "at", "status", "reason", "message", "pools"]  # the events, as tuples


@dataclass
class CycleResult:
    admitted: list[dict] = field(default_factory=list)  # {"id", "name", "pool", "platform", "placement"}
    pending: list[dict] = field(default_factory=list)  # {"id", "name", "reasons", "positions"}
    preempted: list[dict] = field(default_factory=list)
    considered: int = 0
    rows_written: int = 0
    seconds: float = 0.0

    def summary(self) -> dict:
        return {"considered": self.considered, "admitted": len(self.admitted), "pending": len(self.pending),
                "preempted": len(self.preempted), "rows_written": self.rows_written,
                "seconds": round(self.seconds, 3)}


def _lock() -> AdmissionState:
    AdmissionState.objects.get_or_create(pk=1)
    if connection.vendor == "sqlite":
        # Take SQLite's write lock now, so a second cycle waits here rather than reading a stale snapshot.
        AdmissionState.objects.filter(pk=1).update(last_cycle_at=timezone.now())
        return AdmissionState.objects.get(pk=1)
    return AdmissionState.objects.select_for_update().get(pk=1)


def run_cycle(now=None, *, details: bool = False) -> CycleResult:
    """Admit what fits now. `details` also lists every pending workload (the operators' `schedule --once`)."""
    started = time.perf_counter()
    result = CycleResult()
    # Tens of thousands of short-lived, acyclic objects (rows, workloads, reasons): the cycle collector's passes
    # over them cost more than they free.
    with gc_paused(), transaction.atomic():
        state = _lock()
        now = now or timezone.now()
        dependencies.release(now)  # groups whose upstream completed join this cycle's queue
        gangs.settle(now)  # a group's members follow the one that ended or starts again
        loaded = snapshot.load(now)
        queue, stored = snapshot.pending(loaded)
        snapshot.add_fair_shares(loaded, queue)
        result.considered = len(queue)
        decision = pure.decide(loaded.snapshot, queue)
        result.rows_written = _write(decision, stored, loaded.pool_names, now, result, details)
        result.seconds = time.perf_counter() - started
        state.last_cycle_at = now
        state.last_cycle = result.summary()
        state.save(update_fields=["last_cycle_at", "last_cycle"])
    return result


def _write(decision: pure.Decision, stored: dict[str, dict], pool_ids: dict[int, str], now, result: CycleResult,
           details: bool) -> int:
    ids_by_name = {name: pk for pk, name in pool_ids.items()}
    # The pending ones' names came with the queue; only the preempted (admitted before) are read here.
    names = {key: value["name"] for key, value in stored.items()}
    held_in = {}
    for pk, name, pool in Workload.objects.filter(pk__in=list(decision.preempt)).values_list("id", "name",
                                                                                            "pool__name"):
        names[str(pk)], held_in[str(pk)] = name, pool
    # Events as tuples of EVENT_FIELDS and rows as plain dicts: no model instance per admission.
    events, admitted = [], []
    for workload_id, admission in decision.admitted.items():
        admitted.append({"id": workload_id, "pool_id": ids_by_name[admission.pool], "platform": admission.platform,
                         "placement": admission.placement})
        events.append((workload_id, now, Status.ADMITTED, "ADMITTED", _admitted(admission), [admission.pool]))
        result.admitted.append({"id": workload_id, "name": names.get(workload_id, ""), "pool": admission.pool,
                                "platform": admission.platform, "placement": admission.placement})
    # What every admitted row gets alike is sent once, not per row.
    written = update_rows_json(Workload, admitted, ["pool_id", "platform", "placement"], same={
        "status": Status.ADMITTED, "admitted_at": now, "reasons": [], "positions": {}, "updated_at": now})
    if decision.preempt:
        for workload_id, why in decision.preempt.items():
            events.append((workload_id, now, Status.PREEMPTING, "RECLAIM", why,
                           [held_in[workload_id]] if held_in.get(workload_id) else []))
            result.preempted.append({"id": workload_id, "name": names.get(workload_id, ""), "why": why})
        written += Workload.objects.filter(pk__in=list(decision.preempt), status__in=[
            Status.ADMITTED, Status.SCHEDULING, Status.RUNNING]).update(status=Status.PREEMPTING, updated_at=now)
    changed = []
    for workload_id, reasons in decision.reasons.items():
        values = {"reasons": [reason.as_dict() for reason in reasons],
                  "positions": decision.positions.get(workload_id, {})}
        before = stored.get(workload_id, {})
        if any(before.get(key) != value for key, value in values.items()):
            changed.append({"id": workload_id, **values})
        if details:
            result.pending.append({"id": workload_id, "name": names.get(workload_id, ""), **values})
    # Only the rows whose reasons or positions differ from what is stored: a queue that does not move
    # writes nothing.
    written += update_rows_json(Workload, changed, ["reasons", "positions"])
    # A position that grew says why, in the workload's events (who came ahead, by which rule of the order).
    moved = moves_back(decision.order, decision.positions,
                       {key: value.get("positions") or {} for key, value in stored.items()}, decision.classes)
    for workload_id, moves in moved.items():
        events.extend((workload_id, now, Status.PENDING, "QUEUE_MOVED", move.message(), [move.pool])
                      for move in moves)
    copy_values(WorkloadEvent, EVENT_FIELDS, events)
    dispatch_on_commit(decision.admitted)
    stop_on_commit(decision.preempt)
    return written + len(events)


def _admitted(admission: pure.Admission) -> str:
    if admission.engine:
        return (f"Handed to {admission.engine} in pool {admission.pool}, platform {admission.platform}: the engine "
                "queues it against the pool's quotas and places it.")
    return (f"Admitted to pool {admission.pool}, platform {admission.platform}, planned on "
            f"{_nodes(admission.placement)} (its pods may run only there).")


def _nodes(placement: dict[str, int]) -> str:
    return ", ".join(f"{name} ({n} replica{'s' if n > 1 else ''})" if n > 1 else name
                     for name, n in sorted(placement.items()))
