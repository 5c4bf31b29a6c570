"""The simulated cluster as KAI Scheduler: Jobs of kai-scheduler are placed through their PodGroup, whole or not at
all, within their queues' limits and (non-preemptible ones) quotas, honouring a required topology level; what
waits says why in the PodGroup's status.schedulingConditions, KAI's shape; Queues carry what they hold. Other Jobs
go as before.

The cluster is the "kai" lab fleet (a name starting with kai-): 12 DGX H100 nodes of 8 GPUs, 4 to a zone and 2 to
a rack, and 2 CPU nodes, with nothing else running."""

from collections import Counter

import pytest

from pools.cluster import simulated
from pools.cluster.kinds import KAI_PODGROUP, KAI_QUEUE
from pools.cluster.simulated import SimulatedCluster
from tests.cluster.test_simulated import drain, job_body

H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
ZONE, RACK = "topology.kubernetes.io/zone", "topology.kubernetes.io/rack"
NS = "vision-team"


@pytest.fixture
def cluster(tmp_path, clock):
    """The simulated cluster of the "kai" lab fleet (tests/cluster/conftest.py's is the demo's default one)."""
    return SimulatedCluster("kai-lab", tmp_path, clock=clock, sleep=lambda seconds: None)


@pytest.fixture
def other(tmp_path, clock):
    """A second instance on the same state directory, as another process would open it."""
    return SimulatedCluster("kai-lab", tmp_path, clock=clock, sleep=lambda seconds: None)


def queue(name: str, parent: str | None = None, quota: float = 96, limit: float = -1) -> dict:
    spec = {"resources": {"gpu": {"quota": quota, "limit": limit, "overQuotaWeight": 2},
                          "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 2},
                          "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 2}}}
    if parent:
        spec["parentQueue"] = parent
    return {"metadata": {"name": name, "labels": {"runwhere.ai/managed-by": "osmo-pools"}}, "spec": spec}


@pytest.fixture
def queues(cluster):
    """A department (parent) and its project (the leaf), with room for the whole lab unless a test says less."""
    def make(parent: dict | None = None, leaf: dict | None = None):
        cluster.create_object(KAI_QUEUE, queue("lab.research", **(parent or {})))
        cluster.create_object(KAI_QUEUE, queue("lab.research.vision", "lab.research", **(leaf or {})))
    return make


def kai_job(name: str, replicas: int = 1, gpus: int = 8, *, leaf: str = "lab.research.vision",
            priority: str = "train", seconds: int = 300, topology: dict | None = None) -> dict:
    body = job_body(name, gpus=gpus, selector=H100, **{simulated.DURATION_ANNOTATION: str(seconds)})
    body["metadata"]["labels"] = {"runwhere.ai/managed-by": "osmo-pools", "kai.scheduler/queue": leaf}
    body["spec"].update(parallelism=replicas, completions=replicas, completionMode="Indexed")
    template = body["spec"]["template"]
    template["metadata"] = {"labels": {"kai.scheduler/queue": leaf},
                            "annotations": {"pod-group-name": name, "kai.scheduler/skip-podgrouper": "true",
                                            **(topology or {})}}
    template["spec"].update(schedulerName="kai-scheduler", priorityClassName=priority)
    template["spec"]["containers"][0]["resources"]["limits"].update(cpu="16", memory="64Gi")
    return body


def podgroup(name: str, replicas: int = 1, *, leaf: str = "lab.research.vision", priority: str = "train",
             required: str | None = None, preferred: str | None = None, owner: dict | None = None) -> dict:
    spec = {"minMember": replicas, "queue": leaf, "priorityClassName": priority,
            "preemptibility": "non-preemptible" if priority in ("build", "inference") else "preemptible"}
    if required or preferred:
        spec["topologyConstraint"] = {"topology": "lab", **({"requiredTopologyLevel": required} if required else {}),
                                      **({"preferredTopologyLevel": preferred} if preferred else {})}
    metadata = {"name": name, "namespace": NS}
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": owner["metadata"]["name"],
                                        "uid": owner["metadata"]["uid"], "blockOwnerDeletion": False}]
    return {"metadata": metadata, "spec": spec}


def submit(cluster, name: str, replicas: int = 1, gpus: int = 8, *, leaf: str = "lab.research.vision",
           priority: str = "train", seconds: int = 300, required: str | None = None,
           preferred: str | None = None) -> dict:
    """As dispatch does it: the Job, then its PodGroup, owned by the Job."""
    job = cluster.create_job(NS, kai_job(name, replicas, gpus, leaf=leaf, priority=priority, seconds=seconds))
    cluster.create_object(KAI_PODGROUP, podgroup(name, replicas, leaf=leaf, priority=priority, required=required,
                                                 preferred=preferred, owner=job), namespace=NS)
    return job


def pods_of(cluster, job: str) -> list[dict]:
    pods = []
    token = None
    while True:
        page = cluster.list_pods(limit=500, continue_token=token)
        pods += [p for p in page.items if (p["metadata"].get("labels") or {}).get("job-name") == job]
        token = page.continue_token
        if not token:
            return pods


def nodes_of(cluster) -> dict[str, dict]:
    return {node["metadata"]["name"]: node for node in cluster.list_nodes(limit=500).items}


def condition(cluster, name: str) -> dict | None:
    status = cluster.get_object(KAI_PODGROUP, name, namespace=NS).get("status") or {}
    (found,) = status.get("schedulingConditions") or [None]
    return found


def status_of(cluster, name: str) -> dict:
    return cluster.get_object(KAI_QUEUE, name).get("status") or {}


def fill(cluster, nodes: int, seconds: int = 300, name: str = "filler") -> None:
    """A plain Job (the default scheduler's) holding every GPU of `nodes` H100 nodes."""
    body = job_body(name, gpus=8, selector=H100, **{simulated.DURATION_ANNOTATION: str(seconds)})
    body["spec"].update(parallelism=nodes, completions=nodes)
    cluster.create_job("other-team", body)
    assert all(pod["spec"].get("nodeName") for pod in pods_of(cluster, name))


# ---- the fleet ----------------------------------------------------------------------------------------------


def test_the_kai_lab_has_12_h100_nodes_in_zones_and_racks_and_nothing_running(cluster):
    nodes = nodes_of(cluster)
    gpu_nodes = [n for n in nodes.values() if n["metadata"]["labels"].get("nvidia.com/gpu.product")]
    assert len(nodes) == 14 and len(gpu_nodes) == 12
    assert Counter(n["metadata"]["labels"][ZONE] for n in gpu_nodes) == {"sjc-dc1-a": 4, "sjc-dc1-b": 4,
                                                                           "sjc-dc1-c": 4}
    assert set(Counter(n["metadata"]["labels"][RACK] for n in gpu_nodes).values()) == {2}
    assert all(n["status"]["allocatable"]["nvidia.com/gpu"] == "8" for n in gpu_nodes)
    pods = cluster.list_pods(limit=1000).items
    assert pods and all(p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet" for p in pods)


# ---- gangs --------------------------------------------------------------------------------------------------


def test_a_gang_of_4_is_placed_whole_or_not_at_all(cluster, queues):
    queues()
    fill(cluster, 10)  # 2 nodes (16 GPUs) left
    submit(cluster, "big", replicas=4)
    pods = pods_of(cluster, "big")
    assert len(pods) == 4 and not any(p["spec"].get("nodeName") for p in pods)
    assert {p["status"]["conditions"][0]["reason"] for p in pods} == {"Unschedulable"}
    waiting = condition(cluster, "big")
    assert (waiting["type"], waiting["nodePool"], waiting["reason"]) == ("UnschedulableOnNodePool", "default",
                                                                           "Unschedulable")
    assert waiting["message"] == ("Resources were found for 2 pods while 4 are required for gang scheduling. "
                                  "0/14 nodes are available: 12 Insufficient nvidia.com/gpu, 2 node(s) didn't "
                                  "match Pod's node affinity/selector.")
    assert waiting["reasons"][0]["reason"] == "Unschedulable"
    assert cluster.get_job(NS, "big")["status"]["active"] == 4

    submit(cluster, "pair", replicas=2)
    placed = pods_of(cluster, "pair")
    assert len({p["spec"]["nodeName"] for p in placed}) == 2 and condition(cluster, "pair") is None
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, "big"))


def test_once_capacity_frees_the_group_is_placed_and_its_condition_cleared(cluster, other, queues, clock):
    queues()
    fill(cluster, 12, seconds=30)
    submit(cluster, "waits", replicas=4)
    assert condition(cluster, "waits")["message"].startswith("0/14 nodes are available: 12 Insufficient")
    start = cluster.list_objects(KAI_PODGROUP, namespace=NS).resource_version
    clock.advance(60)  # the filler's pods have completed: the next read runs the scheduler's pass
    pods = pods_of(other, "waits")
    assert len({p["spec"]["nodeName"] for p in pods}) == 4 and {p["status"]["phase"] for p in pods} == {"Pending"}
    assert condition(cluster, "waits") is None
    events = [e for e in drain(cluster.watch_objects(KAI_PODGROUP, start, namespace=NS, timeout_seconds=0))
              if e.type != "BOOKMARK"]
    assert [(e.type, (e.object.get("status") or {}).get("schedulingConditions")) for e in events] == [
        ("MODIFIED", None)]
    clock.advance(10)
    assert {p["status"]["phase"] for p in pods_of(cluster, "waits")} == {"Running"}
    clock.advance(400)
    job = cluster.get_job(NS, "waits")
    assert job["status"]["succeeded"] == 4 and job["status"]["conditions"][-1]["type"] == "Complete"


def test_a_group_waits_for_its_podgroup(cluster, queues, clock):
    queues()
    cluster.create_job(NS, kai_job("early", replicas=2))
    clock.advance(15)
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, "early"))
    cluster.create_object(KAI_PODGROUP, podgroup("early", 2), namespace=NS)
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, "early"))
    cluster.create_object(KAI_PODGROUP, podgroup("ready", 2), namespace=NS)  # the PodGroup first: placed at once
    cluster.create_job(NS, kai_job("ready", replicas=2))
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, "ready"))


# ---- queues -------------------------------------------------------------------------------------------------


def test_a_queue_over_its_limit_leaves_the_group_waiting_with_the_queues_figures(cluster, queues):
    queues(leaf={"quota": 4, "limit": 8})
    submit(cluster, "first", gpus=8)
    assert pods_of(cluster, "first")[0]["spec"].get("nodeName")
    submit(cluster, "second", replicas=2, gpus=2)
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, "second"))
    waiting = condition(cluster, "second")
    assert waiting["reason"] == "OverLimit"
    assert waiting["message"] == ("lab.research.vision quota has reached the allowable limit of GPUs. Limit is 8 "
                                  "GPUs, currently 8 GPUs allocated and workload requested 4 GPUs")
    (reason,) = waiting["reasons"]
    assert (reason["reason"], reason["message"]) == ("OverLimit", waiting["message"])
    details = reason["details"]["queueDetails"]
    assert details["name"] == "lab.research.vision"
    assert details["queueDeservedResources"]["gpu"] == 4 and details["queueResourceLimits"]["gpu"] == 8
    assert details["queueAllocatedResources"] == {"gpu": 8, "cpu": 16000, "memory": 68719.477}
    assert details["podGroupRequestedResources"] == {"gpu": 4, "cpu": 32000, "memory": 137438.953}
    assert waiting["transitionID"] == "0" and waiting["lastTransitionTime"].endswith("Z")


def test_a_parents_limit_counts_every_child(cluster, queues):
    queues(parent={"quota": 8, "limit": 16})
    cluster.create_object(KAI_QUEUE, queue("lab.research.speech", "lab.research"))
    submit(cluster, "vision", replicas=2)
    submit(cluster, "speech", leaf="lab.research.speech")
    waiting = condition(cluster, "speech")
    assert waiting["reason"] == "OverLimit" and waiting["message"].startswith("lab.research quota has reached")
    assert waiting["reasons"][0]["details"]["queueDetails"]["name"] == "lab.research"


def test_a_non_preemptible_group_must_stay_within_quota(cluster, queues):
    queues(leaf={"quota": 4})
    submit(cluster, "build", gpus=8, priority="build")
    assert not pods_of(cluster, "build")[0]["spec"].get("nodeName")
    waiting = condition(cluster, "build")
    assert waiting["reason"] == "NonPreemptibleOverQuota"
    assert waiting["message"] == ("Non-preemptible workload is over quota. Workload requested 8 GPUs, but "
                                  "lab.research.vision quota is 4 GPUs, while 0 GPUs are already allocated for "
                                  "non-preemptible pods. Use a preemptible workload to go over quota.")
    assert waiting["reasons"][0]["details"]["queueDetails"]["queueDeservedResources"]["gpu"] == 4
    submit(cluster, "train", gpus=8, priority="train")  # preemptible: may go above quota, up to the limit
    assert pods_of(cluster, "train")[0]["spec"].get("nodeName")
    submit(cluster, "inference", gpus=4, priority="inference")
    assert pods_of(cluster, "inference")[0]["spec"].get("nodeName")
    assert status_of(cluster, "lab.research.vision")["allocatedNonPreemptible"]["gpu"] == 4


def test_a_missing_queue_waits_until_it_is_created(cluster):
    submit(cluster, "orphan", leaf="lab.nobody")
    waiting = condition(cluster, "orphan")
    assert (waiting["reason"], waiting["message"]) == ("QueueDoesNotExist", "Queue 'lab.nobody' does not exist")
    assert waiting["reasons"][0]["details"]["queueDetails"]["name"] == "lab.nobody"
    cluster.create_object(KAI_QUEUE, queue("lab.nobody"))
    assert pods_of(cluster, "orphan")[0]["spec"].get("nodeName") and condition(cluster, "orphan") is None


def test_queue_status_follows_what_runs_and_waits(cluster, queues, clock):
    queues(leaf={"limit": 16})
    submit(cluster, "runs", replicas=2, seconds=30)
    submit(cluster, "waits", replicas=2)
    leaf, parent = status_of(cluster, "lab.research.vision"), status_of(cluster, "lab.research")
    assert leaf["allocated"]["gpu"] == parent["allocated"]["gpu"] == 16
    assert leaf["requested"]["gpu"] == parent["requested"]["gpu"] == 32
    assert leaf["allocatedNonPreemptible"]["gpu"] == 0
    assert condition(cluster, "waits")["reason"] == "OverLimit"
    clock.advance(60)  # "runs" completed: "waits" fits under the limit now
    cluster.list_nodes(limit=1)
    assert status_of(cluster, "lab.research.vision")["allocated"]["gpu"] == 16
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, "waits"))
    clock.advance(400)
    cluster.list_nodes(limit=1)
    assert status_of(cluster, "lab.research")["allocated"] == {"gpu": 0, "cpu": 0, "memory": 0}


# ---- topology -----------------------------------------------------------------------------------------------


def test_a_required_topology_level_keeps_every_pod_within_one_value(cluster, queues):
    queues()
    labels = {name: node["metadata"]["labels"] for name, node in nodes_of(cluster).items()}
    submit(cluster, "zonal", replicas=4, required=ZONE)
    placed = pods_of(cluster, "zonal")
    assert len({labels[p["spec"]["nodeName"]][ZONE] for p in placed}) == 1 and len(placed) == 4
    submit(cluster, "racked", replicas=2, required=RACK)
    assert len({labels[p["spec"]["nodeName"]][RACK] for p in pods_of(cluster, "racked")}) == 1
    submit(cluster, "too-wide", replicas=3, required=RACK)  # a rack has 2 nodes
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, "too-wide"))
    waiting = condition(cluster, "too-wide")
    assert waiting["reason"] == "Unschedulable"
    assert waiting["message"].startswith(f"No {RACK} domain has room for all 3 pods of the gang")
    submit(cluster, "spread", replicas=3, preferred=RACK)  # preferred: anywhere rather than waiting
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, "spread"))


def test_a_required_level_waits_even_when_the_gang_fits_across_domains(cluster, queues):
    queues()
    fill(cluster, 1)  # dgx-h100-01 busy: each zone still has 3 free nodes or more, none 4 in zone a
    submit(cluster, "zonal-1", replicas=4, required=ZONE)
    submit(cluster, "zonal-2", replicas=4, required=ZONE)
    submit(cluster, "zonal-3", replicas=4, required=ZONE)  # zone a has 3 free nodes, the others are taken
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, "zonal-3"))
    assert "the roomiest, sjc-dc1-a, has room for 3" in condition(cluster, "zonal-3")["message"]


# ---- the rest -----------------------------------------------------------------------------------------------


def test_deleting_the_job_deletes_its_podgroup_and_frees_its_queue(cluster, queues):
    queues()
    submit(cluster, "gone", replicas=2)
    assert status_of(cluster, "lab.research.vision")["allocated"]["gpu"] == 16
    cluster.delete_job(NS, "gone")
    assert cluster.list_objects(KAI_PODGROUP, namespace=NS).items == []
    cluster.list_nodes(limit=1)
    assert status_of(cluster, "lab.research.vision")["allocated"]["gpu"] == 0
    assert pods_of(cluster, "gone") == []


def test_a_job_of_another_scheduler_is_placed_pod_by_pod_as_before(cluster, queues):
    queues(leaf={"limit": 0})
    fill(cluster, 11)
    body = job_body("plain", gpus=8, selector=H100)
    body["metadata"]["labels"] = {"kai.scheduler/queue": "lab.research.vision"}  # a label alone changes nothing
    body["spec"].update(parallelism=3, completions=3)
    cluster.create_job(NS, body)
    placed = [p["spec"].get("nodeName") for p in pods_of(cluster, "plain")]
    assert sorted(bool(node) for node in placed) == [False, False, True]  # no gang: what fits, runs
    assert cluster.list_objects(KAI_PODGROUP, namespace=NS).items == []
    assert "status" not in cluster.get_object(KAI_QUEUE, "lab.research.vision")


def test_the_default_fleet_runs_kai_jobs_too_and_plain_jobs_unchanged(tmp_path, clock):
    cluster = SimulatedCluster("default", tmp_path, clock=clock, sleep=lambda seconds: None)
    assert cluster.fleet == "default" and len(nodes_of(cluster)) > 200
    cluster.create_object(KAI_QUEUE, queue("lab.research"))
    cluster.create_object(KAI_QUEUE, queue("lab.research.vision", "lab.research"))
    submit(cluster, "gang", replicas=2, gpus=1)
    assert all(p["spec"].get("nodeName") for p in pods_of(cluster, "gang"))
    cluster.create_job("team", job_body("plain"))
    assert pods_of(cluster, "plain")[0]["spec"].get("nodeName")


# ---- a gang of several Jobs (issue 41) ------------------------------------------------------------------------

CPU_NODES = {"node.kubernetes.io/instance-type": "r760-cpu"}


def member_job(name: str, group: str, replicas: int, gpus: int, *, image: str, selector: dict | None = None) -> dict:
    """A Job of an OSMO task group whose tasks differ: its pods name the lead's PodGroup, not one of their own."""
    body = kai_job(name, replicas, gpus)
    template = body["spec"]["template"]
    template["metadata"]["annotations"]["pod-group-name"] = group
    template["spec"]["containers"][0]["image"] = image
    if selector is not None:
        template["spec"]["nodeSelector"] = selector
    return body


def test_jobs_naming_one_podgroup_are_placed_together_each_pod_where_its_own_spec_admits(cluster, queues):
    queues()
    labels = {name: node["metadata"]["labels"] for name, node in nodes_of(cluster).items()}
    lead = cluster.create_job(NS, kai_job("mixed", replicas=2, gpus=8))
    cluster.create_job(NS, member_job("mixed-eval", "mixed", 2, 2, image="nvcr.io/nvidia/tritonserver:24.12-py3"))
    cluster.create_job(NS, member_job("mixed-data", "mixed", 1, 0, image="python:3.12", selector=CPU_NODES))
    assert not any(p["spec"].get("nodeName") for job in ("mixed", "mixed-eval", "mixed-data")
                   for p in pods_of(cluster, job))  # no PodGroup yet, and none of their own
    cluster.create_object(KAI_PODGROUP, podgroup("mixed", 5, required=ZONE, owner=lead), namespace=NS)
    pods = {job: pods_of(cluster, job) for job in ("mixed", "mixed-eval", "mixed-data")}
    assert {job: len(found) for job, found in pods.items()} == {"mixed": 2, "mixed-eval": 2, "mixed-data": 1}
    nodes = {job: [p["spec"].get("nodeName") for p in found] for job, found in pods.items()}
    assert all(node for found in nodes.values() for node in found)
    assert all(node.startswith("dgx-h100-") for node in nodes["mixed"] + nodes["mixed-eval"])
    assert nodes["mixed-data"][0].startswith("cpu-")
    assert {labels[node][ZONE] for found in nodes.values() for node in found} == {"sjc-dc1-a"}  # the whole gang
    assert len({p["metadata"]["resourceVersion"] for found in pods.values() for p in found}) == 1  # one pass
    assert condition(cluster, "mixed") is None
    assert [g["metadata"]["name"] for g in cluster.list_objects(KAI_PODGROUP, namespace=NS).items] == ["mixed"]
    assert status_of(cluster, "lab.research.vision")["allocated"]["gpu"] == 2 * 8 + 2 * 2


def test_a_multi_job_gang_that_fits_only_in_part_places_none_of_its_jobs(cluster, queues):
    queues()
    fill(cluster, 10)  # 2 nodes (16 GPUs) left: room for the lead's pods, not for the others' too
    lead = cluster.create_job(NS, kai_job("mixed", replicas=2, gpus=8))
    cluster.create_job(NS, member_job("mixed-eval", "mixed", 2, 4, image="nvcr.io/nvidia/tritonserver:24.12-py3"))
    cluster.create_object(KAI_PODGROUP, podgroup("mixed", 4, owner=lead), namespace=NS)
    assert not any(p["spec"].get("nodeName") for job in ("mixed", "mixed-eval") for p in pods_of(cluster, job))
    (group,) = cluster.list_objects(KAI_PODGROUP, namespace=NS).items
    (waiting,) = group["status"]["schedulingConditions"]
    assert (waiting["type"], waiting["reason"]) == ("UnschedulableOnNodePool", "Unschedulable")
    assert waiting["message"].startswith("Resources were found for 2 pods while 4 are required for gang scheduling.")
    details = waiting["reasons"][0]["details"]["queueDetails"]
    assert details["podGroupRequestedResources"]["gpu"] == 2 * 8 + 2 * 4
    assert status_of(cluster, "lab.research.vision")["requested"]["gpu"] == 24
    assert status_of(cluster, "lab.research.vision")["allocated"]["gpu"] == 0


def test_a_gang_waits_for_its_last_job_then_places_every_job_in_one_pass(cluster, queues, clock):
    queues()
    lead = cluster.create_job(NS, kai_job("mixed", replicas=2, gpus=8))
    cluster.create_object(KAI_PODGROUP, podgroup("mixed", 5, owner=lead), namespace=NS)
    waiting = condition(cluster, "mixed")
    assert waiting["reason"] == "Unschedulable"
    assert waiting["message"].startswith("Job is not ready for scheduling. Waiting for 5 pods, currently 2 exist")
    assert "fewer pods than its minMember" in waiting["message"]
    clock.advance(15)
    assert not any(p["spec"].get("nodeName") for p in pods_of(cluster, "mixed"))
    assert condition(cluster, "mixed")["transitionID"] == waiting["transitionID"]  # still the same wait
    cluster.create_job(NS, member_job("mixed-eval", "mixed", 3, 1, image="nvcr.io/nvidia/tritonserver:24.12-py3"))
    pods = pods_of(cluster, "mixed") + pods_of(cluster, "mixed-eval")
    assert len(pods) == 5 and all(p["spec"].get("nodeName") for p in pods)
    assert len({p["metadata"]["resourceVersion"] for p in pods}) == 1  # bound together, in the same pass
    assert condition(cluster, "mixed") is None
    assert status_of(cluster, "lab.research.vision")["allocated"]["gpu"] == 2 * 8 + 3
