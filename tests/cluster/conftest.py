import pytest
from kubernetes import config as k8s_config

from pools.cluster.kube import KubeCluster
from pools.cluster.simulated import SimulatedCluster
from tests.kube_standin import HANG


@pytest.fixture
def cluster(tmp_path, clock):
    """The simulated cluster of the demo's `default` fleet, its state under tmp_path, on `clock` (tests/conftest.py;
    the simulated fleet moves with it, and its sleeps only move it)."""
    return SimulatedCluster("default", tmp_path, clock=clock, sleep=lambda seconds: None)


@pytest.fixture
def other(tmp_path, clock):
    """A second instance on the same state directory, as another process would open it."""
    return SimulatedCluster("default", tmp_path, clock=clock, sleep=lambda seconds: None)


@pytest.fixture
def kube(standin, tmp_path):
    # Connect and read timeouts only turn a hang into a failure (production defaults are 5 s / 30 s / 15 s); a short
    # watch margin keeps the stall tests quick. The margin (how long past timeoutSeconds a quiet stream may take to
    # end before it counts as stalled) is ten times the stand-in's 0.2 s wait step, so that a loaded machine never
    # turns a normal end into a stall.
    cluster = KubeCluster.from_kubeconfig(
        standin.kubeconfig(tmp_path / "kubeconfig"), connect_timeout=30.0, read_timeout=HANG, watch_margin=2.0
    )
    yield cluster
    cluster.close()


@pytest.fixture
def kube_api(standin, tmp_path):
    """The official client's ApiClient on the stand-in API server, for talking to it as kubectl would."""
    api_client = k8s_config.new_client_from_config(config_file=standin.kubeconfig(tmp_path / "kubeconfig"))
    yield api_client
    api_client.close()
