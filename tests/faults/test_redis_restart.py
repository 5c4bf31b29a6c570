"""Redis (the broker, a private server of this test's, without persistence) restarted while tasks are in flight:
one dispatch task held in the middle of its call to the API server, others waiting in the queue, and a message
published while Redis is down. The queue dies with Redis; nothing is lost all the same, because each admitted
workload is a row first (the outbox, scheduling/run/outbox.py) and the lifecycle sweep sends again whatever is still
ADMITTED: every workload ends dispatched, each with exactly one Job (the worker is real, a `celery worker` process)."""

from datetime import timedelta

import pytest
import redis
from django.conf import settings as django_settings
from django.utils import timezone

from scheduling.models import Status, Workload
from scheduling.run import sweeps
from scheduling.run.cycle import run_cycle
from tests.celery_app import broker_at
from tests.scheduling.conftest import body
from tests.scheduling.test_faults import PREFIX, PrivateRedis, Worker, on_standin, statuses
from tests.waiting import until

JOBS = "/apis/batch/v1/namespaces/"


def queued(url: str) -> int:
    """Messages waiting in the queue of dispatches (settings.CELERY_TASK_ROUTES)."""
    queue = django_settings.CELERY_TASK_ROUTES["scheduling.tasks.dispatch_workloads"]["queue"]
    return redis.Redis.from_url(url, socket_timeout=5).llen(queue)


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_redis_restart_with_tasks_in_flight_loses_no_workload(world, researcher_api, standin, tmp_path, settings):
    from django.core.cache import cache

    settings.OSMO_ADMISSION_ON_COMMIT = True
    on_standin(standin, tmp_path)
    broker = PrivateRedis(tmp_path)
    broker.start()
    worker = Worker(broker.url, tmp_path)

    def admit(names: list[str]) -> None:
        for name in names:
            assert researcher_api.post("/api/workloads/", body(name=name, priority="low"),
                                       format="json").status_code == 201
        run_cycle()  # sends their dispatch message (one batch for several), on commit
        assert set(statuses(names).values()) == {Status.ADMITTED}

    try:
        with broker_at(broker.url):
            worker.start()
            # In flight: the first dispatch held inside its create call, the others waiting in the queue.
            standin.hold_next(1, path_prefix=JOBS, method="POST")
            flight = [f"flight-{i}" for i in range(4)]
            admit(flight[:1])
            until(lambda: standin.held == 1, "the worker's first dispatch to reach the API server", seconds=60)
            admit(flight[1:])  # one batch message, waiting behind the dispatch in flight
            assert queued(broker.url) >= 1

            broker.stop()
            cache.delete("osmo:admission-requested")
            down = ["down-0", "down-1"]
            admit(down)  # published while Redis is down: the send fails, the rows stay
            broker.start()  # the same port, empty: the queue died with the old server
            assert queued(broker.url) == 0
            standin.release_holds()  # the task in flight finishes its call

            everyone = flight + down
            resent = []

            def all_dispatched() -> bool:
                worker.alive()  # a worker that died with the broker is started again, as a supervisor would
                if set(statuses(everyone).values()) == {Status.SCHEDULING}:
                    return True
                # The beat's sweep, run here; `now` past the retry delay so that it re-sends at once.
                now = timezone.now() + timedelta(seconds=django_settings.OSMO_DISPATCH_RETRY_SECONDS + 1)
                resent.append(sweeps.sweep(now, act=False).dispatched.get("queued", 0))
                return False

            # Polled every half second (was 2 s): a sweep that finds rows still ADMITTED sends them again, which
            # exactly one Job each must survive too.
            until(all_dispatched, "every workload to be dispatched", seconds=120, every=0.5)
    finally:
        standin.release_holds()
        worker.stop()
        broker.stop()

    assert resent and resent[0] >= len(down) + 1, resent  # the sweep re-sent what the restart lost
    workloads = list(Workload.objects.filter(name__in=everyone))
    assert len(workloads) == len(everyone)
    jobs: dict[str, list[str]] = {}
    for job in standin.jobs():
        jobs.setdefault(job["metadata"]["labels"][f"{PREFIX}workload"], []).append(job["metadata"]["name"])
    for workload in workloads:
        assert workload.status == Status.SCHEDULING, (workload.name, workload.status)
        assert jobs.get(str(workload.pk)) == [workload.job_name], (workload.name, jobs)
    assert len(standin.jobs()) == len(everyone)
