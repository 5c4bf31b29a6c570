"""Workloads on engine backends, against the stand-in API server through the real client: the cycle hands them to
the engine at once, dispatch writes the Job (and KAI's PodGroup) the engine expects, and the sync reads the
engine's reason back into the workload's reasons: a PodGroup condition or a Kueue Workload's QuotaReserved=False
written by the test plays KAI or Kueue."""

import threading
import time

import pytest
from django.db import connection

from pools.cluster.kinds import KAI_PODGROUP, KUEUE_WORKLOAD
from pools.fleet.sync import BackendSync
from pools.models import Backend, Pool, Project
from pools.schedulers import kai
from scheduling.models import Status, Workload
from scheduling.run import follow
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.conftest import body
from tests.support.commands import run
from tests.waiting import until

PREFIX = "runwhere.ai/"
KEYS = [{"key": "zone", "label": "topology.kubernetes.io/zone"}, {"key": "rack", "label": "example.com/rack"}]


def on_engine(scheduler: str) -> Backend:
    run("backend", "add", "default", "--simulated", "--scheduler", scheduler)  # its engine's objects go to the stand-in
    return Backend.objects.get(name="default")


def handed_over(api, kube, **fields) -> Workload:
    created = api.post("/api/workloads/", body(**fields), format="json")
    assert created.status_code == 201, created.json()
    result = run_cycle()
    assert [a["id"] for a in result.admitted] == [created.json()["id"]]
    assert dispatch(created.json()["id"], clusters=lambda backend: kube) == "created"
    return Workload.objects.select_related("pool__backend").get(pk=created.json()["id"])


def synced(backend: Backend, kube) -> None:
    """The sync's full list (nodes, pods, Jobs and the engine's objects), then the follower."""
    BackendSync(Backend.objects.get(pk=backend.pk), kube).run(seconds=0)
    follow.observe()


def kai_condition(reason: str, message: str, **queue) -> dict:
    return {"status": {"schedulingConditions": [{
        "type": "UnschedulableOnNodePool", "nodePool": "default", "reason": reason, "message": message,
        "transitionID": "1", "lastTransitionTime": "2026-11-25T10:00:00Z",
        "reasons": [{"reason": reason, "message": message, "details": {"queueDetails": {
            "name": queue.get("name", ""), "queueDeservedResources": {"gpu": queue.get("deserved", 0)},
            "queueAllocatedResources": {"gpu": queue.get("allocated", 0)},
            "queueResourceLimits": {"gpu": queue.get("limit", -1)},
            "podGroupRequestedResources": {"gpu": queue.get("requested", 0)}}}}]}]}}


@pytest.mark.django_db
def test_a_kai_workload_goes_to_kai_at_once_with_its_queue_priority_class_gang_and_topology(standin, kube,
                                                                                            researcher_api):
    on_engine(Backend.Scheduler.KAI)
    # By hand: the configuration refuses topology keys whose labels none of the pool's nodes carries, and the world's
    # nodes are add_nodes' rows without them.
    Pool.objects.filter(name="training").update(topology_keys=KEYS)
    workload = handed_over(researcher_api, kube, pools=["training"], replicas=4, resources={"gpu": 1},
                           topology=[{"key": "zone", "requirementType": "required"},
                                     {"key": "rack", "requirementType": "preferred"}])
    assert workload.status == Status.SCHEDULING
    assert list(workload.events.values_list("status", flat=True)) == ["PENDING", "ADMITTED", "SCHEDULING"]
    assert "Handed to KAI Scheduler in pool training" in workload.events.get(status=Status.ADMITTED).message
    queue = kai.queue_name("training", "research", "vision")
    job = standin.job(workload.job_name, namespace=workload.namespace)
    pod = job["spec"]["template"]
    assert pod["spec"]["schedulerName"] == "kai-scheduler"
    assert pod["spec"]["priorityClassName"] == "build"  # normal: KAI's non-preemptible class
    assert job["metadata"]["labels"]["kai.scheduler/queue"] == queue == pod["metadata"]["labels"]["kai.scheduler/queue"]
    assert pod["metadata"]["annotations"] == {
        "pod-group-name": workload.job_name, "kai.scheduler/skip-podgrouper": "true",
        "kai.scheduler/topology": "training",
        "kai.scheduler/topology-required-placement": "topology.kubernetes.io/zone",
        "kai.scheduler/topology-preferred-placement": "example.com/rack"}
    group = standin.object(KAI_PODGROUP, workload.job_name, namespace=workload.namespace)
    assert group["spec"] == {"minMember": 4, "queue": queue, "preemptibility": "non-preemptible",
                             "priorityClassName": "build",
                             "topologyConstraint": {"topology": "training",
                                                    "requiredTopologyLevel": "topology.kubernetes.io/zone",
                                                    "preferredTopologyLevel": "example.com/rack"}}
    assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]  # goes with its Job
    assert group["metadata"]["labels"][f"{PREFIX}workload"] == str(workload.pk)


@pytest.mark.django_db
def test_low_priority_is_preemptible_in_kai_and_a_second_dispatch_finds_job_and_podgroup(standin, kube,
                                                                                         researcher_api):
    on_engine(Backend.Scheduler.KAI)
    workload = handed_over(researcher_api, kube, pools=["training"], priority="low")
    group = standin.object(KAI_PODGROUP, workload.job_name, namespace=workload.namespace)
    assert (group["spec"]["preemptibility"], group["spec"]["priorityClassName"]) == ("preemptible", "train")
    assert "topologyConstraint" not in group["spec"]
    Workload.objects.filter(pk=workload.pk).update(status=Status.ADMITTED)  # as if the row's commit was lost
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "found"
    assert len(standin.objects(KAI_PODGROUP)) == 1


@pytest.mark.django_db
def test_a_podgroup_that_is_not_ours_fails_the_workload_and_takes_its_job_back(standin, kube, researcher_api):
    on_engine(Backend.Scheduler.KAI)
    created = researcher_api.post("/api/workloads/", body(pools=["training"]), format="json").json()
    run_cycle()
    name = f"wl-{created['id'].replace('-', '')[:12]}-1"
    namespace = Project.objects.get(name="vision").namespace
    standin.add_object(KAI_PODGROUP, {"metadata": {"name": name, "namespace": namespace}, "spec": {"minMember": 1}})
    assert dispatch(created["id"], clusters=lambda backend: kube) == "failed"
    workload = Workload.objects.get(pk=created["id"])
    assert workload.status == Status.FAILED_BACKEND_ERROR and "PodGroup" in workload.events.last().message
    assert standin.jobs() == []


@pytest.mark.django_db
def test_kais_reason_on_the_podgroup_becomes_the_workloads_reason_and_goes_when_kai_places_it(standin, kube,
                                                                                              researcher_api, world,
                                                                                              client):
    backend = on_engine(Backend.Scheduler.KAI)
    workload = handed_over(researcher_api, kube, pools=["training"], resources={"gpu": 4}, replicas=2, priority="low")
    queue = kai.queue_name("training", "research", "vision")
    message = f"Workload requested 8 GPUs, but {queue} is allocated 8 GPUs of its 12 GPU limit"
    standin.modify_object(KAI_PODGROUP, workload.job_name, kai_condition(
        "OverLimit", message, name=queue, deserved=4, allocated=8, limit=12, requested=8),
        namespace=workload.namespace)
    synced(backend, kube)
    workload.refresh_from_db()
    assert workload.status == Status.SCHEDULING
    (reason,) = workload.reasons
    assert reason["code"] == "ENGINE" and reason["pool"] == "training"
    assert reason["message"] == f"KAI Scheduler holds it back (OverLimit): {message}"
    assert reason["details"]["reason"] == "OverLimit" and reason["details"]["queue"] == queue
    assert reason["details"]["queueResourceLimits"] == {"gpu": 12}
    shown = researcher_api.get(f"/api/workloads/{workload.pk}/").json()
    assert shown["reasons"][0]["message"] == reason["message"]  # the API shows KAI's words
    client.force_login(world["researcher"])
    page = client.get(f"/workloads/{workload.pk}/")
    assert page.status_code == 200 and "OverLimit" in page.content.decode()
    text = " ".join(page.content.decode().split())
    assert f"Queue {queue}, GPUs: deserved 4, allocated 8, limit 12, this workload asks for 8" in text  # KAI's

    standin.modify_object(KAI_PODGROUP, workload.job_name, {"status": {"schedulingConditions": []}},
                          namespace=workload.namespace)
    synced(backend, kube)
    workload.refresh_from_db()
    assert workload.reasons == []


@pytest.mark.django_db
def test_a_kueue_job_is_suspended_in_its_local_queue_and_quota_reserved_false_becomes_the_reason(standin, kube,
                                                                                                  researcher_api):
    from pools.schedulers import kueue

    backend = on_engine(Backend.Scheduler.KUEUE)
    workload = handed_over(researcher_api, kube, pools=["training"])
    job = standin.job(workload.job_name, namespace=workload.namespace)
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == kueue.local_queue_name("vision")
    assert "schedulerName" not in job["spec"]["template"]["spec"]
    message = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
               "training.h100, 1 more needed")
    standin.add_object(KUEUE_WORKLOAD, {
        "metadata": {"name": f"job-{workload.job_name}-1a2b3", "namespace": workload.namespace,
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": workload.job_name,
                                          "uid": job["metadata"]["uid"]}]},
        "spec": {"queueName": kueue.local_queue_name("vision")},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "WaitingForQuota",
                                   "message": message, "lastTransitionTime": "2026-11-25T10:00:00Z"}]}})
    standin.add_object(KUEUE_WORKLOAD, {  # somebody else's Workload: never read into ours
        "metadata": {"name": "job-theirs-9z", "namespace": workload.namespace,
                     "ownerReferences": [{"kind": "Job", "name": "theirs", "uid": "x"}]},
        "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "ExceedsMaxQuota",
                                   "message": "", "lastTransitionTime": "2026-11-25T10:00:00Z"}]}})
    synced(backend, kube)
    workload.refresh_from_db()
    (reason,) = workload.reasons
    assert reason["code"] == "ENGINE" and reason["details"]["reason"] == "WaitingForQuota"
    assert reason["message"] == f"Kueue holds it back (WaitingForQuota): {message}"


@pytest.mark.django_db(transaction=True)
def test_the_sync_watch_carries_a_new_kai_reason_to_the_workload(standin, kube, researcher_api):
    backend = on_engine(Backend.Scheduler.KAI)
    workload = handed_over(researcher_api, kube, pools=["training"])
    BackendSync(Backend.objects.get(pk=backend.pk), kube).run(seconds=0)
    offset = [0.0]
    sync = BackendSync(Backend.objects.get(pk=backend.pk), kube, clock=lambda: time.monotonic() + offset[0])
    errors = []

    def run():
        try:
            sync.run(seconds=3600)
        except BaseException as exc:  # handed to the test
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    standin.wait_for_watches(5, timeout=60)  # nodes, pods, jobs, FailedCreate events and PodGroups
    standin.modify_object(KAI_PODGROUP, workload.job_name, kai_condition(
        "QueueDoesNotExist", "Queue training.research.vision does not exist"), namespace=workload.namespace)
    until(lambda: Workload.objects.get(pk=workload.pk).reasons, "the KAI reason to reach the workload", every=0.05)
    offset[0] = 10 ** 7

    def ended() -> bool:
        standin.end_watches()  # again and again: a stream may open between two calls
        thread.join(0.2)
        return not thread.is_alive()

    until(ended, "the sync to end", every=0)
    assert not errors, errors
    reasons = Workload.objects.get(pk=workload.pk).reasons
    assert [r["details"].get("reason") for r in reasons] == ["QueueDoesNotExist"]


def test_with_the_engines_reason_the_pods_waiting_for_its_scheduler_add_nothing():
    from datetime import datetime, timedelta

    from scheduling.decisions import lifecycle

    current = lifecycle.Current("SCHEDULING", 2, 1, {}, 3, timedelta(minutes=5))
    waiting = {"phase": "Pending", "unschedulable": "Waiting for kai-scheduler to place PodGroup ns/wl-1"}
    pulling = {"phase": "Pending", "waiting": "ErrImagePull", "waiting_message": "no such image"}
    engine = {"engine": "kai", "code": "OverLimit", "message": "Limit is 8 GPUs"}
    outcome = lifecycle.observe(current, lifecycle.Run({}, {"p-0": waiting, "p-1": pulling}, engine=engine),
                                datetime(2026, 11, 25))
    assert outcome.waiting == ["KAI Scheduler holds it back (OverLimit): Limit is 8 GPUs",
                               "Pod p-1 waits: ErrImagePull: no such image"]
    placed = lifecycle.observe(current, lifecycle.Run({}, {"p-0": {"phase": "Pending"}}), datetime(2026, 11, 25))
    assert placed.status == "SCHEDULING" and placed.waiting == []  # clears what was shown
