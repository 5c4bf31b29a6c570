"""An engine backend with nothing to write writes nothing and says why (issue 39): a Kueue backend with no pool
wrote a ClusterQueue with no flavor per project, which the API server refused (`spec.resourceGroups[0].flavors:
... should have at least 1 items`) on every reconcile. Now it writes no object at all, deletes what it wrote
while it had pools, and its admin page, `backend list` and `backend reconcile` say why. Against the stand-in API
server through the real client."""

import pytest
from django.utils.html import escape

from pools.cluster.kinds import KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE
from pools.models import Backend, Pool
from pools.schedulers.reconcile import run
from tests.support import commands

pytestmark = pytest.mark.django_db
WRITES = ("POST", "PUT", "PATCH", "DELETE")
NO_POOL = ("No pool uses this backend yet, so nothing is written to Kueue: its objects are made from the backend's "
           "pools (set a pool's backend to it).")


@pytest.fixture
def empty_kueue(world, standin, tmp_path, shared_clients):
    """A second cluster's Kueue backend, added through the CLI, that no pool uses yet."""
    commands.run("backend", "add", "kueue-b", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"),
                 "--scheduler", "kueue")
    return Backend.objects.get(name="kueue-b")


def test_a_kueue_backend_without_pools_writes_nothing_and_says_why(empty_kueue, standin, admin_client):
    standin.clear_requests()

    printed = commands.run("backend", "reconcile", "kueue-b")

    assert [(r.method, r.path) for r in standin.requests if r.method in WRITES] == []
    assert printed == ("Backend kueue-b (Kueue) reconciled: created 0, updated 0, deleted 0, unchanged 0, refused 0. "
                       f"Objects of ours now: none. {NO_POOL}\n")
    backend = Backend.objects.get(pk=empty_kueue.pk)
    assert backend.engine_error == "" and backend.engine_refused == []
    assert backend.engine_objects["idle"] == NO_POOL
    page = admin_client.get(f"/admin/pools/backend/{backend.pk}/change/").content.decode()
    assert f'<p class="engine-idle">{escape(NO_POOL)}</p>' in page
    assert "Kueue · nothing to write: No pool uses this backend yet" in page
    assert f"\nBackend kueue-b writes no engine objects: {NO_POOL}\n" in commands.run("backend", "list")


def test_a_kueue_backend_whose_pools_went_elsewhere_deletes_what_it_wrote(world, standin, kube, tmp_path):
    commands.run("backend", "add", "default", "--simulated", "--scheduler", "kueue")  # reconciled on the stand-in
    kueue = Backend.objects.get(name="default")
    first = run(kueue, kube)
    assert first.refused == [] and standin.objects(KUEUE_CLUSTER_QUEUE) and first.idle == ""
    # By hand: a pool's configuration write re-derives the world's node rows (add_nodes', no cluster behind them).
    Pool.objects.filter(backend=kueue).update(backend=Backend.objects.create(name="plain"))

    emptied = run(kueue, kube)

    assert emptied.refused == [] and emptied.created == [] and len(emptied.deleted) == len(first.created)
    assert standin.objects(KUEUE_CLUSTER_QUEUE) == [] and standin.objects(KUEUE_LOCAL_QUEUE) == []
    assert emptied.idle == NO_POOL
    standin.clear_requests()
    assert run(kueue, kube).writes == 0
    assert [r for r in standin.requests if r.method in WRITES] == []


def test_a_kai_backend_without_pools_says_why_it_writes_nothing(world, standin, kube, tmp_path):
    commands.run("backend", "add", "kai-b", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"),
                 "--scheduler", "kai")
    backend = Backend.objects.get(name="kai-b")

    result = run(backend, kube)

    assert result.writes == 0 and result.refused == []
    assert result.idle == NO_POOL.replace("Kueue", "KAI Scheduler")
