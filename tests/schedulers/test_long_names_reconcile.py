"""The engines' objects of a pool, platform, department and project with the longest names the configuration
accepts, reconciled against the stand-in through the real client: all accepted, the full names kept in
annotations (the Kueue project's namespace too), and a second run writes nothing."""

import pytest

from pools.cluster.kinds import KAI_QUEUE, KAI_TOPOLOGY, KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE
from pools.config import writes
from pools.engine import kube_names
from pools.models import Backend, ConfigKind, Pool
from pools.quotas.documents import default_namespace
from pools.schedulers.reconcile import reconcile
from tests.scheduling.conftest import project, seed_pool

pytestmark = pytest.mark.django_db
PREFIX = "runwhere.ai/"
POOL = "Training_" + "X" * 110 + ".v2"
PLATFORM = "h100_" + "P" * 120 + "9"
DEPARTMENT = "Research." + "R" * 115 + "_1"
PROJECT = "Vision_" + "Y" * 119 + "-7"


@pytest.fixture
def long_names(world):
    pool = {**seed_pool(), "name": POOL, "default_platform": PLATFORM, "common_pod_template": ["default_user"],
            "platforms": {PLATFORM: {"override_pod_template": ["h100"]}}}
    writes.import_document(ConfigKind.POOL, {"pools": {POOL: pool}}, author="tests")
    Pool.objects.filter(name=POOL).update(topology_keys=[{"key": "zone", "label": "topology.kubernetes.io/zone"}])
    writes.import_document(ConfigKind.DEPARTMENT, {DEPARTMENT: {"name": DEPARTMENT}}, author="tests")
    project(PROJECT, department=DEPARTMENT, pools={POOL: {"deserved": 4}})


def full_names(obj: dict) -> dict[str, str]:
    return {key: kube_names.full_value(obj["metadata"], PREFIX + key) for key in ("pool", "department", "project")
            if PREFIX + key in obj["metadata"]["labels"]}


@pytest.mark.parametrize("scheduler", [Backend.Scheduler.KAI, Backend.Scheduler.KUEUE])
def test_the_engines_objects_of_the_longest_names_are_accepted_and_keep_the_full_names(standin, kube, long_names,
                                                                                      scheduler):
    standin.strict_namespaces = True
    Backend.objects.filter(name="default").update(scheduler=scheduler)
    backend = Backend.objects.get(name="default")
    first = reconcile(backend, kube)
    assert first.created and not first.refused

    if scheduler == Backend.Scheduler.KAI:
        (leaf,) = [q for q in standin.objects(KAI_QUEUE)
                   if full_names(q) == {"pool": POOL, "department": DEPARTMENT, "project": PROJECT}]
        (topology,) = [t for t in standin.objects(KAI_TOPOLOGY) if full_names(t) == {"pool": POOL}]
        assert len(leaf["metadata"]["name"]) <= 63 and len(topology["metadata"]["name"]) <= 63
    else:
        (queue,) = [q for q in standin.objects(KUEUE_CLUSTER_QUEUE) if full_names(q).get("project") == PROJECT]
        assert full_names(queue) == {"department": DEPARTMENT, "project": PROJECT}
        namespace = default_namespace(PROJECT)
        assert [q["metadata"]["namespace"] for q in standin.objects(KUEUE_LOCAL_QUEUE)
                if full_names(q).get("project") == PROJECT] == [namespace]
        metadata = standin.namespace(namespace)["metadata"]
        assert metadata["annotations"] == {f"{PREFIX}project": PROJECT}
        assert metadata["labels"][f"{PREFIX}project"] == kube_names.label_value(PROJECT)

    again = reconcile(backend, kube)
    assert again.writes == 0 and again.unchanged == first.writes
