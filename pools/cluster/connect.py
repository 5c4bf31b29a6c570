"""Turn a backend's connection settings into a `Cluster`."""

from pathlib import Path
from typing import Any

from .interface import Cluster, ClusterError
from .simulated import SimulatedCluster


def is_connected(backend: Any) -> bool:
    return backend.kind == "simulated" or backend.in_cluster or bool(backend.kubeconfig_path)


def connect(backend: Any, *, state_dir: Path) -> Cluster:
    """`backend` needs name, kind, in_cluster, kubeconfig_path and kube_context (a Backend row will do)."""
    # Each implementation loads on first use: the kubernetes package alone takes about half a second.
    if backend.kind == "simulated":
        # A simulated backend scheduled by KAI simulates KAI's lab fleet (pools.cluster.simulated.fleet).
        kai = getattr(backend, "scheduler", "") == "kai"
        return SimulatedCluster(backend.name, state_dir, fleet="kai" if kai else None)
    from .kube import KubeCluster

    if backend.in_cluster:
        return KubeCluster.in_cluster()
    if backend.kubeconfig_path:
        if not Path(backend.kubeconfig_path).is_file():
            raise ClusterError(f"backend {backend.name}: kubeconfig {backend.kubeconfig_path} does not exist")
        return KubeCluster.from_kubeconfig(backend.kubeconfig_path, backend.kube_context or None)
    raise ClusterError(f"backend {backend.name} is not connected: give it a kubeconfig path or in-cluster config "
                       "(./manage.py backend add NAME --kubeconfig PATH)")
