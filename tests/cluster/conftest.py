import pytest

from pools.cluster.kube import KubeCluster


@pytest.fixture
def kube(standin, tmp_path):
    # Short timeouts keep the stall and failure tests quick; production defaults are 5 s / 30 s / 15 s.
    cluster = KubeCluster.from_kubeconfig(
        standin.kubeconfig(tmp_path / "kubeconfig"), connect_timeout=1.0, read_timeout=2.0, watch_margin=0.5
    )
    yield cluster
    cluster.close()
