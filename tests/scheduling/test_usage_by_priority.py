"""Usage by priority (issue 24, point 1): the pods of our workloads count as guaranteed or borrowed by their
workload's priority, read from our labels by the sync, and admission, reclaim, the quota figures, the fair share,
the overview and the API split them the same way (`pools.quotas.fairshare.split_use`). The Jobs are written by
dispatch to the stand-in API server; the test plays the kubelet (a bound pod from the Job's template) and feeds
it to the sync as the pod watch would."""

import pytest

from pools.cluster.interface import WatchEvent
from pools.cluster.reflector import list_all
from pools.fleet.sync import BackendSync
from pools.models import Backend, Node, Pod, Pool
from pools.quotas.fairshare import Resource
from pools.quotas.figures import gpu_guarantees, quota_tables
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.conftest import body, project

pytestmark = pytest.mark.django_db


def admit_and_dispatch(api, kube, **fields) -> Workload:
    created = api.post("/api/workloads/", body(**fields), format="json")
    assert created.status_code == 201, created.json()
    run_cycle()
    workload = Workload.objects.get(pk=created.json()["id"])
    assert workload.status == Status.ADMITTED, workload.reasons
    assert dispatch(str(workload.pk), clusters=lambda backend: kube) == "created"
    workload.refresh_from_db()
    return workload


def run_pods(standin, kube, workload: Workload) -> None:
    """The kubelet's part: each replica's pod bound to its planned node and Running, as the Job's template made
    it (our labels included); then the sync's pod watch stores them."""
    job = standin.job(workload.job_name, namespace=workload.namespace)
    template = job["spec"]["template"]
    nodes = [node for node, n in sorted(workload.placement.items()) for _ in range(n)]
    for index, node in enumerate(nodes):
        labels = {**template["metadata"]["labels"], "batch.kubernetes.io/job-name": workload.job_name}
        standin.add_pod({"metadata": {"name": f"{workload.job_name}-{index}-abcde", "namespace": workload.namespace,
                                      "labels": labels},
                         "spec": {**template["spec"], "nodeName": node}, "status": {"phase": "Running"}})
    ours = [item for item in list_all(kube.list_pods).items
            if item["metadata"]["labels"].get("batch.kubernetes.io/job-name") == workload.job_name]
    BackendSync(Backend.objects.get(name="default"), kube).apply([], [WatchEvent("ADDED", item) for item in ours])
    # The world's nodes are rows without the Ready condition and GPU Operator pods a real node reports: the
    # sync's recount of the nodes these pods run on keeps their new GPU figures and would call them Unknown.
    Node.objects.filter(name__in=nodes).update(status="Ready", reasons=[])


def gpu_row(rows, project_name):
    return next(row["gpu"] for row in rows if row["project"] == project_name)


def test_eight_normal_and_eight_low_gpus_against_eight_deserved_are_eight_guaranteed_and_eight_borrowed(
        world, standin, kube, researcher_api, client, staff):
    project("vision", pools={"training": {"deserved": 8, "limit": -1}}, users=["researcher"],
            default_pools=["training"])
    project("nlp", pools={"training": {"deserved": 8}}, users=["researcher", "other"], default_pools=["training"])
    gpus8 = {"gpu": 8, "cpu": "4", "memory": "16Gi"}
    low = admit_and_dispatch(researcher_api, kube, name="low", priority="low", resources=gpus8)
    run_pods(standin, kube, low)
    assert set(Pod.objects.values_list("preemptible", flat=True)) == {True}
    # Its own low-priority pods are no reason to refuse vision's normal work within its deserved 8.
    normal = admit_and_dispatch(researcher_api, kube, name="normal", resources=gpus8)
    run_pods(standin, kube, normal)
    assert Pod.objects.filter(preemptible=False).count() == 1

    # The figures, the overview's sums and the API.
    (table,) = quota_tables([Pool.objects.get(name="training")])
    vision = next(row.figures[Resource.GPU] for row in table.rows if row.project == "vision")
    assert (vision["allocated"], vision["allocated_non_preemptible"], vision["over_quota"]) == (16, 8, 8)
    assert table.guaranteed_gpus() == (8, 8)
    assert gpu_guarantees(["training"]) == {"training": (8, 8)}
    rows = researcher_api.get("/api/quotas/?pool=training&project=vision").json()
    rows = rows["results"] if isinstance(rows, dict) else rows
    assert gpu_row(rows, "vision")["allocated"] == 16
    assert gpu_row(rows, "vision")["allocated_non_preemptible"] == 8
    assert gpu_row(rows, "vision")["over_quota"] == 8
    client.force_login(staff)
    page = client.get("/?cols=name,gpu_used,gpu_guaranteed,gpu_borrowed").content.decode()
    assert 'id="guarantee-note"' in page

    # Another project within its deserved quota reclaims: the low-priority work goes, the normal stays.
    claim = researcher_api.post("/api/workloads/", body(name="claim", project="nlp", resources=gpus8),
                                format="json").json()
    result = run_cycle()
    assert [item["name"] for item in result.preempted] == ["low"], Workload.objects.get(pk=claim["id"]).reasons
    assert Workload.objects.get(pk=claim["id"]).reasons[0]["code"] == "RECLAIMING"
    assert Workload.objects.get(pk=normal.pk).status != Status.PREEMPTING

