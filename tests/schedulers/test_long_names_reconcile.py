"""The engines' objects of a pool, platform, department and project with the longest names the configuration
accepts, reconciled against the stand-in through the real client: all accepted, the full names kept in
annotations (the Kueue project's namespace too), and a second run writes nothing."""

import pytest

from pools.cluster.kinds import KAI_QUEUE, KAI_TOPOLOGY, KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE
from pools.engine import kube_names
from pools.models import Backend
from pools.quotas.documents import default_namespace
from pools.schedulers.reconcile import reconcile
from tests.support.commands import run
from tests.support.long_names import DEPARTMENT, POOL, PREFIX, PROJECT, PROJECT_LABEL

pytestmark = pytest.mark.django_db


def full_names(obj: dict) -> dict[str, str]:
    return {key: kube_names.full_value(obj["metadata"], PREFIX + key) for key in ("pool", "department", "project")
            if PREFIX + key in obj["metadata"]["labels"]}


@pytest.mark.parametrize("scheduler", [Backend.Scheduler.KAI, Backend.Scheduler.KUEUE])
def test_the_engines_objects_of_the_longest_names_are_accepted_and_keep_the_full_names(standin, kube, long_names,
                                                                                      scheduler):
    standin.strict_namespaces = True
    if scheduler == Backend.Scheduler.KAI:
        run("backend", "add", "default", "--simulated", "--scheduler", scheduler)  # reconciled on the stand-in
    else:  # by hand: `backend add` refuses Kueue while the pool keeps the fixture's topology keys
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
        assert metadata["labels"][f"{PREFIX}project"] == PROJECT_LABEL

    again = reconcile(backend, kube)
    assert again.writes == 0 and again.unchanged == first.writes
