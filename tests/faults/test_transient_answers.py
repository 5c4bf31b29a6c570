"""Transient answers are tried again, permanent ones fail (pools/cluster/retries.py; issue 39): for about 70 ms after
a restart kube-apiserver answers 403 while its authorization caches fill, and a workload submitted during an
outage ended FAILED_BACKEND_ERROR because dispatch took that 403 for a refusal. Dispatch, stop and the engines'
reconcile now retry no answer, 408, 429, 5xx, and 401/403 soon after the server was unreachable, with back-off and
a bounded number of tries, and say in the workload's events what was retried; 422 and a 403 that persists fail at
once. Against the stand-in API server (its outages and injected answers) through the real client; the clock is the
test's, whose sleep moves it on (and restarts the server, as an outage's end would)."""

import time

import pytest

from pools.cluster import ClusterError
from pools.cluster.kinds import KAI_QUEUE
from pools.cluster.retries import AUTH_WINDOW, TRIES, Retries, transient
from pools.models import Backend
from pools.schedulers.reconcile import run as reconcile
from scheduling.models import Status, Workload
from scheduling.run.attempts import request_stop
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from scheduling.run.stopping import stop
from tests.scheduling.conftest import body

pytestmark = pytest.mark.django_db
JOBS = "/apis/batch/v1"
FORBIDDEN = 'jobs.batch is forbidden: User "system:serviceaccount:osmo:osmo-pools" cannot create resource "jobs"'


class Clock:
    """The test's clock (on time.monotonic's scale, as the client notes outages); sleeping moves it on and runs
    what the test wants done meanwhile."""

    def __init__(self, meanwhile=None):
        self.now, self.slept, self.meanwhile = time.monotonic(), [], meanwhile

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if self.meanwhile:
            self.meanwhile(len(self.slept))

    def retries(self, **fields) -> Retries:
        return Retries(clock=self, sleep=self.sleep, rng=lambda: 1.0, **fields)


@pytest.fixture
def admitted(researcher_api) -> Workload:
    created = researcher_api.post("/api/workloads/", body(), format="json").json()
    run_cycle()
    return Workload.objects.get(pk=created["id"])


@pytest.mark.parametrize("status, since, expected", [
    (None, None, True), (408, None, True), (429, None, True), (500, None, True), (503, None, True),
    (403, 0.07, True), (401, AUTH_WINDOW, True), (403, AUTH_WINDOW + 0.1, False), (403, None, False),
    (400, 0.0, False), (404, 0.0, False), (409, 0.0, False), (422, 0.0, False)])
def test_which_answers_are_transient(status, since, expected):
    assert transient(status, since) is expected


def test_a_403_right_after_the_server_came_back_is_retried_and_the_job_created(standin, kube, admitted):
    """The outage of issue 39: no answer, the server back and warming up (403), then the Job."""
    def meanwhile(sleeps):
        if sleeps == 1:
            standin.start()
            standin.fail_next(1, status=403, path_prefix=JOBS, method="POST", message=FORBIDDEN)
    clock = Clock(meanwhile)
    standin.stop()

    assert dispatch(admitted.pk, clusters=lambda backend: kube, retries=clock.retries()) == "created"

    admitted.refresh_from_db()
    assert admitted.status == Status.SCHEDULING and len(standin.jobs()) == 1
    message = admitted.events.last().message
    assert message.startswith(f"Job {admitted.namespace}/{admitted.job_name} created on backend default. "
                              "Retried 2 times after: no answer (getting namespace ")
    assert f"; HTTP 403 (creating job {admitted.namespace}/{admitted.job_name}: HTTP 403 {FORBIDDEN})." in message
    assert clock.slept == [0.5, 0.5]  # each call backs off on its own: the namespace's, then the Job's


def test_a_403_that_persists_fails_the_workload_with_the_servers_words(standin, kube, admitted):
    clock = Clock()
    standin.fail_next(1, status=403, path_prefix=JOBS, method="POST", message=FORBIDDEN)

    assert dispatch(admitted.pk, clusters=lambda backend: kube, retries=clock.retries()) == "failed"

    admitted.refresh_from_db()
    assert admitted.status == Status.FAILED_BACKEND_ERROR and clock.slept == [] and standin.jobs() == []
    event = admitted.events.last()
    assert event.reason == "JOB_REFUSED" and event.message.endswith(f"HTTP 403 {FORBIDDEN}")


def test_a_403_after_an_outage_is_permanent_once_the_window_has_passed(standin, kube, admitted):
    def meanwhile(sleeps):
        if sleeps == 1:
            standin.start()
            standin.fail_next(10, status=403, path_prefix=JOBS, method="POST", message=FORBIDDEN)
    clock = Clock(meanwhile)
    standin.stop()

    outcome = dispatch(admitted.pk, clusters=lambda backend: kube,
                       retries=clock.retries(base=AUTH_WINDOW * 0.6, cap=AUTH_WINDOW * 0.6, budget=10 * AUTH_WINDOW))

    admitted.refresh_from_db()
    assert outcome == "failed" and admitted.status == Status.FAILED_BACKEND_ERROR
    assert len(clock.slept) == 2  # the 403 at 0.6 x the window was retried, the one at 1.2 x was not
    assert "Retried 2 times after: no answer" in admitted.events.last().message


def test_a_422_fails_at_once_without_retrying(standin, kube, admitted):
    clock = Clock()
    standin.fail_next(1, status=422, path_prefix=JOBS, method="POST", message="Job.batch is invalid")

    assert dispatch(admitted.pk, clusters=lambda backend: kube, retries=clock.retries()) == "failed"
    assert clock.slept == []


def test_transient_answers_past_the_tries_leave_it_admitted_and_say_so_then_a_later_try_creates_it(
        standin, kube, admitted):
    clock = Clock()
    standin.fail_next(TRIES - 1, status=503, path_prefix=JOBS, method="POST", message="etcdserver: leader changed")
    standin.fail_next(1, status=429, path_prefix=JOBS, method="POST", message="too many requests")

    with pytest.raises(ClusterError) as caught:
        dispatch(admitted.pk, clusters=lambda backend: kube, retries=clock.retries())

    assert caught.value.status == 429 and clock.slept == [0.5, 1.0, 2.0, 4.0]
    admitted.refresh_from_db()
    assert admitted.status == Status.ADMITTED and standin.jobs() == []
    event = admitted.events.last()
    assert (event.status, event.reason) == (Status.ADMITTED, "DISPATCH_RETRYING")
    assert "Retried 4 times after: HTTP 503 (creating job" in event.message and "leader changed) x4" in event.message
    assert event.message.endswith("too many requests It is tried again later.")
    assert dispatch(admitted.pk, clusters=lambda backend: kube, retries=Clock().retries()) == "created"


def test_no_try_starts_once_the_budget_is_spent(standin, kube, admitted):
    clock = Clock()
    standin.fail_next(TRIES, status=503, path_prefix=JOBS, method="POST")

    with pytest.raises(ClusterError):
        dispatch(admitted.pk, clusters=lambda backend: kube, retries=clock.retries(base=3.0, cap=3.0, budget=5.0))

    assert clock.slept == [3.0, 3.0]  # the third try began 6 s in, past the 5-s budget: no fourth


@pytest.fixture
def stopping(standin, kube, admitted) -> Workload:
    assert dispatch(admitted.pk, clusters=lambda backend: kube, retries=Clock().retries()) == "created"
    workload = Workload.objects.get(pk=admitted.pk)
    request_stop(workload, Status.FAILED_CANCELED, "CANCELED", "Canceled by researcher.")
    return Workload.objects.get(pk=admitted.pk)


def test_a_stop_retries_a_503_and_says_so(standin, kube, stopping):
    clock = Clock()
    standin.fail_next(2, status=503, path_prefix=JOBS, method="DELETE", message="etcdserver: leader changed")

    assert stop(stopping.pk, clusters=lambda backend: kube, retries=clock.retries()) == "stopped"

    assert standin.jobs() == [] and clock.slept == [0.5, 1.0]
    retried = stopping.events.get(reason="STOP_RETRIED")
    assert retried.message.startswith(f"Deleting the Job {stopping.namespace}/{stopping.job_name} on backend "
                                      "default: Retried 2 times after: HTTP 503")
    assert Workload.objects.get(pk=stopping.pk).status == Status.FAILED_CANCELED


def test_a_stop_refused_for_good_says_why_once_and_is_left_for_a_later_try(standin, kube, stopping):
    forbidden = 'jobs.batch "x" is forbidden: User "osmo" cannot delete resource "jobs"'
    standin.fail_next(2, status=403, path_prefix=JOBS, method="DELETE", message=forbidden)

    for _ in range(2):
        assert stop(stopping.pk, clusters=lambda backend: kube, retries=Clock().retries()) == "refused"

    (refused,) = stopping.events.filter(reason="STOP_REFUSED")
    assert refused.message.startswith(f"Deleting the Job {stopping.namespace}/{stopping.job_name} on backend "
                                      "default was refused: deleting job")
    assert forbidden in refused.message
    assert len(standin.jobs()) == 1 and Workload.objects.get(pk=stopping.pk).stop_status == Status.FAILED_CANCELED
    assert stop(stopping.pk, clusters=lambda backend: kube, retries=Clock().retries()) == "stopped"
    assert standin.jobs() == []


def test_the_engines_reconcile_retries_a_503_instead_of_recording_a_refusal(kai, standin, kube, monkeypatch):
    monkeypatch.setattr("pools.schedulers.reconcile.Retries",
                        lambda **fields: Retries(sleep=lambda seconds: None, **fields))
    standin.fail_next(2, status=503, path_prefix="/apis/scheduling.run.ai/v2/queues", method="POST")

    result = reconcile(Backend.objects.get(pk=kai.pk), kube)

    assert result.refused == [] and {q["metadata"]["name"] for q in standin.objects(KAI_QUEUE)} == {
        name.split("/")[-1] for name in result.created if name.startswith("Queue/")}
