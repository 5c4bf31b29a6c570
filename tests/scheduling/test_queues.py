"""The Celery queues (settings.CELERY_TASK_ROUTES): a sync round holding the sync worker delays neither an
admission cycle, nor a dispatch, nor a cancel, which the admission worker takes (real worker processes, started
as `manage.py serve` starts them, on the test Redis)."""

import os
import signal
import subprocess

import pytest
from django.conf import settings
from django.db import connection

from pools.management.workers import worker_commands
from pools.models import Backend
from pools.tasks import sync_backend
from scheduling.models import Status, Workload
from tests.celery_app import broker_at
from tests.scheduling.conftest import body
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def child_env(**extra: str) -> dict[str, str]:
    """A process of ours against the test database."""
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "DEBUG": "1",
            "OSMO_ENV_FILE": "", **extra}


def test_every_task_has_a_queue_that_a_worker_serves():
    from osmo_site.celery import app

    app.loader.import_default_modules()
    ours = sorted(name for name in app.tasks if name.startswith(("pools.", "scheduling.")))
    served = {queue for queues in settings.OSMO_WORKER_QUEUES.values() for queue in queues}
    assert set(ours) == set(settings.CELERY_TASK_ROUTES)
    assert {route["queue"] for route in settings.CELERY_TASK_ROUTES.values()} <= served
    assert settings.CELERY_TASK_ROUTES["pools.tasks.sync_backend"]["queue"] not in {
        settings.CELERY_TASK_ROUTES[name]["queue"] for name in (
            "scheduling.tasks.admission_cycle", "scheduling.tasks.dispatch_workload", "scheduling.tasks.stop_workload",
            "scheduling.tasks.lifecycle_sweep")}


@pytest.mark.django_db(transaction=True)
def test_a_cycle_a_dispatch_and_a_cancel_run_while_a_long_sync_holds_the_sync_worker(
        world, researcher_api, backend, settings, tmp_path):
    settings.OSMO_ADMISSION_ON_COMMIT = True
    url = settings.TEST_REDIS_URL
    import redis

    redis.Redis.from_url(url).flushdb()  # no message of an earlier test
    env = child_env(CELERY_BROKER_URL=url, OSMO_ADMISSION_ON_COMMIT="1", OSMO_DATA_DIR=str(tmp_path / "data"),
                    OSMO_SYNC_CONCURRENCY="1", OSMO_ADMISSION_CONCURRENCY="1", OSMO_ADMISSION_INTERVAL="3600")
    # Threads, as `manage.py demo` runs them: a warm shutdown ends the sync round at once.
    commands = worker_commands("-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                               pool="threads")
    workers = {}
    try:
        for name in ("worker-sync", "worker-admission"):
            log = tmp_path / f"{name}.log"
            workers[name] = (subprocess.Popen(commands[name], cwd=settings.BASE_DIR, env=env, stdout=log.open("w"),
                                              stderr=subprocess.STDOUT), log)
        for name, (process, log) in workers.items():
            until(lambda process=process, log=log: process.poll() is not None or " ready." in log.read_text(),
                  f"{name} to be ready")
            assert process.poll() is None, log.read_text()[-3000:]
        with broker_at(url):
            # A sync round of an hour: the sync worker's one thread is taken until it is stopped.
            sync_backend.delay(backend.pk, 3600)
            owner = until(lambda: Backend.objects.get(pk=backend.pk).sync_lease_owner, "the sync to take its lease")

            created = researcher_api.post("/api/workloads/", body(), format="json").json()
            until(lambda: Workload.objects.filter(pk=created["id"], status=Status.SCHEDULING).exists(),
                  "the admission worker to admit the workload and create its Job",
                  detail=lambda: workers["worker-admission"][1].read_text()[-2000:])
            answer = researcher_api.post(f"/api/workloads/{created['id']}/cancel/", {}, format="json")
            assert answer.status_code == 200 and answer.json()["canceled"] is True
            until(lambda: Workload.objects.filter(pk=created["id"], status=Status.FAILED_CANCELED).exists(),
                  "the admission worker to delete the Job of the canceled workload")
            # All of it while the sync round still ran.
            assert Backend.objects.get(pk=backend.pk).sync_lease_owner == owner
            assert "Task pools.tasks.sync_backend[" not in workers["worker-admission"][1].read_text()
            sync_log = workers["worker-sync"][1].read_text()
            assert "Task pools.tasks.sync_backend[" in sync_log and "Task scheduling.tasks" not in sync_log
    finally:
        for process, _ in workers.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process, _ in workers.values():
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
    assert Backend.objects.get(pk=backend.pk).sync_lease_owner == ""  # the warm shutdown ended the round
