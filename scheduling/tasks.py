"""Celery tasks: beat runs `admission_cycle` every OSMO_ADMISSION_INTERVAL seconds, and every submit,
cancel and finish asks for one on commit. Cycles never overlap: each holds the admission lock row. A committed
admission sends `dispatch_workload`, a committed stop `stop_workload`; both take a workload id, are idempotent
(the row is locked, its status checked) and retry cluster errors with back-off; `lifecycle_sweep` re-drives
whatever a lost message or a dead worker left behind."""

from celery import shared_task

from pools.cluster import ClusterError
from pools.cluster.reflector import Backoff

from .cycle import run_cycle
from .dispatch import dispatch
from .stopping import stop
from .sweeps import sweep


@shared_task(time_limit=120, soft_time_limit=100, ignore_result=True)
def admission_cycle() -> dict:
    return run_cycle().summary()


def _retry(task, exc: ClusterError):
    """Back off (full jitter, 1 s doubling to 30 s); after 8 tries the sweep takes over."""
    backoff = Backoff(base=1.0, cap=30.0)
    backoff.attempt = task.request.retries
    raise task.retry(exc=exc, countdown=backoff.next_delay(), max_retries=8)


@shared_task(bind=True, time_limit=60, soft_time_limit=50, ignore_result=True, acks_late=True)
def dispatch_workload(self, workload_id: str) -> str:
    try:
        return dispatch(workload_id)
    except ClusterError as exc:
        _retry(self, exc)


@shared_task(bind=True, time_limit=60, soft_time_limit=50, ignore_result=True, acks_late=True)
def stop_workload(self, workload_id: str) -> str:
    try:
        return stop(workload_id)
    except ClusterError as exc:
        _retry(self, exc)


@shared_task(time_limit=120, soft_time_limit=100, ignore_result=True)
def lifecycle_sweep() -> dict:
    return sweep().summary()


@shared_task(time_limit=60, soft_time_limit=50, ignore_result=True)
def demo_trickle() -> dict:
    """The demo's submissions (scheduling.demo); beat runs it only when
    OSMO_DEMO_TRICKLE is above 0, as `make demo` sets it."""
    from .demo import trickle

    return trickle().summary()
