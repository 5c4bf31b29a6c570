"""A dispatched workload followed to its end, against the stand-in API server through the real client: the test
plays the kubelet and the Job controller (pods and Job status in the stand-in), the sync's list stores what they
say (`managed_jobs.reconcile`, as the sync's full list does) and `follow.observe` moves the workload; stops go
through the sweep, which deletes the Job with Background propagation."""

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.cluster.reflector import list_all
from pools.fleet import managed_jobs
from scheduling.models import Status, Workload
from scheduling.run import snapshot, sweeps
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.conftest import body
from tests.support.commands import configure
from tests.support.lifecycle import admit_and_dispatch, job_status, observe, pod

pytestmark = pytest.mark.django_db


def statuses(workload: Workload) -> list[str]:
    return list(workload.events.values_list("status", flat=True))


def test_a_gang_goes_scheduling_running_completed(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube, replicas=2)
    pod(standin, workload, 0, "Running")
    pod(standin, workload, 1, "Pending", node=None)
    workload = observe(kube, workload)
    assert workload.status == Status.SCHEDULING
    (reason,) = workload.reasons
    assert reason["code"] == "UNSCHEDULABLE" and "Insufficient nvidia.com/gpu" in reason["message"]
    detail = researcher_api.get(f"/api/workloads/{workload.pk}/").json()
    assert detail["reason"]["code"] == "UNSCHEDULABLE"
    assert [(p["node"], p["phase"]) for p in detail["job"]["pods"]] == [("training-h100-000", "Running"),
                                                                        (None, "Pending")]

    pod(standin, workload, 1, "Running", node="training-h100-001")
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING and workload.started_at and workload.reasons == []

    pod(standin, workload, 0, "Succeeded", exit_code=0)
    pod(standin, workload, 1, "Succeeded", exit_code=0, node="training-h100-001")
    job_status(standin, workload, "Complete", "CompletionsReached")
    workload = observe(kube, workload)
    assert workload.status == Status.COMPLETED and workload.exit_code == 0 and workload.finished_at
    assert statuses(workload) == ["PENDING", "ADMITTED", "SCHEDULING", "RUNNING", "COMPLETED"]
    assert standin.job_deletions == []  # a finished Job is left to its TTL


def test_a_failed_pod_fails_the_workload_with_its_exit_code(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube)
    pod(standin, workload, 0, "Failed", exit_code=3)
    job_status(standin, workload, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    workload = observe(kube, workload)
    assert (workload.status, workload.exit_code) == (Status.FAILED, 3)
    assert "Exit code 3: failed" in workload.events.last().message
    assert workload.attempts[0]["exit_code"] == 3 and workload.attempts[0]["status"] == "FAILED"


def test_a_reschedule_exit_code_starts_a_new_attempt_until_the_retries_are_spent(standin, kube, researcher_api,
                                                                                settings):
    settings.OSMO_MAX_RETRIES = 1
    workload = admit_and_dispatch(researcher_api, kube, exit_actions={"RESCHEDULE": "137,143"})
    first_job = workload.job_name
    pod(standin, workload, 0, "Failed", exit_code=137)
    job_status(standin, workload, "Failed", "BackoffLimitExceeded")
    workload = observe(kube, workload)
    assert (workload.status, workload.attempt, workload.job_name, workload.pool) == (Status.PENDING, 2, "", None)
    assert statuses(workload)[-2:] == ["FAILED", "PENDING"]

    run_cycle()
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    assert workload.job_name == first_job[:-1] + "2"  # a new Job name per attempt
    pod(standin, workload, 0, "Failed", exit_code=137)
    job_status(standin, workload, "Failed", "BackoffLimitExceeded")
    workload = observe(kube, workload)
    assert (workload.status, workload.exit_code) == (Status.FAILED, 137)
    assert "retries are spent" in workload.events.last().message
    assert [a["job"] for a in workload.attempts] == [first_job, workload.job_name]


def test_an_image_that_cannot_be_pulled_fails_after_the_limit_and_the_job_is_deleted(standin, kube, researcher_api,
                                                                                     settings):
    settings.OSMO_IMAGE_PULL_TIMEOUT = 300
    workload = admit_and_dispatch(researcher_api, kube)
    pod(standin, workload, 0, "Pending", waiting="ImagePullBackOff")
    now = timezone.now()
    workload = observe(kube, workload, now=now)
    assert workload.status == Status.SCHEDULING and workload.reasons[0]["code"] == "WAITING"
    workload = observe(kube, workload, now=now + timedelta(minutes=4))
    assert workload.status == Status.SCHEDULING and not workload.stop_status
    workload = observe(kube, workload, now=now + timedelta(minutes=6))
    assert workload.stop_status == Status.FAILED_IMAGE_PULL  # the Job goes first
    sweeps.sweep(act=True, clusters=lambda backend: kube)
    workload.refresh_from_db()
    assert workload.status == Status.FAILED_IMAGE_PULL
    (deletion,) = standin.job_deletions
    assert (deletion.name, deletion.propagation_policy) == (workload.job_name, "Background")


def test_an_evicted_pod_fails_the_workload_evicted(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube, replicas=2)
    pod(standin, workload, 0, "Running")
    pod(standin, workload, 1, "Failed", reason="Evicted", node="training-h100-001")
    workload = observe(kube, workload)
    assert workload.stop_status == Status.FAILED_EVICTED
    sweeps.sweep(act=True, clusters=lambda backend: kube)
    workload.refresh_from_db()
    assert workload.status == Status.FAILED_EVICTED and "evicted from node training-h100-001" in \
        workload.events.last().message


def test_cancel_of_dispatched_work_deletes_its_job_then_ends_canceled(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube)
    answer = researcher_api.post(f"/api/workloads/{workload.pk}/cancel/", {}, format="json")
    assert answer.status_code == 200, answer.content
    workload.refresh_from_db()
    assert workload.status == Status.SCHEDULING and workload.stop_status == Status.FAILED_CANCELED
    assert researcher_api.get(f"/api/workloads/{workload.pk}/").json()["stopping"] == "FAILED_CANCELED"
    sweeps.sweep(act=True, clusters=lambda backend: kube)
    workload.refresh_from_db()
    assert workload.status == Status.FAILED_CANCELED
    assert [(d.name, d.propagation_policy) for d in standin.job_deletions] == [(workload.job_name, "Background")]
    assert standin.jobs() == []


def test_a_job_deleted_by_someone_else_fails_the_workload(standin, kube, researcher_api):
    workload = observe(kube, admit_and_dispatch(researcher_api, kube))
    kube.delete_job(workload.namespace, workload.job_name)
    workload = observe(kube, workload)
    assert workload.status == Status.FAILED_BACKEND_ERROR and "deleted from the cluster" in \
        workload.events.last().message
    from pools.models import ManagedJob

    sweeps.sweep(timezone.now() + timedelta(hours=23), act=True, clusters=lambda backend: kube)
    assert ManagedJob.objects.filter(gone=True).count() == 1
    sweeps.sweep(timezone.now() + timedelta(hours=25), act=True, clusters=lambda backend: kube)
    assert not ManagedJob.objects.exists()  # forgotten a day after the Job went


def test_maintenance_holds_new_admissions_and_timeouts_fire_by_the_timeout_read_when_they_fire(
        standin, kube, researcher_api):
    running = admit_and_dispatch(researcher_api, kube, exec_timeout="1h")
    pod(standin, running, 0, "Running")
    running = observe(kube, running)
    waiting = Workload.objects.get(pk=researcher_api.post("/api/workloads/", body(name="next"),
                                                          format="json").json()["id"])
    configure("POOL", "training", enable_maintenance=True)  # after the submission, which it refuses
    run_cycle()
    waiting.refresh_from_db()
    assert waiting.status == Status.PENDING and waiting.reasons[0]["code"] == "MAINTENANCE"
    # The pool's default queue timeout is set after the submission: it applies when the sweep fires.
    configure("POOL", "training", default_queue_timeout="30m")
    now = timezone.now()
    sweeps.sweep(now + timedelta(minutes=20), act=True, clusters=lambda backend: kube)
    assert Workload.objects.get(pk=waiting.pk).status == Status.PENDING
    sweeps.sweep(now + timedelta(minutes=31), act=True, clusters=lambda backend: kube)
    assert Workload.objects.get(pk=waiting.pk).status == Status.FAILED_QUEUE_TIMEOUT
    assert Workload.objects.get(pk=running.pk).status == Status.RUNNING
    sweeps.sweep(now + timedelta(minutes=61), act=True, clusters=lambda backend: kube)
    running.refresh_from_db()
    assert running.status == Status.FAILED_EXEC_TIMEOUT and "exec timeout (1h)" in running.events.last().message
    assert [d.name for d in standin.job_deletions] == [running.job_name]


def test_admission_counts_the_reservation_until_pods_are_bound_then_the_pods_never_both(standin, kube,
                                                                                     researcher_api):
    from pools.models import Pod

    workload = admit_and_dispatch(researcher_api, kube, replicas=2, resources={"gpu": 2, "cpu": "4",
                                                                             "memory": "16Gi"})
    (node, n), = workload.placement.items()
    assert n == 2

    def figures():
        loaded = snapshot.load()
        state = loaded.snapshot.pools["training"]
        free = {x.name: x.free[0] // 100 for nodes in state.platforms.values() for x in nodes}
        return free[node], state.projects["vision"].used[0] // 100

    assert figures() == (8 - 2 * 2, 4)  # reserved: two replicas of 2 GPUs
    pod(standin, workload, 0, "Running", node=node)
    observe(kube, workload)
    # The sync also counts the bound pod on its node and for its project (as it does any pod).
    from pools.models import Node

    Node.objects.filter(name=node).update(gpu_free=8 - 2)
    Pod.objects.create(backend=workload.pool.backend, uid="p0", namespace=workload.namespace, name="p0",
                       node_name=node, phase="Running", gpu=2, pool="training")
    assert figures() == (8 - 2 * 2, 4)  # one replica counted by its pod, the other still reserved



def test_reclaim_deletes_the_borrowers_job_and_reschedules_it(standin, kube, researcher_api):
    borrower = admit_and_dispatch(researcher_api, kube, name="borrow", project="nlp", priority="low", replicas=2,
                                  resources={"gpu": 8, "cpu": "4", "memory": "16Gi"})
    claim = researcher_api.post("/api/workloads/", body(name="claim", resources={"gpu": 4}), format="json").json()
    run_cycle()
    borrower.refresh_from_db()
    assert borrower.status == Status.PREEMPTING
    sweeps.sweep(act=True, clusters=lambda backend: kube)
    borrower.refresh_from_db()
    assert [(d.name, d.propagation_policy) for d in standin.job_deletions] == [(f"wl-{borrower.id.hex[:12]}-1",
                                                                               "Background")]
    assert (borrower.status, borrower.attempt) == (Status.PENDING, 2)
    assert statuses(borrower)[-3:] == ["PREEMPTING", "FAILED_PREEMPTED", "PENDING"]
    assert borrower.attempts[0]["status"] == "FAILED_PREEMPTED"
    run_cycle()
    assert Workload.objects.get(pk=claim["id"]).status == Status.ADMITTED


def test_a_server_error_then_a_conflict_on_create_gives_one_job(standin, kube, researcher_api):
    """The API server created the Job but answered 500 (a proxy timed out, say); the retry gets 409 and reads
    the Job back: one Job, and the workload is SCHEDULING."""
    from pools.cluster.retries import Retries
    from scheduling.run.dispatch import attempt_of
    from scheduling.specs.jobs import job_manifest

    created = researcher_api.post("/api/workloads/", body(), format="json").json()
    run_cycle()
    workload = Workload.objects.select_related("pool", "project").get(pk=created["id"])
    standin.fail_next(1, status=500, path_prefix="/apis/batch/v1", method="POST")

    def meanwhile(seconds):  # what the 500 hid
        kube.create_job(workload.project.namespace, job_manifest(attempt_of(workload), prefix="runwhere.ai/",
                                                                 ttl_seconds=60))

    assert dispatch(workload.pk, clusters=lambda backend: kube, retries=Retries(sleep=meanwhile)) == "found"
    assert len(standin.jobs()) == 1
    workload = Workload.objects.get(pk=workload.pk)
    assert workload.status == Status.SCHEDULING
    assert "Retried 1 time after: HTTP 500" in workload.events.last().message


def test_the_workload_page_shows_its_job_pods_and_earlier_attempts(standin, kube, researcher_api, client, world):
    workload = admit_and_dispatch(researcher_api, kube, exit_actions={"RESCHEDULE": "137"})
    first_job = workload.job_name
    pod(standin, workload, 0, "Failed", exit_code=137)
    job_status(standin, workload, "Failed", "BackoffLimitExceeded")
    workload = observe(kube, workload)
    run_cycle()
    dispatch(workload.pk, clusters=lambda backend: kube)
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    pod(standin, workload, 0, "Running", node="training-h100-001")
    observe(kube, workload)

    client.force_login(world["researcher"])
    page = client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "Job, attempt 2" in page and f"{workload.namespace}/{workload.job_name}" in page
    assert (f"{workload.job_name}-0-abcde</td><td><a href=\"/nodes/training-h100-001/\">training-h100-001</a></td>"
            "<td>—</td><td>Running") in page
    assert "Earlier attempts" in page and f"<td>{first_job}</td>" in page and '<td class="num">137</td>' in page
    fragment = client.get(f"/workloads/{workload.pk}/", HTTP_HX_REQUEST="true",
                          HTTP_HX_TARGET="workload-live").content.decode()
    assert "workload-pods" in fragment and "workload-attempts" in fragment


def test_the_syncs_commit_moves_the_workload_through_its_signal(standin, kube, researcher_api,
                                                               django_capture_on_commit_callbacks):
    """No sweep: the sync's write names the workload on commit and the follower (connected in
    SchedulingConfig.ready) moves it in the sync's own process."""
    from django.db import transaction

    workload = admit_and_dispatch(researcher_api, kube)
    pod(standin, workload, 0, "Running")
    jobs = list_all(lambda **kw: kube.list_jobs(managed_jobs.selector(), **kw)).items
    with django_capture_on_commit_callbacks(execute=True) as callbacks, transaction.atomic():
        moved = managed_jobs.reconcile(workload.pool.backend, jobs, list_all(kube.list_pods).items)
    assert moved == {str(workload.pk)} and len(callbacks) == 1
    assert Workload.objects.get(pk=workload.pk).status == Status.RUNNING
