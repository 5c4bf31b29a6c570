"""Shared by the fault tests: a backend on the stand-in API server, a cluster whose resourceVersions have run well
ahead of its object count (so that a rewind shows in the numbers), a clock the test moves, and a poll loop whose
deadline only guards against hanging (never an asserted speed)."""

import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from pools.models import Backend
from tests.kube_objects import make_node, make_pod
from tests.scheduling.conftest import researcher_api, world  # noqa: F401  (the world of workloads)
from tests.test_sync import operator_pods

NODES = ["cpu-a", "gpu-a", "gpu-b"]


class FakeClock:
    """`monotonic` (a BackendSync's `clock`: run deadlines and watch back-off) and `now` (its `now`: dates compared
    with stored ones), both moved only by `advance`."""

    def __init__(self):
        self.seconds = 0.0
        self.start = timezone.now()

    def monotonic(self) -> float:
        return self.seconds

    def now(self):
        return self.start + timedelta(seconds=self.seconds)

    def advance(self, seconds: float) -> None:
        self.seconds += seconds


@pytest.fixture
def backend(standin, tmp_path, defaults):
    path = standin.kubeconfig(tmp_path / "kubeconfig")
    call_command("backend", "add", "prod", "--kubeconfig", path)
    return Backend.objects.get(name="prod")


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


@pytest.fixture
def kube(standin, tmp_path):
    from pools.cluster.kube import KubeCluster

    cluster = KubeCluster.from_kubeconfig(standin.kubeconfig(tmp_path / "kubeconfig"))
    yield cluster
    cluster.close()


def run_beside(sync, clock: FakeClock, standin, cluster_side, *, seconds: float = 3600):
    """`sync.run(seconds=...)` here, on `clock`, while `cluster_side()` acts in a thread of its own (a connection of
    its own too: such tests need transaction=True to see each other's writes). Once `cluster_side` is done, or
    failed, the run is ended: the clock moved past its end and its streams ended until it returns (a stream opened
    just before the move would otherwise last its whole timeout). `cluster_side`'s failure is raised here."""
    from django.db import connection

    done = threading.Event()
    failures: list[BaseException] = []

    def side() -> None:
        try:
            cluster_side()
        except BaseException as exc:
            failures.append(exc)
        finally:
            clock.advance(seconds + 10_000)
            while not done.wait(0.1):
                standin.end_watches()
            connection.close()

    helper = threading.Thread(target=side, name="cluster-side")
    helper.start()
    try:
        stats = sync.run(seconds=seconds)
    finally:
        done.set()
        helper.join(60)
    if failures:
        raise failures[0]
    return stats
