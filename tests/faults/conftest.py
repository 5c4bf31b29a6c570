"""Shared by the fault tests: a backend on the stand-in API server, a cluster whose resourceVersions have run well
ahead of its object count (so that a rewind shows in the numbers), a clock the test moves, and a poll loop whose
deadline only guards against hanging (never an asserted speed)."""


from tests.kube_objects import make_node, make_pod, operator_pods

NODES = ["cpu-a", "gpu-a", "gpu-b"]


def busy_cluster(standin, changes: int = 40) -> None:
    """Three nodes with a few pods, then `changes` heartbeats (which write no row): the resourceVersion runs
    ahead of the number of objects, as in any cluster that has been up a while."""
    standin.add_nodes([make_node("gpu-a", gpus=8), make_node("gpu-b", gpus=8), make_node("cpu-a", gpus=0)])
    standin.add_pods([*operator_pods("gpu-a"), *operator_pods("gpu-b"), make_pod("train-1", "gpu-a", gpus=4),
                      make_pod("etl", "cpu-a", cpu="4", memory="8Gi")])
    heartbeats(standin, changes)


def heartbeats(standin, count: int, node: str = "gpu-a") -> None:
    for i in range(count):
        standin.modify_node(node, {"metadata": {"labels": {"nvidia.com/gfd.timestamp": str(1_700_000_000 + i)}}})

