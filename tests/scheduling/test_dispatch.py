"""Dispatch groundwork (scheduling/run/dispatch.py) against the stand-in API server through the real client: one
Job per attempt, a Job an earlier try created is accepted, a Job of that name that is not ours fails the
workload, a server error leaves the row ADMITTED for a later try."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.cluster import ClusterError
from pools.cluster.retries import TRIES, Retries
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import attempt_of, dispatch, dispatch_many
from scheduling.specs.jobs import job_manifest
from tests.scheduling.conftest import body
from tests.waiting import until

pytestmark = pytest.mark.django_db
PREFIX = "runwhere.ai/"


@pytest.fixture
def admitted(researcher_api) -> Workload:
    created = researcher_api.post("/api/workloads/", body(replicas=2, exec_timeout="4h"), format="json").json()
    run_cycle()
    workload = Workload.objects.select_related("pool", "project").get(pk=created["id"])
    assert workload.status == Status.ADMITTED
    return workload


def test_it_creates_one_job_and_the_workload_is_scheduling(standin, kube, admitted):
    standin.strict_namespaces = True  # as the API server: no Job in a namespace that does not exist
    assert dispatch(admitted.pk, clusters=lambda backend: kube) == "created"
    labels = standin.namespace(admitted.project.namespace)["metadata"]["labels"]
    assert labels == {f"{PREFIX}managed-by": "osmo-pools", f"{PREFIX}project": "vision"}

    (job,) = standin.jobs()
    namespace = admitted.project.namespace
    assert job["metadata"]["namespace"] == namespace
    assert job["metadata"]["labels"][f"{PREFIX}workload"] == str(admitted.pk)
    backend = admitted.pool.backend.name  # the backend that wrote it, on the Job and on its pods
    assert job["metadata"]["labels"][f"{PREFIX}backend"] == backend
    assert job["spec"]["template"]["metadata"]["labels"][f"{PREFIX}backend"] == backend
    assert (job["spec"]["parallelism"], job["spec"]["activeDeadlineSeconds"]) == (2, 4 * 3600)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    admitted.refresh_from_db()
    assert (admitted.status, admitted.job_name, admitted.namespace) == (Status.SCHEDULING, job["metadata"]["name"],
                                                                       namespace)
    assert admitted.events.last().reason == "DISPATCHED"
    assert dispatch(admitted.pk, clusters=lambda backend: kube) == "skipped"  # not ADMITTED any more
    assert len(standin.jobs()) == 1


def test_a_job_an_earlier_try_created_is_accepted_without_a_second_one(standin, kube, admitted):
    # The earlier try: the API server accepted the Job, then the worker died before the row was updated.
    manifest = job_manifest(attempt_of(admitted), prefix=PREFIX, ttl_seconds=60)
    kube.create_job(admitted.project.namespace, manifest)

    assert dispatch(admitted.pk, clusters=lambda backend: kube) == "found"
    assert len(standin.jobs()) == 1
    admitted.refresh_from_db()
    assert admitted.status == Status.SCHEDULING and "earlier try" in admitted.events.last().message


def test_a_job_of_that_name_that_is_not_ours_fails_the_workload(standin, kube, admitted):
    manifest = job_manifest(attempt_of(admitted), prefix=PREFIX, ttl_seconds=60)
    manifest["metadata"]["labels"] = {"app": "someone-else"}
    kube.create_job(admitted.project.namespace, manifest)

    assert dispatch(admitted.pk, clusters=lambda backend: kube) == "failed"
    admitted.refresh_from_db()
    assert admitted.status == Status.FAILED_BACKEND_ERROR
    assert "is not this workload's" in admitted.events.last().message
    assert standin.jobs()[0]["metadata"]["labels"] == {"app": "someone-else"}  # theirs, untouched


def test_a_namespace_that_exists_is_used_as_it_is(standin, kube, admitted):
    standin.strict_namespaces = True
    standin.add_namespace(admitted.project.namespace, {"team": "vision"})
    assert dispatch(admitted.pk, clusters=lambda backend: kube) == "created"
    assert standin.namespace(admitted.project.namespace)["metadata"]["labels"] == {"team": "vision"}


def test_a_server_error_leaves_the_workload_admitted_for_a_later_try(standin, kube, admitted):
    standin.fail_next(TRIES, status=500, path_prefix="/apis/batch/v1", method="POST")  # every try of this call
    with pytest.raises(ClusterError):
        dispatch(admitted.pk, clusters=lambda backend: kube, retries=Retries(sleep=lambda seconds: None))
    admitted.refresh_from_db()
    assert admitted.status == Status.ADMITTED and standin.jobs() == []
    assert admitted.events.last().reason == "DISPATCH_RETRYING"

    assert dispatch(admitted.pk, clusters=lambda backend: kube) == "created"
    assert len(standin.jobs()) == 1


def admit_two(researcher_api) -> list[str]:
    ids = [researcher_api.post("/api/workloads/", body(name=f"train-{i}"), format="json").json()["id"] for i in (1, 2)]
    run_cycle()
    assert set(Workload.objects.filter(pk__in=ids).values_list("status", flat=True)) == {Status.ADMITTED}
    return ids


def test_a_namespace_this_process_made_is_not_asked_for_again(standin, kube, researcher_api):
    """Issue 43's speed: the second dispatch into a namespace is one request (the create) and two statements (the
    locked read; the row's update and its event in one round trip)."""
    standin.strict_namespaces = True
    first, second = admit_two(researcher_api)
    assert dispatch(first, clusters=lambda backend: kube) == "created"
    standin.clear_requests()
    with CaptureQueriesContext(connection) as queries:
        assert dispatch(second, clusters=lambda backend: kube) == "created"
    assert [(r.method, r.path) for r in standin.requests] == [("POST", "/apis/batch/v1/namespaces/proj-vision/jobs")]
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 2, statements
    row = Workload.objects.get(pk=second)
    assert (row.status, row.namespace, row.dispatched_at is not None) == (Status.SCHEDULING, "proj-vision", True)
    assert row.job_name in {job["metadata"]["name"] for job in standin.jobs()}
    assert row.events.last().reason == "DISPATCHED"


def test_a_namespace_deleted_by_hand_since_is_made_again(standin, kube, researcher_api):
    standin.strict_namespaces = True  # as the API server: a create in a missing namespace is answered 404
    first, second = admit_two(researcher_api)
    assert dispatch(first, clusters=lambda backend: kube) == "created"
    standin.delete_namespace("proj-vision")

    assert dispatch(second, clusters=lambda backend: kube) == "created"
    assert standin.namespace("proj-vision")["metadata"]["labels"] == {f"{PREFIX}managed-by": "osmo-pools",
                                                                      f"{PREFIX}project": "vision"}
    assert Workload.objects.get(pk=second).status == Status.SCHEDULING and len(standin.jobs()) == 2


def admit(researcher_api, count: int) -> list[str]:
    ids = [researcher_api.post("/api/workloads/", body(name=f"train-{i}"), format="json").json()["id"]
           for i in range(count)]
    run_cycle()
    assert set(Workload.objects.filter(pk__in=ids).values_list("status", flat=True)) == {Status.ADMITTED}
    return ids


def test_a_batch_is_one_locked_read_and_one_write_for_all_its_rows(standin, kube, researcher_api):
    """Issue 43's speed: the batch task's workloads are locked by one statement, and their rows and events written
    in one round trip, in one transaction."""
    ids = admit(researcher_api, 4)
    assert dispatch(ids[0], clusters=lambda backend: kube) == "created"  # the namespace known to this client
    with CaptureQueriesContext(connection) as queries:
        assert dispatch_many([*ids, ids[1]], clusters=lambda backend: kube) == [
            "skipped", "created", "created", "created", "skipped"]  # the first is done, the last twice named
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    assert len(statements) == 2, statements
    assert len(standin.jobs()) == 4
    for row in Workload.objects.filter(pk__in=ids):
        assert row.status == Status.SCHEDULING and row.job_name and row.dispatched_at is not None
        assert list(row.events.filter(reason="DISPATCHED").values_list("message", "pools", "status")) == [
            (f"Job proj-vision/{row.job_name} created on backend {row.pool.backend.name}.", [row.pool.name],
             Status.SCHEDULING)]
        assert row.events.get(reason="DISPATCHED").at == row.dispatched_at == row.updated_at


def test_in_a_batch_each_workload_has_its_own_outcome(standin, kube, researcher_api):
    taken, refused, transient, fine = admit(researcher_api, 4)
    theirs = job_manifest(attempt_of(Workload.objects.select_related("pool__backend", "project").get(pk=taken)),
                          prefix=PREFIX, ttl_seconds=60)
    theirs["metadata"]["labels"] = {"app": "someone-else"}
    kube.create_job("proj-vision", theirs)
    jobs = "/apis/batch/v1"
    # The creates in the batch's order: `refused` answered 422, `transient` 500 every try, `taken` 409 (and its GET
    # says whose it is), `fine` gets through.
    standin.fail_next(1, status=422, path_prefix=jobs, method="POST")
    standin.fail_next(TRIES, status=500, path_prefix=jobs, method="POST")
    outcomes = dispatch_many([refused, transient, taken, fine], clusters=lambda backend: kube,
                             retries=Retries(sleep=lambda seconds: None), threads=1)  # the faults in this order
    assert outcomes[0] == "failed" and isinstance(outcomes[1], ClusterError) and outcomes[2:] == ["failed", "created"]
    rows = {str(w.pk): w for w in Workload.objects.filter(pk__in=[taken, refused, transient, fine])}
    assert [rows[i].status for i in (taken, refused, transient, fine)] == [
        Status.FAILED_BACKEND_ERROR, Status.FAILED_BACKEND_ERROR, Status.ADMITTED, Status.SCHEDULING]
    assert [rows[i].events.last().reason for i in (taken, refused, transient, fine)] == [
        "JOB_NOT_OURS", "JOB_REFUSED", "DISPATCH_RETRYING", "DISPATCHED"]

    assert "Retried" not in rows[fine].events.last().message  # the retries were `transient`'s own


def test_what_a_batch_did_before_an_unexpected_error_is_kept_and_the_rest_left_admitted(standin, kube, researcher_api):
    ids = admit(researcher_api, 3)
    calls = []

    def clusters(backend):
        calls.append(backend)
        if len(calls) == 2:
            raise RuntimeError("a bug")
        return kube

    with pytest.raises(RuntimeError):
        dispatch_many(ids, clusters=clusters)
    statuses = dict(Workload.objects.filter(pk__in=ids).values_list("id", "status"))
    assert [statuses[Workload._meta.pk.to_python(i)] for i in ids] == [Status.SCHEDULING, Status.ADMITTED,
                                                                       Status.ADMITTED]
    assert dispatch_many(ids[1:], clusters=lambda backend: kube) == ["created", "created"]


@pytest.mark.parametrize(("threads", "count"), [(1, 3), (2, 4)])
def test_a_long_batch_commits_what_it_did_and_locks_the_rest_again(standin, kube, researcher_api, threads, count):
    """The clock is read once as the chunk begins and once per dispatch written (3 "seconds" each). One wide: past
    CHUNK_SECONDS (5) after the second, committed, the third locked again. Two wide: the third was in flight when
    the second was written past the limit, so it is written in the first chunk; the fourth is locked
    again."""
    ids = admit(researcher_api, count)
    ticks = iter(range(0, 1000, 3))
    with CaptureQueriesContext(connection) as queries:
        assert dispatch_many(ids, clusters=lambda backend: kube, clock=lambda: next(ticks),
                             threads=threads) == ["created"] * count
    locks = [q["sql"] for q in queries.captured_queries if "FOR UPDATE" in q["sql"] or "IN (" in q["sql"]]
    assert len(locks) == 2
    assert set(Workload.objects.filter(pk__in=ids).values_list("status", flat=True)) == {Status.SCHEDULING}


def test_a_batch_has_several_creates_in_flight_and_writes_each_outcome_as_its_own(standin, kube, researcher_api):
    """Three wide: three Job creates wait at the API server at the same time (held there until all three have come),
    and each workload gets its own outcome whatever order the answers come in: the one whose Job name is somebody
    else's fails, the others are SCHEDULING with their own Job, written by this thread after the cluster half."""
    first, taken, *rest = admit(researcher_api, 4)
    theirs = job_manifest(attempt_of(Workload.objects.select_related("pool__backend", "project").get(pk=taken)),
                          prefix=PREFIX, ttl_seconds=60)
    theirs["metadata"]["labels"] = {"app": "someone-else"}
    kube.create_job("proj-vision", theirs)
    standin.hold_next(3, path_prefix="/apis/batch/v1/namespaces/", method="POST")
    together = []

    def release():
        until(lambda: standin.held == 3, "three creates held at the API server at once")
        together.append(standin.held)
        standin.release_holds()

    releaser = threading.Thread(target=release)
    releaser.start()
    outcomes = dispatch_many([first, taken, *rest], clusters=lambda backend: kube, threads=3)
    releaser.join()
    assert together == [3]
    assert outcomes == ["created", "failed", "created", "created"]
    rows = {str(w.pk): w for w in Workload.objects.filter(pk__in=[first, taken, *rest])}
    assert rows[taken].status == Status.FAILED_BACKEND_ERROR and rows[taken].events.last().reason == "JOB_NOT_OURS"
    for workload_id in (first, *rest):
        row = rows[workload_id]
        assert row.status == Status.SCHEDULING and row.events.last().reason == "DISPATCHED"
        job = standin.job(row.job_name, namespace="proj-vision")
        assert job["metadata"]["labels"][f"{PREFIX}workload"] == workload_id
