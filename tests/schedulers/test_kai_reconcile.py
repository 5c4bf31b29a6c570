"""A KAI backend's Queues and Topologies kept equal to our quotas and pools, against the stand-in API server through
the real client (pools/schedulers/reconcile.py): parents first, `limit: -1` written, ours only, idempotent, and
the API server's 409 and 410 survived."""

import pytest

from pools.cluster.kinds import KAI_QUEUE, KAI_TOPOLOGY
from pools.models import Pool
from pools.schedulers.desired import kai_objects
from pools.schedulers.kai import queue_name
from pools.schedulers.reconcile import reconcile
from tests.scheduling.conftest import project

pytestmark = pytest.mark.django_db
MANAGED = {"runwhere.ai/managed-by": "osmo-pools"}


def stored(kube, kind=KAI_QUEUE) -> dict[str, dict]:
    return {item["metadata"]["name"]: item for item in kube.list_objects(kind).items}


def test_quotas_become_queues_parents_first_with_explicit_limits_and_a_second_run_writes_nothing(standin, kube,
                                                                                             kai):
    someone = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-x"},
               "spec": {"resources": {"gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1}}}}
    kube.create_object(KAI_QUEUE, someone)

    first = reconcile(kai, kube)
    wanted = {name: obj for (_, name), obj in kai_objects(kai)[0][1].items()}
    assert first.created == [f"Queue/{name}" for name in wanted] and first.refused == []
    order = {name.removeprefix("Queue/"): i for i, name in enumerate(first.created)}
    leaves = {name: obj["spec"]["parentQueue"] for name, obj in wanted.items() if "parentQueue" in obj["spec"]}
    assert leaves and all(order[parent] < order[leaf] for leaf, parent in leaves.items())  # no leaf before its parent
    queues = stored(kube)
    vision = queues["training.research.vision"]["spec"]
    assert vision["parentQueue"] == "training.research"
    assert vision["resources"]["gpu"] == {"quota": 4, "limit": 12, "overQuotaWeight": 2}
    assert queues["training.research.nlp"]["spec"]["resources"]["gpu"]["limit"] == -1  # explicit, never absent
    assert queues["team-x"]["spec"] == someone["spec"] and not queues["team-x"]["metadata"].get("labels")  # untouched

    again = reconcile(kai, kube)
    assert again.writes == 0 and again.unchanged == len(wanted)


def test_a_quota_change_updates_its_queue_and_a_removed_project_loses_its_queue_only(standin, kube, kai):
    reconcile(kai, kube)
    project("vision", pools={"training": {"deserved": 6, "limit": 12}}, users=["researcher"],
            default_pools=["training"])
    changed = reconcile(kai, kube)
    assert "Queue/training.research.vision" in changed.updated and not changed.created
    assert stored(kube)["training.research.vision"]["spec"]["resources"]["gpu"]["quota"] == 6

    from pools.models import Project

    Project.objects.filter(name="nlp").delete()
    removed = reconcile(kai, kube)
    assert sorted(removed.deleted) == sorted(f"Queue/{queue_name(pool, 'research', 'nlp')}" for pool in
                                             Pool.objects.filter(backend=kai).values_list("name", flat=True))
    assert "training.research.vision" in stored(kube)


def test_topology_keys_create_and_re_create_the_pools_topology(standin, kube, kai):
    keys = [{"key": "zone", "label": "topology.kubernetes.io/zone"}, {"key": "rack", "label": "example.com/rack"}]
    # By hand: the configuration refuses topology keys whose labels none of the pool's nodes carries, and the world's
    # nodes are add_nodes' rows without them.
    Pool.objects.filter(name="training").update(topology_keys=keys)
    reconcile(kai, kube)
    (topology,) = stored(kube, KAI_TOPOLOGY).values()
    assert topology["metadata"]["name"] == "training"
    assert topology["spec"]["levels"] == [{"nodeLabel": "topology.kubernetes.io/zone"},
                                          {"nodeLabel": "example.com/rack"}]
    Pool.objects.filter(name="training").update(topology_keys=keys[:1])
    assert reconcile(kai, kube).recreated == ["Topology/training"]  # levels' nodeLabels are immutable
    assert stored(kube, KAI_TOPOLOGY)["training"]["spec"]["levels"] == [{"nodeLabel": "topology.kubernetes.io/zone"}]
    Pool.objects.filter(name="training").update(topology_keys=[])
    assert reconcile(kai, kube).deleted == ["Topology/training"]


def test_a_name_taken_by_someone_elses_queue_is_left_alone_and_a_410_on_the_list_is_survived(standin, kube,
                                                                                           kai):
    theirs = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "training.research"},
              "spec": {"resources": {"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 1}}}}
    kube.create_object(KAI_QUEUE, theirs)
    standin.fail_next(1, status=410, path_prefix="/apis/scheduling.run.ai/v2/queues", method="GET")
    result = reconcile(kai, kube)
    assert [refusal.label for refusal in result.refused] == ["Queue/training.research"]
    assert stored(kube)["training.research"]["spec"] == theirs["spec"]
    assert "Queue/training.research.vision" in result.created
