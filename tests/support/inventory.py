"""Backend `gpu-cluster` on the stand-in API server, synced, for the inventory operations (labels, pool YAML,
cordon, `describe node`, `resource list`): a plugin of the whole suite (tests/conftest.py's pytest_plugins), so
that no test module imports it from another."""

import pytest
from django.core.management import call_command

from pools.fleet.sync import BackendSync, cluster_for
from pools.models import Backend
from tests.kube_objects import make_node, make_pod, operator_pods


@pytest.fixture
def gpu_backend(standin, tmp_path, defaults):
    """Backend `gpu-cluster`, added with `backend add` and synced once: nodes node-1 and node-2 (8 A100s each,
    6 of node-1's used by pod `train`), node-3 (4 L40S) and cpu-node-1, each GPU node with its operator pods."""
    standin.add_nodes([make_node("node-1", gpus=8, product="NVIDIA-A100-SXM4-80GB"),
                      make_node("node-2", gpus=8, product="NVIDIA-A100-SXM4-80GB"),
                      make_node("node-3", gpus=4, product="NVIDIA-L40S"),
                      make_node("cpu-node-1", gpus=0)])
    standin.add_pods([make_pod("train", "node-1", gpus=6, cpu="8", memory="16Gi"),
                     *operator_pods("node-1"), *operator_pods("node-2"), *operator_pods("node-3")])
    call_command("backend", "add", "gpu-cluster", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    backend = Backend.objects.get(name="gpu-cluster")
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    return backend
