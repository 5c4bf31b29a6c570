"""The pods bound to one node, with their requests and the workload each runs for: for the node page and
`describe node`. A pod's workload is the label value of the Job we created for it (`ManagedJob.workload`);
pools knows no workloads, so whether the viewer may open one is the caller's to ask (scheduling answers).

A node can run pods of several pools. A viewer who may not see a pod's pool (its pool label) is not shown
the pod, only how many such pods there are and their GPUs: their names could tell whose work it is."""

from dataclasses import dataclass, field
from decimal import Decimal

from pools.fleet.usage import cores
from pools.models import ManagedJob, Node, Pod


@dataclass(frozen=True, slots=True)
class NodePod:
    namespace: str
    name: str
    phase: str
    gpu: int
    cpu: Decimal  # cores
    memory: int  # bytes
    component: str  # toolkit | dcgm | ""
    workload: str  # the workload id, or "" for a pod not ours


@dataclass(frozen=True, slots=True)
class NodePods:
    pods: list[NodePod] = field(default_factory=list)
    hidden: int = 0  # pods in pools the viewer may not see
    hidden_gpu: int = 0


def pods_on(node: Node, visible_pools: frozenset[str] | None = None) -> NodePods:
    """`visible_pools` as `Access.visible_pool_names` (None: every pod shows, for staff and the CLI)."""
    rows = list(Pod.objects.filter(backend_id=node.backend_id, node_name=node.name)
                .order_by("namespace", "name")
                .values("namespace", "name", "phase", "gpu", "cpu", "memory", "component", "pool"))
    # A member sees their pools' pods and the GPU operator's own; another team's unlabelled pods (their
    # namespaces and names) are only counted.
    shown = [row for row in rows if visible_pools is None or row["pool"] in visible_pools
             or (not row["pool"] and row["component"])]
    hidden = [row for row in rows if row not in shown]
    workloads = _workloads(node, shown)
    return NodePods(
        [NodePod(row["namespace"], row["name"], row["phase"], row["gpu"], cores(row["cpu"]), row["memory"],
                 row["component"], workloads.get((row["namespace"], row["name"]), "")) for row in shown],
        len(hidden), sum(row["gpu"] for row in hidden))


def _workloads(node: Node, pods: list[dict]) -> dict[tuple[str, str], str]:
    if not pods:
        return {}
    jobs = ManagedJob.objects.filter(backend_id=node.backend_id, namespace__in={pod["namespace"] for pod in pods},
                                     pods__has_any_keys=[pod["name"] for pod in pods])
    found = {}
    for namespace, workload, job_pods in jobs.values_list("namespace", "workload", "pods"):
        for name in job_pods:
            found[(namespace, name)] = workload
    return found
