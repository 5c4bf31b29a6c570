"""Celery tasks: beat runs `admission_cycle` every OSMO_ADMISSION_INTERVAL seconds, and every submit,
cancel and finish asks for one on commit. Cycles never overlap: each holds the admission lock row. A committed
admission sends `dispatch_workload`, a committed stop `stop_workload`; both take a workload id, are idempotent
(the row is locked, its status checked) and retry cluster errors with back-off; `dispatch_workloads` and
`stop_workloads` take a batch of ids (scheduling.run.outbox.BATCH) and hand each one the cluster refused to the one-id
task, for its back-off; `lifecycle_sweep` re-drives whatever a lost message or a dead worker left behind.
`send_notification` sends one notification row (claimed first; retried with back-off) and `notifications_sweep`
records "stuck pending" and re-drives unsent rows (scheduling.run.notify). Each goes to its Celery queue
(settings.CELERY_TASK_ROUTES)."""

from celery import shared_task

from pools.cluster import ClusterError
from pools.cluster.reflector import Backoff
from scheduling.run import notify
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch, dispatch_many
from scheduling.run.outbox import send
from scheduling.run.stopping import stop
from scheduling.run.sweeps import sweep


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


def _each(run, single, workload_ids: list[str]) -> dict:
    """A batch: each id in turn; one whose cluster call failed is sent again alone, to back off on its own."""
    outcomes: dict[str, int] = {}
    for workload_id in workload_ids:
        try:
            outcome = run(workload_id)
        except ClusterError:
            send(single.name, workload_id, countdown=1)
            outcome = "retrying"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


# A batch's time limits cover BATCH dispatches; past them the rows still ADMITTED are the sweep's to send again.
@shared_task(time_limit=300, soft_time_limit=270, ignore_result=True, acks_late=True)
def dispatch_workloads(workload_ids: list[str]) -> dict:
    """The batch in few transactions (`dispatch_many`); one the cluster did not take is sent again alone."""
    outcomes: dict[str, int] = {}
    for workload_id, outcome in zip(workload_ids, dispatch_many(workload_ids), strict=True):
        if isinstance(outcome, ClusterError):
            send(dispatch_workload.name, workload_id, countdown=1)
            outcome = "retrying"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes


@shared_task(time_limit=300, soft_time_limit=270, ignore_result=True, acks_late=True)
def stop_workloads(workload_ids: list[str]) -> dict:
    return _each(stop, stop_workload, workload_ids)


@shared_task(time_limit=120, soft_time_limit=100, ignore_result=True)
def lifecycle_sweep() -> dict:
    return sweep().summary()


@shared_task(bind=True, time_limit=120, soft_time_limit=100, ignore_result=True, acks_late=True)
def archive_logs(self, workload_id: str) -> dict:
    """The end of each replica's log of the attempts that ended (scheduling.run.log_archive); idempotent."""
    from scheduling.run.log_archive import archive

    try:
        return archive(workload_id)
    except ClusterError as exc:
        _retry(self, exc)


@shared_task(time_limit=60, soft_time_limit=50, ignore_result=True)
def demo_trickle() -> dict:
    """The demo's submissions (scheduling.demo); beat runs it only when
    OSMO_DEMO_TRICKLE is above 0, as `make demo` sets it."""
    from scheduling.demo import trickle

    return trickle().summary()


# The hard limit is below OSMO_NOTIFY_CLAIM_SECONDS: a claim older than that belongs to a sender that is gone.
@shared_task(bind=True, time_limit=60, soft_time_limit=50, ignore_result=True, acks_late=True)
def send_notification(self, notification_id: str) -> str:
    from django.conf import settings

    outcome = notify.deliver(notification_id)
    if outcome == "retry" and self.request.retries < settings.OSMO_NOTIFY_MAX_TRIES:
        # The row is due again at the same back-off: whichever of this retry and the sweep comes first sends it.
        raise self.retry(countdown=notify.backoff(self.request.retries + 1).total_seconds(),
                         max_retries=settings.OSMO_NOTIFY_MAX_TRIES)
    return outcome


@shared_task(time_limit=120, soft_time_limit=100, ignore_result=True)
def notifications_sweep() -> dict:
    return notify.sweep()


@shared_task(time_limit=120, soft_time_limit=100, ignore_result=True)
def sample_gpu_utilization() -> dict:
    """Beat, every OSMO_UTILIZATION_INTERVAL s while OSMO_PROMETHEUS_URL is set (scheduling.run.utilization)."""
    from scheduling.run.utilization import sample

    return sample().summary()


@shared_task(time_limit=600, soft_time_limit=570, ignore_result=True)
def usage_rollup() -> dict:
    """Usage accounting: observe the sync's pods into intervals, then recompute the touched hours (idempotent)."""
    from scheduling.usage import observe, rollup

    return {**observe.observe(), **rollup.run()}


@shared_task(time_limit=600, soft_time_limit=570, ignore_result=True)
def usage_prune() -> dict:
    from scheduling.usage import rollup

    return rollup.prune()
