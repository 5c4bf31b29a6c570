"""The sync follows our Jobs (pools/fleet/sync.py, pools/fleet/managed_jobs.py): the real client over HTTP against
the stand-in API server, into ManagedJob rows. Jobs labelled `runwhere.ai/managed-by=osmo-pools` and their pods
are stored by the list and followed by the watch; a 410 Expired on the Jobs watch lists them again without
losing a change, and a Job deleted while nobody watched is marked gone; Jobs not labelled as ours are never
stored."""

import threading
import time
import uuid

import pytest
from django.db import connection

from pools.fleet.sync import BackendSync, cluster_for
from pools.inventory.jobs import job_facts
from pools.models import Backend, ManagedJob
from tests import waiting
from tests.kube_objects import make_node, make_pod

PREFIX = "runwhere.ai/"
NAMESPACE = "osmo-vision"
JOBS = "/apis/batch/v1/jobs"
SELECTOR = f"{PREFIX}managed-by=osmo-pools"


@pytest.fixture(autouse=True)
def two_gpu_nodes(standin):
    standin.add_nodes([make_node("gpu-a", gpus=8), make_node("gpu-b", gpus=8)])


def our_labels(workload: str, attempt: int = 1) -> dict[str, str]:
    return {f"{PREFIX}managed-by": "osmo-pools", f"{PREFIX}workload": workload, f"{PREFIX}attempt": str(attempt),
            f"{PREFIX}project": "vision"}


def create_job(kube, name: str, labels: dict[str, str]) -> dict:
    """As dispatch does: through the real client (POST), so the API server stamps it."""
    return kube.create_job(NAMESPACE, {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"parallelism": 1, "completions": 1, "completionMode": "Indexed", "backoffLimit": 0,
                 "template": {"metadata": {"labels": labels},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "train", "image": "busybox"}]}}}})


def add_pod(standin, job: str, labels: dict[str, str], *, index: int = 0, node: str | None = "gpu-a",
            phase: str = "Running") -> str:
    """What the Job controller and the kubelet would write for one pod of `job`."""
    name = f"{job}-{index}-abcde"
    standin.add_pod(make_pod(name, node, namespace=NAMESPACE, gpus=1, phase=phase,
                             labels={**labels, "batch.kubernetes.io/job-name": job},
                             annotations={"batch.kubernetes.io/job-completion-index": str(index)}))
    return name


def pod_ended(standin, name: str, exit_code: int) -> None:
    def change(pod):
        pod["status"] = {"phase": "Succeeded" if exit_code == 0 else "Failed", "containerStatuses": [
            {"name": "main", "state": {"terminated": {"exitCode": exit_code,
                                                      "reason": "Completed" if exit_code == 0 else "Error"}}}]}
        return pod
    standin.modify_pod(name, change, namespace=NAMESPACE)


def job_status(standin, name: str, status: dict) -> None:
    def change(job):
        job["status"] = status
        return job
    standin.modify_job(name, change, namespace=NAMESPACE)


COMPLETE = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True", "reason": "CompletionsReached",
                                            "message": "Reached expected number of succeeded pods"}]}


def rows(backend) -> dict[str, ManagedJob]:
    return {row.name: row for row in ManagedJob.objects.filter(backend=backend)}


def until(condition, what: str, seconds: float = 60):
    return waiting.until(condition, what, seconds, every=0.05,
                         detail=lambda: f"rows: {list(ManagedJob.objects.values('name', 'job', 'gone'))}")


class Following:
    """A BackendSync run watching in a thread (as the sync task does) until `stop()`: its clock jumps past the
    deadline and the stand-in ends the streams, so the run ends without any wait being timed."""

    def __init__(self, backend: Backend, standin):
        self.standin = standin
        self.offset = 0.0
        self.sync = BackendSync(Backend.objects.get(pk=backend.pk), cluster_for(backend),
                                clock=lambda: time.monotonic() + self.offset)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="following", daemon=True)
        self.thread.start()
        standin.wait_for_watches(4, timeout=60)  # nodes, pods, jobs, FailedCreate events

    def _run(self) -> None:
        try:
            self.sync.run(seconds=3600)
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()  # this thread's own connection

    def stop(self):
        self.offset = 10 ** 7

        def ended() -> bool:
            self.standin.end_watches()  # again and again: a stream may open between two calls
            self.thread.join(0.2)
            return not self.thread.is_alive()

        waiting.until(ended, "the sync to stop", every=0)
        if self.error is not None:
            raise self.error
        return self.sync.stats


@pytest.fixture
def following(backend, standin):
    started = []

    def start() -> Following:
        started.append(Following(backend, standin))
        return started[-1]

    yield start
    for run in started:
        if run.thread.is_alive():
            run.stop()


@pytest.mark.django_db
def test_a_list_stores_our_jobs_with_their_pods_and_nothing_of_jobs_not_ours(standin, backend, kube):
    workload = str(uuid.uuid4())
    ours = our_labels(workload)
    create_job(kube, "wl-ours-1", ours)
    job_status(standin, "wl-ours-1", {"active": 1, "ready": 1})
    pod = add_pod(standin, "wl-ours-1", ours, node="gpu-b")
    # Not ours: no label at all, and one that names a workload but is managed by someone else.
    create_job(kube, "etl", {"app": "etl"})
    add_pod(standin, "etl", {"app": "etl"})
    theirs = {**our_labels(str(uuid.uuid4())), f"{PREFIX}managed-by": "someone-else"}
    create_job(kube, "copied", theirs)
    job_status(standin, "copied", COMPLETE)

    stats = BackendSync(backend, cluster_for(backend)).run(seconds=0)
    assert stats.errors == []
    stored = rows(backend)
    assert list(stored) == ["wl-ours-1"]
    row = stored["wl-ours-1"]
    assert (row.namespace, row.workload, row.attempt, row.gone) == (NAMESPACE, workload, 1, False)
    assert row.job == {"active": 1, "ready": 1, "succeeded": 0, "failed": 0, "finished": "", "reason": "",
                       "message": ""}
    assert list(row.pods) == [pod]
    facts = row.pods[pod]
    assert (facts["node"], facts["phase"], facts["index"], facts["exit_code"]) == ("gpu-b", "Running", "0", None)
    backend.refresh_from_db()
    assert backend.jobs_resource_version
    (listed,) = standin.requests_to(JOBS, watch=False)
    assert listed.query["labelSelector"] == SELECTOR  # Jobs are listed with our selector, not all of them


def test_a_backend_sharing_the_cluster_never_stores_the_jobs_another_backend_wrote(standin, backend, kube, tmp_path):
    from django.core.management import call_command

    call_command("backend", "add", "split", "--kubeconfig", standin.kubeconfig(tmp_path / "split"),
                 "--same-cluster-as", "prod")
    split = Backend.objects.get(name="split")
    mine, theirs, legacy = (str(uuid.uuid4()) for _ in range(3))
    create_job(kube, "wl-prod", {**our_labels(mine), f"{PREFIX}backend": "prod"})
    add_pod(standin, "wl-prod", {**our_labels(mine), f"{PREFIX}backend": "prod"})
    create_job(kube, "wl-split", {**our_labels(theirs), f"{PREFIX}backend": "split"})
    add_pod(standin, "wl-split", {**our_labels(theirs), f"{PREFIX}backend": "split"}, node="gpu-b")
    create_job(kube, "wl-before", our_labels(legacy))  # written before Jobs carried their backend

    for each in (backend, split):
        assert BackendSync(each, cluster_for(each)).run(seconds=0).errors == []
    assert sorted(rows(backend)) == ["wl-before", "wl-prod"]
    assert list(rows(backend)["wl-prod"].pods) == ["wl-prod-0-abcde"]
    assert sorted(rows(split)) == ["wl-before", "wl-split"]
    assert list(rows(split)["wl-split"].pods) == ["wl-split-0-abcde"]


@pytest.mark.django_db(transaction=True)
def test_the_watch_follows_our_jobs_and_their_pods_and_never_stores_others(standin, backend, kube, following):
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    create_job(kube, "wl-first-1", our_labels(first))
    job_status(standin, "wl-first-1", {"active": 1})
    pod = add_pod(standin, "wl-first-1", our_labels(first))
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    assert list(rows(backend)) == ["wl-first-1"]

    run = following()
    # The Job controller and the kubelet finish the first Job.
    pod_ended(standin, pod, 0)
    job_status(standin, "wl-first-1", COMPLETE)
    row = until(lambda: (r := rows(backend).get("wl-first-1")) and r.job.get("finished") == "Complete"
                and r.pods[pod]["phase"] == "Succeeded" and r, "the finished Job and its pod")
    assert row.job == job_facts({"status": COMPLETE}) and row.pods[pod]["exit_code"] == 0 and not row.gone

    # A second Job and its pod, created while the sync watches; and Jobs that are not ours.
    create_job(kube, "wl-second-2", our_labels(second, attempt=2))
    second_pod = add_pod(standin, "wl-second-2", our_labels(second, attempt=2), node=None)
    create_job(kube, "nightly", {"app": "nightly"})
    create_job(kube, "copied", {**our_labels(str(uuid.uuid4())), f"{PREFIX}managed-by": "someone-else"})
    row = until(lambda: (r := rows(backend).get("wl-second-2")) and second_pod in r.pods and r.job and r,
                "the second Job and its pod")
    assert (row.workload, row.attempt, row.gone) == (second, 2, False)
    assert row.pods[second_pod]["phase"] == "Pending" and "Insufficient" in row.pods[second_pod]["unschedulable"]

    # Deleted while watched: the pod is kept as deleted, the Job is gone.
    standin.delete_pod(second_pod, namespace=NAMESPACE)
    kube.delete_job(NAMESPACE, "wl-second-2")
    until(lambda: (r := rows(backend)["wl-second-2"]).gone and r.pods[second_pod].get("deleted"),
          "the deletions")
    stats = run.stop()
    assert stats.errors == [] and stats.relists == 0  # followed, not listed again
    assert sorted(rows(backend)) == ["wl-first-1", "wl-second-2"]  # nothing of "nightly" or "copied"
    assert not rows(backend)["wl-first-1"].gone
    assert {r.query.get("labelSelector") for r in standin.requests_to(JOBS, watch=True)} == {SELECTOR}


@pytest.mark.django_db(transaction=True)
def test_a_jobs_watch_that_expires_while_watching_lists_again_and_keeps_the_change_made_meanwhile(
        standin, backend, kube, following):
    workload = str(uuid.uuid4())
    create_job(kube, "wl-job-1", our_labels(workload))
    job_status(standin, "wl-job-1", {"active": 1})
    pod = add_pod(standin, "wl-job-1", our_labels(workload))
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    run = following()
    lists = len(standin.requests_to(JOBS, watch=False))

    # The Job finishes and, before the Jobs watch has sent it, the API server drops its history: the open Jobs
    # stream ends with an ERROR 410 Expired instead of the change. (The stand-in's lock held across both, so
    # that the stream cannot send the change in between.)
    with standin._cond:
        job_status(standin, "wl-job-1", COMPLETE)
        standin.compact()
    until(lambda: rows(backend)["wl-job-1"].job.get("finished") == "Complete", "the change, by the new list")
    assert len(standin.requests_to(JOBS, watch=False)) > lists  # it came from a list of Jobs

    # The watch goes on from the new list: later changes arrive as before.
    pod_ended(standin, pod, 0)
    until(lambda: rows(backend)["wl-job-1"].pods[pod]["phase"] == "Succeeded", "a change after the new list")
    stats = run.stop()
    assert stats.relists >= 1 and stats.errors == []
    row = rows(backend)["wl-job-1"]
    assert row.job == job_facts({"status": COMPLETE}) and not row.gone


@pytest.mark.parametrize("expiry", ["compacted history", "ERROR event on the Jobs watch"])
@pytest.mark.django_db(transaction=True)
def test_what_happened_while_the_sync_was_not_watching_is_listed_after_a_410(standin, backend, kube, following,
                                                                            expiry):
    kept, deleted, new = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    create_job(kube, "wl-kept-1", our_labels(kept))
    job_status(standin, "wl-kept-1", {"active": 1})
    create_job(kube, "wl-deleted-1", our_labels(deleted))
    doomed_pod = add_pod(standin, "wl-deleted-1", our_labels(deleted))
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    assert sorted(rows(backend)) == ["wl-deleted-1", "wl-kept-1"]
    lists = len(standin.requests_to(JOBS, watch=False))

    # Between two runs: one Job completes, one is deleted (with its pod), one is created.
    job_status(standin, "wl-kept-1", COMPLETE)
    standin.delete_pod(doomed_pod, namespace=NAMESPACE)
    kube.delete_job(NAMESPACE, "wl-deleted-1")
    create_job(kube, "wl-new-1", our_labels(new))
    if expiry == "compacted history":
        standin.compact()  # resuming from the stored resourceVersion answers 410
    else:
        # The history is there, but the Jobs watch answers an ERROR 410 before any event: only a list can tell.
        standin.error_next_watch(410, path_prefix=JOBS)

    run = following()

    def listed() -> bool:
        stored = rows(backend)
        return (len(stored) == 3 and stored["wl-kept-1"].job.get("finished") == "Complete"
                and stored["wl-deleted-1"].gone and bool(stored["wl-deleted-1"].pods[doomed_pod].get("deleted"))
                and bool(stored["wl-new-1"].job))

    until(listed, "the new list of Jobs (and the pod's deletion)")
    stats = run.stop()
    assert stats.relists >= 1 and stats.errors == []
    assert len(standin.requests_to(JOBS, watch=False)) > lists
    stored = rows(backend)
    assert stored["wl-kept-1"].job == job_facts({"status": COMPLETE}) and not stored["wl-kept-1"].gone
    assert stored["wl-deleted-1"].gone and stored["wl-deleted-1"].pods[doomed_pod].get("deleted") is True
    assert (stored["wl-new-1"].workload, stored["wl-new-1"].gone) == (new, False)


def failed_create(standin, job: str, message: str, *, reason: str = "FailedCreate", kind: str = "Job") -> None:
    """What the Job controller records when the API server refuses a pod of `job`."""
    standin.add_event({"metadata": {"name": f"{job}.{uuid.uuid4().hex[:6]}", "namespace": NAMESPACE},
                       "involvedObject": {"kind": kind, "namespace": NAMESPACE, "name": job},
                       "reason": reason, "type": "Warning", "message": message,
                       "firstTimestamp": "2026-11-27T10:00:00Z", "lastTimestamp": "2026-11-27T10:00:00Z"})


@pytest.mark.django_db(transaction=True)
def test_the_sync_lists_and_watches_failed_create_events_of_our_jobs_only(standin, backend, kube, following):
    listed, watched = str(uuid.uuid4()), str(uuid.uuid4())
    create_job(kube, "wl-listed-1", our_labels(listed))
    failed_create(standin, "wl-listed-1", "Error creating: pods is forbidden: exceeded quota: gpus")
    create_job(kube, "etl", {"app": "etl"})
    failed_create(standin, "etl", "Error creating: not ours")
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    assert rows(backend)["wl-listed-1"].create_failure["message"].endswith("exceeded quota: gpus")
    assert rows(backend)["wl-listed-1"].create_failure["since"] == "2026-11-27T10:00:00Z"

    run = following()
    create_job(kube, "wl-watched-1", our_labels(watched))
    failed_create(standin, "wl-watched-1", "Error creating: no PriorityClass with name build was found")
    failed_create(standin, "wl-watched-1", "Successfully created pod", reason="SuccessfulCreate")
    row = until(lambda: (r := rows(backend).get("wl-watched-1")) and r.create_failure and r, "the watched event")
    stats = run.stop()

    assert row.create_failure["message"] == "Error creating: no PriorityClass with name build was found"
    assert stats.errors == [] and sorted(rows(backend)) == ["wl-listed-1", "wl-watched-1"]
    requests = standin.requests_to("/api/v1/events")
    assert {r.query.get("fieldSelector") for r in requests} == {"involvedObject.kind=Job,reason=FailedCreate"}
    assert any(r.watch for r in requests) and Backend.objects.get(pk=backend.pk).events_resource_version
