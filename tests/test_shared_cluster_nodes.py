"""One physical node, one row (issue 39 point 5): backends that share a cluster (`backend add --same-cluster-as`, or
the same kube-system uid) each synced every node, so /api/resources/ listed 40 rows for 8 nodes, totals counted
every GPU once per backend and two admissions could each count the same free GPUs. Now the first backend of the
cluster owns its Node and Pod rows, the others read them (their own Jobs still theirs), memberships come from every
backend's pools, and admission charges one node once whichever backend's pool places on it. Two backends on one
stand-in API server through the real client: `backend add`, `sync NAME --once`, the configuration import, the API."""

import pytest
from django.core.management import call_command

from pools.config import writes
from pools.models import Backend, ConfigKind, Node, Pod
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from tests.kube_objects import make_node, make_pod, operator_pods
from tests.support.fleet import pool_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared(standin, tmp_path, defaults):
    """`first` and `second` (added with --same-cluster-as first) on one stand-in: gpu-a (8 GPUs, 4 used by a pod
    of someone else), gpu-b (8 free), cpu-a; pool `left` on first, pool `right` on second, both every GPU node."""
    standin.add_nodes([make_node("gpu-a", gpus=8), make_node("gpu-b", gpus=8), make_node("cpu-a", gpus=0)])
    standin.add_pods([*operator_pods("gpu-a"), *operator_pods("gpu-b"), make_pod("train-1", "gpu-a", gpus=4)])
    path = standin.kubeconfig(tmp_path / "kubeconfig")
    call_command("backend", "add", "first", "--kubeconfig", path)
    call_command("backend", "add", "second", "--kubeconfig", path, "--same-cluster-as", "first")
    common = {"common_pod_template": ["default_user"], "common_resource_validations": [],
              "common_default_variables": {"USER_STORAGE": "1Gi"}, "default_platform": "gpu",
              "platforms": {"gpu": {}}}
    writes.import_document(ConfigKind.POOL, {"pools": {"left": pool_document(backend="first", **common),
                                                       "right": pool_document(backend="second", **common)}},
                           author="tests")
    for name in ("first", "second", "first"):
        call_command("sync", name, "--once")
    return Backend.objects.get(name="first"), Backend.objects.get(name="second")


def test_each_physical_node_is_one_row_in_the_pools_of_both_backends(shared, api):
    _first, second = shared
    rows = api.get("/api/resources/").json()
    rows = rows.get("results", rows) if isinstance(rows, dict) else rows
    assert sorted(row["node"] for row in rows) == ["cpu-a", "gpu-a", "gpu-b"]  # was each twice
    assert Node.objects.filter(backend=second).count() == 0 and Pod.objects.filter(backend=second).count() == 0
    assert Pod.objects.filter(name="train-1").count() == 1
    node = Node.objects.get(name="gpu-b")
    assert {"left", "right"} <= set(node.pool_names)  # memberships from both backends' pools
    assert sum(row["gpu_total"] for row in rows) == 16  # was 32: every GPU once per backend
    figures = {pool["name"]: (pool["node_count"], pool["gpu_total"], pool["gpu_free"])
               for pool in api.get("/api/pools/").json() if pool["name"] in ("left", "right")}
    assert figures == {"left": (3, 16, 12), "right": (3, 16, 12)}, figures


def test_two_admissions_through_pools_of_two_backends_never_count_the_same_free_gpus(shared, api):
    """8 GPUs are free on one node (gpu-b): an 8-GPU job in `left` (first's) and one in `right` (second's), in
    one cycle and in the next, are never both admitted."""
    for name, pool in (("in-left", "left"), ("in-right", "right")):
        answer = api.post("/api/workloads/", {"name": name, "image": "busybox", "pools": [pool], "priority": "low",
                                              "resources": {"gpu": 8, "cpu": "1", "memory": "1Gi"}}, format="json")
        assert answer.status_code == 201, answer.json()
    run_cycle()
    run_cycle()
    statuses = dict(Workload.objects.values_list("name", "status"))
    assert sorted(statuses.values()) == [Status.ADMITTED, Status.PENDING], statuses
    admitted = Workload.objects.get(status=Status.ADMITTED)
    assert admitted.placement == {"gpu-b": 1}
    (reason,) = Workload.objects.get(status=Status.PENDING).reasons
    assert reason["code"] == "CAPACITY", reason
