"""Faults during dispatch, with real processes, a real broker and the stand-in API server (no mocks): a worker
killed with SIGKILL right after the API server accepted its Job, and a broker stopped while dispatch messages are
being sent, until the worker has failed to reconnect three times. Whatever happens, every admitted workload ends
with exactly one Job, the sweep being the outbox's safety net (scheduling/run/outbox.py, scheduling/run/sweeps.py)."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduling.models import Status, Workload
from scheduling.run import sweeps
from scheduling.run.cycle import run_cycle
from tests.celery_app import broker_at, every_queue
from tests.scheduling.conftest import body
from tests.support.children import child_env
from tests.support.commands import run
from tests.support.ports import free_port
from tests.waiting import until

PREFIX = "runwhere.ai/"
# The outage lasts until the worker has tried to reconnect this many times (backing off 2 s, then 4 s, between):
# a worker that meets a broker gone for a while, not one that only misses a beat.
OUTAGE_RECONNECTS = 3


def on_standin(standin, tmp_path: Path) -> str:
    """The pools' backend (`default`, simulated in `world`) becomes a Kubernetes backend on the stand-in, so that
    `cluster_for` (what a worker's dispatch uses) reaches it."""
    kubeconfig = standin.kubeconfig(tmp_path / "kubeconfig")
    run("backend", "add", "default", "--kubeconfig", kubeconfig)
    return kubeconfig


def lockable(pk) -> bool:
    """Whether the workload's row can be locked now (no transaction of a dead session still holds it)."""
    with transaction.atomic():
        return Workload.objects.select_for_update(skip_locked=True).filter(pk=pk).exists()


# ---- A: a worker killed between the API server's answer and its commit ----------------------------------------

DIE_AFTER_CREATE = r"""
import os, signal, sys

import django

django.setup()
from pools.cluster.kube import KubeCluster
from scheduling.run.dispatch import dispatch

real_create = KubeCluster.create_job


def create_then_die(self, namespace, body):
    created = real_create(self, namespace, body)
    print("accepted", created["metadata"]["name"], flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # before dispatch updates the row: its transaction dies with us


KubeCluster.create_job = create_then_die
print("returned", dispatch(sys.argv[1]), flush=True)
"""


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_after_the_api_server_accepted_the_job_leaves_one_job_that_the_sweep_finds(
        world, researcher_api, standin, kube, tmp_path):
    on_standin(standin, tmp_path)
    created = researcher_api.post("/api/workloads/", body(), format="json").json()
    run_cycle()
    workload = Workload.objects.select_related("project").get(pk=created["id"])
    assert workload.status == Status.ADMITTED
    name, namespace = f"wl-{workload.id.hex[:12]}-1", workload.project.namespace

    child = subprocess.run([sys.executable, "-c", DIE_AFTER_CREATE, str(workload.pk)], cwd=settings.BASE_DIR,
                           env=child_env(), capture_output=True, text=True, timeout=300)
    assert child.returncode == -signal.SIGKILL, (child.returncode, child.stdout, child.stderr[-3000:])
    assert child.stdout.split() == ["accepted", name]  # killed inside dispatch, after the create returned
    (job,) = standin.jobs()
    assert (job["metadata"]["name"], job["metadata"]["labels"][f"{PREFIX}workload"]) == (name, str(workload.pk))

    # The dead worker's transaction is rolled back: the row is as the cycle left it.
    until(lambda: lockable(workload.pk), "PostgreSQL to end the killed worker's transaction")
    workload.refresh_from_db()
    assert (workload.status, workload.job_name, workload.dispatched_at) == (Status.ADMITTED, "", None)
    assert list(workload.events.values_list("status", flat=True)) == ["PENDING", "ADMITTED"]

    result = sweeps.sweep(act=True, clusters=lambda backend: kube)
    assert (result.dispatched, result.errors) == ({"found": 1}, [])
    assert [j["metadata"]["name"] for j in standin.jobs()] == [name]
    # Two creates reached the API server (the dead worker's, then the sweep's, answered 409); one Job.
    assert len(standin.requests_to(f"/apis/batch/v1/namespaces/{namespace}/jobs", method="POST")) == 2
    workload.refresh_from_db()
    assert (workload.status, workload.job_name, workload.namespace) == (Status.SCHEDULING, name, namespace)
    event = workload.events.last()
    assert event.reason == "DISPATCHED" and "found" in event.message and "earlier try" in event.message
    assert sweeps.sweep(act=True, clusters=lambda backend: kube).dispatched == {}  # nothing left to do
    assert len(standin.jobs()) == 1


# ---- B: the broker stopped while dispatch messages are being sent -------------------------------------------------

class PrivateRedis:
    """A redis-server of this test's own (never the shared one), without persistence: what it held when it
    stops is lost, as a broker's queue is when it dies."""

    def __init__(self, directory: Path):
        self.port = free_port()
        self.directory = directory
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.directory)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        until(self.answers, f"the private redis-server on port {self.port}", seconds=30, every=0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        self.process = None


class Worker:
    """`celery -A osmo_site worker` as deployed (one process, solo pool), on the private broker, kept running as a
    process supervisor would (systemd's Restart=, a Deployment's pod): a worker that died is started again, and
    how it died is kept for the report."""

    def __init__(self, url: str, directory: Path):
        self.url, self.directory = url, directory
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self.deaths: list[str] = []

    @property
    def log(self) -> Path:
        return self.directory / f"worker-{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        log = self.log
        self.process = process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "osmo_site", "worker", "-P", "solo", "-l", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"faults-{os.getpid()}@%h",
             "-Q", ",".join(every_queue())],
            cwd=settings.BASE_DIR, env=child_env(CELERY_BROKER_URL=self.url, OSMO_ADMISSION_ON_COMMIT="1"),
            stdout=log.open("w"), stderr=subprocess.STDOUT)
        until(lambda: process.poll() is not None or " ready." in log.read_text(), "the Celery worker to be ready",
              seconds=120)
        assert process.poll() is None, log.read_text()[-3000:]

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def reconnects_failed(self) -> int:
        """The failed attempts to reach the broker that the running worker has logged (Celery's consumer logs
        "Cannot connect to <broker>: <error>. Trying again in N seconds... (k/100)" for each)."""
        return self.log.read_text().count("consumer: Cannot connect to ")

    def alive(self) -> bool:
        """True; a worker found dead is started again first (call only while the broker is up)."""
        if self.process is not None and self.process.poll() is not None:
            lines = [line for line in self.log.read_text().splitlines() if "CRITICAL" in line or "Error" in line]
            self.deaths.append(f"{self.log.name} exited {self.process.returncode}: {lines[-3:]}")
            self.start()
        return True

    def stop(self) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)  # warm shutdown
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(30)


def statuses(names: list[str]) -> dict[str, str]:
    return dict(Workload.objects.filter(name__in=names).values_list("name", "status"))


@pytest.mark.redis
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_broker_outage_during_dispatch_loses_no_workload_and_the_sweep_gives_each_exactly_one_job(
        world, researcher_api, standin, tmp_path, settings):
    from django.core.cache import cache

    settings.OSMO_ADMISSION_ON_COMMIT = True
    on_standin(standin, tmp_path)
    broker = PrivateRedis(tmp_path)
    broker.start()
    worker = Worker(broker.url, tmp_path)
    caller_errors: list[str] = []  # exceptions the senders' callers saw (they should see none)

    def admit(names: list[str]) -> None:
        """Submit through the API (which asks for a cycle on commit), then run a cycle here (which sends one
        dispatch message per admitted workload on commit), as the site and the beat would."""
        for name in names:
            try:
                answer = researcher_api.post("/api/workloads/", body(name=name, priority="low"), format="json")
                if answer.status_code != 201:
                    caller_errors.append(f"submit {name}: HTTP {answer.status_code} {answer.content[:300]!r}")
            except Exception as exc:  # the test client re-raises what the view raised
                caller_errors.append(f"submit {name}: {type(exc).__name__}: {exc}")
        try:
            run_cycle()
        except Exception as exc:
            caller_errors.append(f"admission cycle after {names}: {type(exc).__name__}: {exc}")
        assert Workload.objects.filter(name__in=names).count() == len(names)  # every submission was saved

    try:
        with broker_at(broker.url):
            worker.start()
            before = [f"before-{i}" for i in range(3)]
            admit(before)
            until(lambda: set(statuses(before).values()) == {Status.SCHEDULING}, "the worker to dispatch",
                  seconds=120)

            # Messages sent, then the broker goes: those not consumed yet are lost with it.
            edge = [f"edge-{i}" for i in range(3)]
            admit(edge)
            broker.stop()
            down = [f"down-{i}" for i in range(3)]
            cache.delete("osmo:admission-requested")  # so that a submission now asks for a cycle (not debounced)
            admit(down)  # sending fails: the rows must stay ADMITTED, for the sweep
            assert set(statuses(down).values()) == {Status.ADMITTED}
            until(lambda: worker.reconnects_failed() >= OUTAGE_RECONNECTS or not worker.running(),
                  f"the worker to fail to reconnect {OUTAGE_RECONNECTS} times", seconds=120,
                  detail=lambda: worker.log.read_text()[-3000:])
            assert set(statuses(down).values()) == {Status.ADMITTED}  # nothing dispatches them meanwhile
            broker.start()

            after = [f"after-{i}" for i in range(2)]
            admit(after)
            until(lambda: worker.alive() and set(statuses(after).values()) == {Status.SCHEDULING},
                  "the worker to reconnect and dispatch what was sent after the outage", seconds=180)
            # The messages of the rows admitted during the outage were never sent: only the sweep re-drives them.
            assert set(statuses(down).values()) == {Status.ADMITTED}

            everyone = before + edge + down + after
            queued = []

            def swept_and_dispatched() -> bool:
                worker.alive()
                if set(statuses(everyone).values()) == {Status.SCHEDULING}:
                    return True
                # As the beat does every OSMO_LIFECYCLE_INTERVAL seconds; `now` is past the retry delay.
                now = timezone.now() + timedelta(seconds=settings.OSMO_DISPATCH_RETRY_SECONDS + 1)
                try:
                    queued.append(sweeps.sweep(now, act=False).dispatched.get("queued", 0))
                except Exception as exc:
                    caller_errors.append(f"sweep: {type(exc).__name__}: {exc}")
                return False

            # Polled every half second (was 3 s): the worker dispatches a sweep's messages within moments, and a
            # sweep that finds rows still ADMITTED sends them again, which exactly one Job each must survive too.
            until(swept_and_dispatched, "the sweep and the worker to dispatch every admitted workload",
                  seconds=180, every=0.5)
    finally:
        worker.stop()
        broker.stop()

    assert queued and queued[0] >= len(down), queued  # the sweep re-sent at least the ones lost in the outage
    workloads = list(Workload.objects.filter(name__in=everyone))
    assert len(workloads) == len(everyone)
    jobs = standin.jobs()
    by_workload = {}
    for job in jobs:
        by_workload.setdefault(job["metadata"]["labels"][f"{PREFIX}workload"], []).append(job["metadata"]["name"])
    for workload in workloads:
        assert workload.status == Status.SCHEDULING, (workload.name, workload.status)
        assert by_workload.get(str(workload.pk)) == [workload.job_name], (workload.name, by_workload)
    assert len(jobs) == len(everyone)
    # The outage must not break the callers that send: a submission, a cycle, a sweep. Their rows are saved
    # before the send, so an error here tells a user their submission failed when it did not.
    assert caller_errors == [], caller_errors
    # Nor the worker: it reconnects by itself (Celery 5.7.0 crashed here, see pyproject.toml); a supervisor's
    # restart is the last resort, not the way through an outage.
    assert worker.deaths == [], worker.deaths


# ---- The callers of the outbox while the broker does not answer ---------------------------------------------------
# Each row is the outbox: whatever a send loses, the sweep re-drives. So a failed send must neither fail the caller
# nor undo its write.

def attempt(call):
    """(what `call` returned, None), or (None, the traceback of what it raised): a test asserts what was written
    before it looks at the answer, and a failure still says why the call raised (the test client re-raises what the
    view raised)."""
    try:
        return call(), None
    except Exception:
        return None, traceback.format_exc()


@contextlib.contextmanager
def no_broker(settings):
    """Sending on, to a broker that does not answer (nothing listens on its port); the per-process debounce of
    `request_cycle` cleared (by `broker_at`), so that the first ask for a cycle really sends."""
    settings.OSMO_ADMISSION_ON_COMMIT = True
    with broker_at(f"redis://127.0.0.1:{free_port()}/0"):
        yield


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_submission_while_the_broker_is_down_answers_created(world, researcher_api, settings):
    with no_broker(settings):
        answer, raised = attempt(lambda: researcher_api.post("/api/workloads/", body(), format="json"))
    assert Workload.objects.filter(name="train-resnet", status=Status.PENDING).count() == 1  # it was saved
    assert raised is None, raised
    assert answer.status_code == 201, answer.content  # and the user must be told so


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_an_admission_cycle_while_the_broker_is_down_returns_and_keeps_the_rows_admitted(world, researcher_api,
                                                                                         settings):
    created = researcher_api.post("/api/workloads/", body(), format="json").json()  # sending still off
    with no_broker(settings):
        result, raised = attempt(run_cycle)
    assert Workload.objects.get(pk=created["id"]).status == Status.ADMITTED
    assert raised is None, raised
    assert [item["id"] for item in result.admitted] == [created["id"]]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cancel_while_the_broker_is_down_is_kept(world, researcher_api, settings):
    created = researcher_api.post("/api/workloads/", body(), format="json").json()  # PENDING, sending still off
    with no_broker(settings):
        answer, raised = attempt(lambda: researcher_api.post(f"/api/workloads/{created['id']}/cancel/", {},
                                                             format="json"))
    assert Workload.objects.get(pk=created["id"]).status == Status.FAILED_CANCELED
    assert raised is None, raised
    assert answer.status_code == 200, answer.content


@pytest.mark.django_db
def test_a_job_that_completes_while_the_broker_is_down_completes_its_workload(standin, kube, researcher_api,
                                                                              settings):
    from pools.cluster.reflector import list_all
    from pools.fleet import managed_jobs
    from scheduling.run import follow
    from tests.scheduling.test_lifecycle import admit_and_dispatch, job_status, pod

    workload = admit_and_dispatch(researcher_api, kube)
    pod(standin, workload, 0, "Succeeded", exit_code=0)
    job_status(standin, workload, "Complete", "CompletionsReached")
    jobs = list_all(lambda **kw: kube.list_jobs(managed_jobs.selector(), **kw)).items
    managed_jobs.reconcile(workload.pool.backend, jobs, list_all(kube.list_pods).items)  # the sync's list
    with no_broker(settings):
        moved, raised = attempt(follow.observe)  # as the sync's signal and every sweep do
    workload.refresh_from_db()
    assert workload.status == Status.COMPLETED
    assert raised is None, raised
    assert moved == {Status.COMPLETED: 1}
