"""Playing the kubelet and the Job controller for a dispatched workload, on the stand-in API server through the real
client: admit and dispatch, write a replica's pod or the Job's status as they would, then the sync's list
(`managed_jobs.reconcile`, as its full list does) and `follow.observe`, which moves the workload."""

from pools.cluster.reflector import list_all
from pools.fleet import managed_jobs
from scheduling.models import Workload
from scheduling.run import follow
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.conftest import body


def admit_and_dispatch(api, kube, **fields) -> Workload:
    created = api.post("/api/workloads/", body(**fields), format="json").json()
    run_cycle()
    assert dispatch(created["id"], clusters=lambda backend: kube) == "created"
    return Workload.objects.select_related("pool").get(pk=created["id"])


def pod(standin, workload: Workload, index: int, phase: str, *, node: str | None = "training-h100-000",
        exit_code: int | None = None, waiting: str = "", reason: str = "", conditions=()) -> dict:
    """What the kubelet would write for replica `index` of the workload's Job."""
    job = standin.job(workload.job_name, namespace=workload.namespace)
    labels = {**job["spec"]["template"]["metadata"]["labels"], "batch.kubernetes.io/job-name": workload.job_name}
    state = {"running": {"startedAt": "2026-11-25T10:00:00Z"}}
    if exit_code is not None:
        state = {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}}
    elif waiting:
        state = {"waiting": {"reason": waiting, "message": f"{waiting}: back-off pulling image"}}
    status = {"phase": phase, "reason": reason, "conditions": list(conditions),
              "containerStatuses": [{"name": "train", "state": state}]}
    if node is None:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]
    name = f"{workload.job_name}-{index}-abcde"
    obj = {"metadata": {"name": name, "namespace": workload.namespace, "labels": labels,
                        "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
           "spec": {"nodeName": node} if node else {}, "status": status}
    put_pod(standin, obj)
    return obj


def put_pod(standin, obj: dict) -> None:
    """Add the pod to the stand-in, or replace it there: what the kubelet writes, created or updated."""
    name, namespace = obj["metadata"]["name"], obj["metadata"]["namespace"]
    try:
        standin.pod(name, namespace=namespace)
    except KeyError:
        standin.add_pod(obj)
    else:
        standin.modify_pod(name, lambda old: obj, namespace=namespace)


def job_status(standin, workload: Workload, condition: str, reason: str, message: str = "") -> None:
    def change(job):
        job["status"] = {"conditions": [{"type": condition, "status": "True", "reason": reason,
                                         "message": message}]}
        return job
    standin.modify_job(workload.job_name, change, namespace=workload.namespace)


def observe(kube, workload: Workload, now=None) -> Workload:
    """The sync's list of Jobs and pods, then the follower."""
    backend = workload.pool.backend
    jobs = list_all(lambda **kw: kube.list_jobs(managed_jobs.selector(), **kw)).items
    managed_jobs.reconcile(backend, jobs, list_all(kube.list_pods).items)
    follow.observe(now=now)
    return Workload.objects.select_related("pool").get(pk=workload.pk)
