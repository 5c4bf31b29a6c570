"""The messages that move workloads, each sent once its row has committed (the row is the outbox: a sweep
re-drives any whose message was lost, `scheduling.run.sweeps`). Sent by task name, so that this module imports no
task (the tasks import the modules that send). Off in tests unless OSMO_ADMISSION_ON_COMMIT is on."""

import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction

log = logging.getLogger("scheduling.run.outbox")
CYCLE_DEBOUNCE_SECONDS = 1  # at most one admission cycle message per window; the cycle runs when it ends
# Ids per dispatch or stop message. A cycle that admits thousands sends a message per BATCH of them (one each cost
# 0.3 ms of Celery and broker per workload, more than the cycle's own writes: benchmarks/admission.py), while
# several batches still spread over the admission workers.
BATCH = 25


def send(name: str, *args, **options) -> None:
    """Best effort: the row is the outbox, so a broker that is down delays the work (the sweep sends again) and
    never fails, or undoes, the write that asked for it."""
    from celery import current_app

    try:
        current_app.send_task(name, args=args, **options)
    except Exception as exc:  # kombu's OperationalError, a refused connection, a DNS failure...
        log.warning("could not send %s%s (%s); the lifecycle sweep sends it again", name, args, exc)


def request_cycle() -> None:
    """Ask for an admission cycle soon (debounced: one message per CYCLE_DEBOUNCE_SECONDS at most). The cycle runs
    when the debounce window ends, so whatever committed within the window, and sent nothing, is in it."""
    if not settings.OSMO_ADMISSION_ON_COMMIT:
        return
    from django.core.cache import cache

    if cache.add("osmo:admission-requested", 1, timeout=CYCLE_DEBOUNCE_SECONDS):
        send("scheduling.tasks.admission_cycle", countdown=CYCLE_DEBOUNCE_SECONDS)


def send_batched(task: str, ids: list[str]) -> None:
    """`task` (one id) for a single workload, else `task`s (a list of ids) per BATCH of them."""
    if len(ids) == 1:
        send(task, ids[0])
        return
    for first in range(0, len(ids), BATCH):
        send(f"{task}s", ids[first:first + BATCH])


def _on_commit(task: str, ids: Iterable) -> None:
    ids = [str(pk) for pk in ids]
    if not ids or not settings.OSMO_ADMISSION_ON_COMMIT:
        return
    transaction.on_commit(lambda: send_batched(task, ids), robust=True)


def dispatch_on_commit(ids: Iterable) -> None:
    """`dispatch` messages for the workloads admitted in this transaction (batched, see BATCH)."""
    _on_commit("scheduling.tasks.dispatch_workload", ids)


def stop_on_commit(ids: Iterable) -> None:
    """`stop` messages for the workloads whose Jobs this transaction asked to delete (batched, see BATCH)."""
    _on_commit("scheduling.tasks.stop_workload", ids)
