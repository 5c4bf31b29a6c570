"""Placement holds (docs/architecture/decisions.md): on a default-scheduler backend a gang's pods are required to
go to the nodes admission planned; a planned node lost before the pods are bound, or a pod the kube-scheduler cannot
place for OSMO_PLACEMENT_GRACE, ends the attempt and the workload is admitted again; everything that says where work
runs reads the pods. The stand-in is a plain API server (no scheduler): the tests bind the pods, as the
kube-scheduler and the kubelet would, and the sync's list stores them (test_lifecycle's `observe`)."""

import copy
import json
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from pools.models import Node
from scheduling.models import Status, Workload
from scheduling.run import sweeps
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from scheduling.specs.jobs import Attempt, Engine, job_manifest
from tests.kube_affinity import nodes_for
from tests.kube_objects import make_node
from tests.scheduling.test_lifecycle import admit_and_dispatch, observe, pod
from tests.support.commands import run

PREFIX = "runwhere.ai/"
NODES = ("training-h100-000", "training-h100-001")
ZONES = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]},
    {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["b"]}],
     "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["h100-9"]}]}]},
    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}}]}
TEMPLATE = {"spec": {"containers": [{"name": "user", "image": "busybox", "resources": {
    "limits": {"nvidia.com/gpu": 1}}}], "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "affinity": {"nodeAffinity": ZONES, "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}}}


def pin(node: str) -> dict:
    return {"key": "metadata.name", "operator": "In", "values": [node]}

def attempt(**fields) -> Attempt:
    values = {"workload_id": "6a66cab3-5edd-4b38-aaad-ae34d3b034a3", "attempt": 1, "project": "vision",
              "namespace": "vision", "pool": "training", "platform": "h100", "priority": "normal", "replicas": 2,
              "pod_template": TEMPLATE, "nodes": ("h100-3", "h100-2")}
    return Attempt(**{**values, **fields})


def pod_spec(job: dict) -> dict:
    return job["spec"]["template"]["spec"]


def test_the_pods_are_required_on_the_planned_nodes_one_term_per_node_and_term_of_the_templates_affinity():
    """A node field selector takes one value (kube-apiserver refused `metadata.name In [a, b]`, issue 39): each
    planned node ANDed into each of the template's terms, the terms ORed."""
    before = copy.deepcopy(TEMPLATE)
    spec = pod_spec(job_manifest(attempt(), prefix=PREFIX, ttl_seconds=60))
    affinity = spec["affinity"]["nodeAffinity"]
    zone_a = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
    zone_b = {**zone_a, "values": ["b"]}
    not_9 = {"key": "metadata.name", "operator": "NotIn", "values": ["h100-9"]}
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchExpressions": [zone_a], "matchFields": [pin("h100-2")]},
        {"matchExpressions": [zone_b], "matchFields": [not_9, pin("h100-2")]},
        {"matchExpressions": [zone_a], "matchFields": [pin("h100-3")]},
        {"matchExpressions": [zone_b], "matchFields": [not_9, pin("h100-3")]}]
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == \
        ZONES["preferredDuringSchedulingIgnoredDuringExecution"]
    assert spec["affinity"]["podAntiAffinity"] == TEMPLATE["spec"]["affinity"]["podAntiAffinity"]
    assert spec["nodeSelector"] == TEMPLATE["spec"]["nodeSelector"]
    assert before == TEMPLATE  # the stored template is not changed


def test_a_template_without_affinity_gets_one_term_per_planned_node_and_engines_and_no_plan_get_none():
    plain = {"spec": {"containers": [{"name": "user", "image": "busybox"}]}}
    spec = pod_spec(job_manifest(attempt(pod_template=plain), prefix=PREFIX, ttl_seconds=60))
    assert spec["affinity"] == {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [pin("h100-2")]}, {"matchFields": [pin("h100-3")]}]}}}
    for other in (attempt(pod_template=plain, nodes=()),
                  attempt(pod_template=plain, engine=Engine("kai", "root-research-vision")),
                  attempt(pod_template=plain, engine=Engine("kueue", "vision"))):
        assert "affinity" not in pod_spec(job_manifest(other, prefix=PREFIX, ttl_seconds=60))


def test_the_dispatched_job_requires_the_nodes_admission_planned(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube, replicas=2)
    assert sum(workload.placement.values()) == 2 and set(workload.placement) <= set(NODES)
    job = standin.job(workload.job_name, namespace=workload.namespace)
    assert pod_spec(job)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [pin(node)]} for node in sorted(workload.placement)]}


def test_a_gang_of_two_8_gpu_replicas_on_two_8_gpu_nodes_is_accepted_and_its_pods_go_only_to_the_plan(
        standin, kube, researcher_api):
    """Issue 39: kube-apiserver refused the pin of a gang over several nodes (422, one field selector with every
    planned node), so such a gang could never run on a default-scheduler backend. The stand-in now refuses it as
    the real server does; the Job is accepted, and the scheduler's node affinity lets each pod go to a planned node
    only (tests/kube_affinity.py), not to a third node with the same labels outside the plan."""
    standin.add_nodes(make_node(name) for name in (*NODES, "training-h100-002"))
    workload = admit_and_dispatch(researcher_api, kube, project="nlp", priority="low", replicas=2,
                                  resources={"gpu": 8, "cpu": "4", "memory": "16Gi"})
    assert workload.placement == {NODES[0]: 1, NODES[1]: 1}
    job = standin.job(workload.job_name, namespace=workload.namespace)
    assert job["spec"]["parallelism"] == 2
    assert nodes_for(pod_spec(job), [standin.node(name) for name in standin.node_names()]) == list(NODES)
    for index, node in enumerate(NODES):  # bound as the kube-scheduler would, the kubelet running them
        pod(standin, workload, index, "Running", node=node)
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING
    detail = researcher_api.get(f"/api/workloads/{workload.pk}/").json()
    assert sorted(p["node"] for p in detail["job"]["pods"]) == list(NODES)
    assert detail["placement"] == detail["planned_nodes"] == {NODES[0]: 1, NODES[1]: 1}


def lose(node: str, how: str) -> None:
    """What the sync writes when the API server no longer lists the node, or says it is cordoned or not Ready."""
    rows = Node.objects.filter(name=node)  # by hand: the world's nodes are add_nodes' rows, with no cluster behind
    if how == "deleted":
        rows.delete()
    elif how == "cordoned":
        rows.update(unschedulable=True)
    else:
        rows.update(status="Not ready (Disk pressure)")


def readmit(kube, workload: Workload) -> Workload:
    sweeps.sweep(act=True, clusters=lambda backend: kube)  # deletes the Job, then ends the attempt
    workload.refresh_from_db()
    assert (workload.status, workload.attempt, workload.job_name, workload.placement) == (Status.PENDING, 2, "", {})
    run_cycle()
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    return Workload.objects.select_related("pool").get(pk=workload.pk)


@pytest.mark.parametrize("how, why", [("deleted", "deleted"), ("cordoned", "cordoned"),
                                      ("not ready", "Not ready (Disk pressure)")])
def test_a_planned_node_lost_before_binding_ends_the_attempt_and_it_is_admitted_again_elsewhere(
        standin, kube, researcher_api, how, why):
    workload = observe(kube, admit_and_dispatch(researcher_api, kube))
    ((planned, _),) = workload.placement.items()
    first_job = workload.job_name
    lose(planned, how)
    workload = observe(kube, workload)
    assert workload.stop_status == "RESCHEDULE" and workload.stop_reason == "PLACEMENT_LOST"
    workload = readmit(kube, workload)
    assert [d.name for d in standin.job_deletions] == [first_job]
    ended = workload.events.get(reason="PLACEMENT_LOST")
    assert f"Planned node {planned} ({why}) lost before every pod was bound" in ended.message
    assert workload.attempts[0]["job"] == first_job and "lost before every pod" in workload.attempts[0]["message"]
    (elsewhere,) = [node for node in NODES if node != planned]
    assert workload.placement == {elsewhere: 1} and workload.job_name.endswith("-2")
    terms = pod_spec(standin.job(workload.job_name, namespace=workload.namespace))["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [pin(elsewhere)]}]
    assert list(workload.events.values_list("reason", flat=True)) == [
        "SUBMITTED", "ADMITTED", "DISPATCHED", "STOPPING", "PLACEMENT_LOST", "RESCHEDULED", "ADMITTED", "DISPATCHED"]


def test_a_node_lost_once_every_pod_is_bound_or_outside_the_plan_changes_nothing(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube)
    ((planned, _),) = workload.placement.items()
    (other,) = [node for node in NODES if node != planned]
    lose(other, "cordoned")  # not in the plan
    workload = observe(kube, workload)
    assert workload.status == Status.SCHEDULING and not workload.stop_status
    pod(standin, workload, 0, "Running", node=planned)
    lose(planned, "cordoned")  # bound already: the pod runs on; losing the node now is an eviction's business
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING and not workload.stop_status


def unschedulable(standin, workload: Workload, index: int, since: datetime) -> None:
    """What the kube-scheduler writes when no node of the pod's affinity has room."""
    name = pod(standin, workload, index, "Pending", node=None)["metadata"]["name"]

    def stamp(obj):
        obj["status"]["conditions"][0]["lastTransitionTime"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
        obj["status"]["conditions"][0]["message"] = ("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
                                                     "1 node(s) didn't match Pod's node affinity/selector.")
    standin.modify_pod(name, stamp, namespace=workload.namespace)


def test_a_pod_unschedulable_past_the_grace_ends_the_attempt_and_it_is_admitted_again(
        standin, kube, researcher_api, settings):
    settings.OSMO_PLACEMENT_GRACE = 120
    workload = admit_and_dispatch(researcher_api, kube, replicas=2)
    since = timezone.now().replace(microsecond=0) - timedelta(seconds=5)
    pod(standin, workload, 0, "Running", node=next(iter(workload.placement)))
    unschedulable(standin, workload, 1, since)
    workload = observe(kube, workload, now=since + timedelta(seconds=119))
    assert workload.status == Status.SCHEDULING and not workload.stop_status
    assert workload.reasons[0]["code"] == "UNSCHEDULABLE"
    workload = observe(kube, workload, now=since + timedelta(seconds=120))
    assert (workload.stop_status, workload.stop_reason) == ("RESCHEDULE", "UNSCHEDULABLE")
    workload = readmit(kube, workload)
    ended = workload.events.get(reason="UNSCHEDULABLE")
    assert f"Pod {workload.attempts[0]['job']}-1-abcde found no node in its plan" in ended.message
    assert "for 2 min" in ended.message and "didn't match Pod's node affinity" in ended.message
    assert workload.status == Status.SCHEDULING and sum(workload.placement.values()) == 2


def test_an_unschedulable_time_the_api_server_would_not_write_sets_no_deadline(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube)
    unschedulable(standin, workload, 0, datetime(2026, 1, 1, tzinfo=UTC))
    name = f"{workload.job_name}-0-abcde"
    standin.modify_pod(name, lambda obj: obj["status"]["conditions"][0].update(lastTransitionTime="yesterday"),
                       namespace=workload.namespace)
    workload = observe(kube, workload, now=timezone.now() + timedelta(days=1))
    assert workload.status == Status.SCHEDULING and not workload.stop_status


def test_get_jobs_describe_the_api_and_the_page_show_the_pods_nodes_and_ips_and_the_plan_as_the_plan(
        standin, kube, researcher_api, client, world):
    workload = observe(kube, admit_and_dispatch(researcher_api, kube, replicas=2))
    ((planned, _),) = workload.placement.items()  # bin-packed: both replicas on one node
    (row,) = json.loads(run("get", "jobs", "--format", "json"))
    assert (row["node"], row["ip"], row["ready"]) == ("<none>", "<none>", "0/2")  # the plan is not where work runs
    detail = researcher_api.get(f"/api/workloads/{workload.pk}/").json()
    assert (detail["placement"], detail["planned_nodes"]) == ({}, {planned: 2})

    # Running with its container not ready yet (a readiness probe): kubectl counts it not ready, nor do we.
    bound = pod(standin, workload, 0, "Running", node=planned,
                conditions=[{"type": "Ready", "status": "False"}])["metadata"]["name"]
    standin.modify_pod(bound, {"status": {"podIP": "10.4.0.17"}}, namespace=workload.namespace)
    pod(standin, workload, 1, "Pending", node=None)
    workload = observe(kube, workload)
    (row,) = json.loads(run("get", "jobs", "--format", "json"))
    assert (row["node"], row["ip"], row["ready"]) == (planned, "10.4.0.17", "0/2")
    standin.modify_pod(bound, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
                       namespace=workload.namespace)
    workload = observe(kube, workload)
    (row,) = json.loads(run("get", "jobs", "--format", "json"))
    assert (row["node"], row["ip"], row["ready"]) == (planned, "10.4.0.17", "1/2")
    table = run("get", "jobs").splitlines()[1].split()
    assert table[5:8] == ["1/2", planned, "10.4.0.17"]
    detail = researcher_api.get(f"/api/workloads/{workload.pk}/").json()
    assert (detail["placement"], detail["planned_nodes"]) == ({planned: 1}, {planned: 2})
    assert [(p["node"], p["ip"]) for p in detail["job"]["pods"]] == [(planned, "10.4.0.17"), (None, None)]
    described = run("workload", "describe", str(workload.pk))
    assert f"planned on {planned} x2" in described and f"Placed on:  {planned} x1" in described
    assert f"on {planned} (10.4.0.17): Running" in described

    client.force_login(world["researcher"])
    page = client.get(f"/workloads/{workload.pk}/").content.decode()
    assert f'<span id="workload-placed">on <a href="/nodes/{planned}/">{planned}</a></span>' in page
    assert f'(planned: <a href="/nodes/{planned}/">{planned}</a> (2))' in page
    assert "<td>10.4.0.17</td><td>Running</td>" in page


def pods_of(cluster, job: str) -> list[dict]:
    pods, token = [], None
    while True:
        page = cluster.list_pods(limit=500, continue_token=token)
        pods += [p for p in page.items if (p["metadata"].get("labels") or {}).get("job-name") == job]
        token = page.continue_token
        if not token:
            return pods


def test_the_simulated_cluster_places_pods_only_on_their_planned_nodes(tmp_path):
    from pools.cluster.simulated import SimulatedCluster

    # The "kai" lab's fleet: 12 idle H100 nodes of 8 GPUs, each GPU a slot of its own, no workloads of its own.
    cluster = SimulatedCluster("lab", tmp_path, clock=lambda: 1_800_000_000.0, sleep=lambda seconds: None,
                               fleet="kai")
    idle = sorted(n["metadata"]["name"] for n in cluster.list_nodes().items
                  if n["metadata"]["labels"].get("nvidia.com/gpu.product") == "NVIDIA-H100-80GB-HBM3")
    assert len(idle) == 12
    planned = (idle[4], idle[9])
    template = {"spec": {"containers": [{"name": "user", "image": "busybox", "resources": {
        "limits": {"nvidia.com/gpu": 1}}}], "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
    pinned = job_manifest(attempt(pod_template=template, nodes=planned, replicas=20), prefix=PREFIX, ttl_seconds=60)
    cluster.create_job("vision", pinned)
    pods = pods_of(cluster, pinned["metadata"]["name"])
    bound = sorted(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName"))
    # Two idle nodes of 8 GPUs: 16 pods there, none on the other idle nodes, 4 wait for room in the plan.
    assert bound == [planned[0]] * 8 + [planned[1]] * 8
    waiting = [p for p in pods if not p["spec"].get("nodeName")]
    assert len(waiting) == 4
    for p in waiting:
        (condition,) = p["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False",
                                                                                  "Unschedulable")
    loose = job_manifest(attempt(pod_template=template, nodes=(), replicas=4, workload_id="a" * 32), prefix=PREFIX,
                         ttl_seconds=60)
    cluster.create_job("vision", loose)
    assert all(p["spec"].get("nodeName") not in planned for p in pods_of(cluster, loose["metadata"]["name"]))


def test_the_simulated_cluster_counts_gpus_not_slots_so_a_plan_that_packs_a_node_fits_there(tmp_path):
    """Its H100 training nodes run the simulation's gangs in one slot of 8 GPUs: admission packs eight one-GPU
    replicas on such a node when it is idle, and the simulated scheduler must fit all eight there."""
    from pools.cluster.simulated import SimulatedCluster

    cluster = SimulatedCluster("default", tmp_path, clock=lambda: 1_800_000_000.0, sleep=lambda seconds: None)
    holding = {p["spec"].get("nodeName") for p in cluster.list_pods(limit=5000).items
               if p["status"].get("phase") in ("Pending", "Running") and any(
                   (c.get("resources") or {}).get("limits", {}).get("nvidia.com/gpu") for c in p["spec"]["containers"])}
    idle = next(n["metadata"]["name"] for n in cluster.list_nodes(limit=1000).items
                if n["metadata"]["name"].startswith("dgx-h100-") and n["metadata"]["name"] not in holding
                and not n["spec"].get("taints"))
    template = {"spec": {"containers": [{"name": "user", "image": "busybox", "resources": {
        "limits": {"nvidia.com/gpu": 1}}}]}}
    job = job_manifest(attempt(pod_template=template, nodes=(idle,), replicas=10), prefix=PREFIX, ttl_seconds=60)
    cluster.create_job("vision", job)
    bound = [p["spec"].get("nodeName") for p in pods_of(cluster, job["metadata"]["name"])]
    assert (bound.count(idle), bound.count(None), len(bound)) == (8, 2, 10)
