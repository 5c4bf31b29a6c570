"""A small world for the quota API, CLI and admin: pools training and inference, departments research and
product, projects vision (research; the researcher is a member) and nlp (product), a role that lets the
researcher use training only (pools by role only: OSMO_PROJECT_MEMBERS_USE_POOLS off)."""

import pytest
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import Backend, ConfigKind, Pod
from tests.support.commands import run
from tests.support.fleet import make_nodes


def project_doc(name, department, quotas=None, **fields):
    return {"name": name, "department": department, "namespace": f"proj-{name}",
            "resources": [{"node_pool": pool, **resources} for pool, resources in (quotas or {}).items()], **fields}


def running_pods(namespace, node, pool, count=1, gpu=1, cpu=500, memory=2**30):
    """Pod rows as the sync writes them, written directly so that each quota test sets its allocation in one line;
    allocation from the stand-in's pods through the sync is tests/test_figures_journey.py's."""
    backend = Backend.objects.get(name="default")
    Pod.objects.bulk_create(Pod(backend=backend, uid=f"{namespace}-{node}-{pool}-{i}", namespace=namespace,
                                name=f"p{i}", node_name=node, phase="Running", gpu=gpu, cpu=cpu, memory=memory,
                                pool=pool) for i in range(count))


@pytest.fixture
def quota_world(defaults, member, settings):
    # vision has a quota in inference, which its member may not use: a site that grants pools by role only.
    settings.OSMO_PROJECT_MEMBERS_USE_POOLS = False
    writes.import_document(ConfigKind.POOL, {"pools": {
        "training": {"backend": "default", "platforms": {"h100": {}}},
        "inference": {"backend": "default", "platforms": {"h100": {}}}}}, author="tests")
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-training", "actions": []}, author="tests")
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-secret", "actions": []}, author="tests")
    run("user", "add-role", member.get_username(), "osmo-training")
    writes.import_document(ConfigKind.DEPARTMENT, [
        {"name": "research", "resources": [{"node_pool": "training", "gpu": {"deserved": 12}}]},
        {"name": "product"}], author="tests")
    writes.import_document(ConfigKind.PROJECT, [
        project_doc("vision", "research", {
            "training": {"gpu": {"deserved": 8, "limit": 16, "over_quota_weight": "High"},
                         "cpu": {"deserved": "500m"}, "memory": {"deserved": "1Gi"}},
            "inference": {"gpu": {"deserved": 2}}},
            default_node_pools=["inference", "training"],
            members={"users": [member.username], "roles": ["osmo-training", "osmo-secret"]}),
        project_doc("nlp", "product", {"training": {"gpu": {"deserved": 4}}, "inference": {"gpu": {"deserved": 4}}}),
    ], author="tests")
    make_nodes(3, ["training"], prefix="t", start=1)  # 24 GPUs, all Ready
    make_nodes(2, ["inference"], prefix="i", start=1)
    running_pods("proj-vision", "t-0001", "training", count=10)
    running_pods("proj-nlp", "t-0002", "training", count=3)
    running_pods("proj-nlp", "i-0001", "inference", count=2)


@pytest.fixture
def member_api(quota_world, member):
    """The quota world's member (vision's), by the API."""
    client = APIClient()
    client.force_authenticate(member)
    return client


@pytest.fixture
def staff_api(quota_world, api):
    """Staff (the suite's `api` client) on the quota world."""
    return api
