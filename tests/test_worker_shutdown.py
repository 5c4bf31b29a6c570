"""A Celery worker stopped with SIGTERM (a Deployment's stop, `manage.py serve` ending) releases the sync lease it
holds before it exits, in every pool type we run (issue 39 point 4): a prefork worker, as `serve` and
deploy/base/worker.yaml run it, kept its lease about 29 s after SIGTERM, because its round runs in a child that
never hears the signal; now the parent's warm shutdown sets a stop flag the children share. A real worker process
on the test's Redis, a round of an hour on the stand-in API server, then SIGTERM to the worker's main process. The
verdict is an order (the lease row is empty once the process has exited, and no one else could have emptied it);
the time it took is printed, not judged (the ceiling below only ends a hang)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command

from pools.models import Backend
from pools.tasks import sync_backend
from tests.celery_app import broker_at
from tests.faults.conftest import busy_cluster
from tests.processes import descendants, running
from tests.support.children import child_env
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.django_db(transaction=True)]
CEILING = 120  # seconds: only against a hang; a round left to run out would take an hour


def lease() -> str:
    return Backend.objects.values_list("sync_lease_owner", flat=True).get(name="prod")


@pytest.mark.parametrize("pool", ["prefork", "threads", "solo"])
def test_a_worker_stopped_by_sigterm_releases_its_sync_lease_before_it_exits(pool, standin, tmp_path, defaults):
    call_command("backend", "add", "prod", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    busy_cluster(standin)
    backend = Backend.objects.get(name="prod")
    log = tmp_path / f"worker-{pool}.log"
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "osmo_site", "worker", "-P", pool, "--concurrency", "2", "-Q", "sync",
         "-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
         "-n", f"shutdown-{pool}-{os.getpid()}@%h"],
        cwd=Path(settings.BASE_DIR), env=child_env(CELERY_BROKER_URL=settings.TEST_REDIS_URL, PYTHONUNBUFFERED="1"),
        stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        until(lambda: worker.poll() is not None or " ready." in log.read_text(), "the worker to be ready",
              detail=log.read_text)
        with broker_at(settings.TEST_REDIS_URL):
            sync_backend.delay(backend.pk, seconds=3600)
        until(lambda: worker.poll() is not None or (lease() and Backend.objects.get(pk=backend.pk).listed_at),
              "the worker's round to take the lease and list", detail=log.read_text)
        holder = int(lease().split(":")[1])
        assert (holder != worker.pid) == (pool == "prefork")  # prefork: a child holds it, and hears no signal
        below = descendants(worker.pid)

        sent = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        released = until(lambda: time.monotonic() if lease() == "" else None, "the lease to be released",
                         seconds=CEILING, every=0.02, detail=log.read_text)
        status = worker.wait(CEILING)
        exited = time.monotonic()
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
    assert status == 0, log.read_text()[-3000:]
    assert lease() == ""  # released by the worker on its way out: no other process runs a round of prod
    assert not [pid for pid in below if running(pid)]
    print(f"{pool}: lease released {released - sent:.2f} s after SIGTERM, process exited after {exited - sent:.2f} s")
