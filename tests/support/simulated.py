"""The demo's simulated cluster at a clock the test moves (shared by the demo's tests and the browser tests that
follow a workload on it): dispatch, the sync and the follower as the workers run them, one step at a time."""

from datetime import UTC, datetime

import pytest

from pools.cluster.simulated import SimulatedCluster
from pools.config import writes
from pools.config.defaults import init_demo
from pools.fleet import sync as fleet_sync
from pools.fleet.sync import BackendSync
from pools.models import Backend, ConfigKind
from scheduling.run import follow, sweeps
from tests.support.commands import run

SIMULATED_AT = 1_790_000_000.0  # 2026-09-21, any fixed moment
# Our clock where it meets the simulated cluster's: times it writes (a pod Unschedulable since...) count as they would.
SIMULATED_NOW = datetime.fromtimestamp(SIMULATED_AT, UTC)
PASSWORD = "pw-alice-123"


class SimulatedTime:
    def __init__(self, state_dir):
        self.state_dir, self.at = state_dir, SIMULATED_AT

    def cluster(self, backend):
        return SimulatedCluster(backend.name, self.state_dir, clock=lambda: self.at)

    def serve_reads(self, monkeypatch, settings):
        """The web's reads of the cluster (a log panel, `shared_cluster_for`) meet this cluster at this clock, as
        the workers' do: the live server runs in the test's process."""
        settings.OSMO_SIMULATED_STATE_DIR = self.state_dir
        monkeypatch.setattr(fleet_sync, "_SHARED", {})
        monkeypatch.setattr(fleet_sync, "cluster_for", self.cluster)

    def sync(self):
        for backend in Backend.objects.filter(kind=Backend.Kind.SIMULATED):
            BackendSync(backend, self.cluster(backend)).run(seconds=0)

    def step(self, seconds: float, now):
        # Dispatch first, at the moment of the cycle that admitted (the workers dispatch on its commit): a plan made
        # from the last sync meets the cluster it was made for. Then time passes, the sync and the follower run.
        sweeps.sweep(now, act=True, clusters=self.cluster)
        self.at += seconds
        self.sync()
        Backend.objects.update(last_sync_at=now)  # synced at the test's moment, not the machine's
        follow.observe(now=now)


@pytest.fixture
def simulated(django_user_model, tmp_path, monkeypatch, settings):
    """The demo's configuration on its simulated cluster, and alice: a member of llm-research (default pools
    training and dev) whose roles let her use both."""
    init_demo(author="tests")
    simulated = SimulatedTime(tmp_path / "sim")
    simulated.sync()
    simulated.serve_reads(monkeypatch, settings)
    django_user_model.objects.create_user("alice", password=PASSWORD)
    for pool in ("training", "dev"):
        writes.import_document(ConfigKind.ROLE, {"name": f"osmo-{pool}", "policies": [{"actions": [
            {"base": "http", "path": f"/api/pool/{pool}*", "method": "post"}]}]}, author="tests")
        run("user", "add-role", "alice", f"osmo-{pool}")
    return simulated
