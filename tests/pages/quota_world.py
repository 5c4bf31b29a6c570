"""Departments, projects, quotas and pods on top of the pages' small fleet (tests/pages/conftest.py):

- pool alpha-pool (role osmo-alpha may use it): 3 nodes, 2 of them Ready (16 GPUs usable);
  department research deserves 10 GPUs there; its projects vision (members: role osmo-alpha, so alice) deserves
  6, limit 12, weight High, and runs 8 GPUs; nlp (member: user bob) deserves 4 and runs 1;
- pool bravo-secret (alice may not use it): department product, project secret (member: user carol) deserves 8.
"""

from pools.config import writes
from pools.models import Backend, ConfigKind, Pod
from tests.support.fleet import ALPHA, BRAVO, make_nodes


def project_document(name, department, quotas, **fields):
    return {"name": name, "department": department, "namespace": f"proj-{name}",
            "resources": [{"node_pool": pool, "gpu": gpu} for pool, gpu in quotas.items()], **fields}


def pods(namespace, node, gpus, count=1, pool="", prefix="p"):
    """Pod rows as the sync writes them, written directly (the quota pages' many states, each in one line);
    allocation from the stand-in's pods through the sync is tests/test_figures_journey.py's."""
    backend = Backend.objects.get(name="default")
    Pod.objects.bulk_create(Pod(backend=backend, uid=f"{namespace}-{node}-{pool}-{prefix}{i}", namespace=namespace,
                                name=f"{prefix}{i}", node_name=node, phase="Running", gpu=gpus, pool=pool)
                            for i in range(count))


def build():
    make_nodes(3, [ALPHA], prefix="a")
    make_nodes(2, [BRAVO], prefix="b", start=1)
    writes.import_document(ConfigKind.DEPARTMENT, [
        {"name": "research", "resources": [{"node_pool": ALPHA, "gpu": {"deserved": 10}}]},
        {"name": "product"}], author="tests")
    writes.import_document(ConfigKind.PROJECT, [
        project_document("vision", "research", {ALPHA: {"deserved": 6, "limit": 12, "over_quota_weight": "High"}},
                         members={"roles": ["osmo-alpha"]}, default_node_pools=[ALPHA, BRAVO]),
        project_document("nlp", "research", {ALPHA: {"deserved": 4}}, members={"users": ["bob"]}),
        project_document("secret", "product", {BRAVO: {"deserved": 8}}, members={"users": ["carol"]}),
    ], author="tests")
    pods("proj-vision", "a-0001", 4, count=2, pool=ALPHA)
    pods("proj-nlp", "a-0002", 1, pool=ALPHA)
