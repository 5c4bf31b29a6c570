"""A small fleet for the pages: two pools (`alpha-pool`, which role osmo-alpha grants, and `bravo-secret`,
which it does not), nodes created directly as rows, and a member who may use alpha only. A plugin of the whole
suite (tests/conftest.py's pytest_plugins), so that no test module imports its fixtures from another.

Node rows are written directly, not through the sync: the pool and node tables are checked from a state made only
through the doors (the stand-in cluster and the sync) in tests/test_figures_journey.py; these rows make the many
small fleets the page tests need in milliseconds instead of a sync round each."""

import datetime as dt

import pytest
from django.utils import timezone

from pools.config import writes
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pool
from tests.support.commands import run

ALPHA, BRAVO = "alpha-pool", "bravo-secret"


def pool_document(**fields):
    body = {
        "backend": "default",
        "description": "Pool for tests",
        "common_pod_template": ["default_ctrl", "default_user"],
        "common_resource_validations": ["default_cpu", "default_memory"],
        "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"},
        "default_platform": "h100",
        "platforms": {"h100": {"override_pod_template": ["gpu_toleration"]}, "cpu": {}},
    }
    body.update(fields)
    return body


def make_nodes(count: int, pool_names: list[str], *, prefix: str = "node", start: int = 0, **fields) -> list[Node]:
    """`count` nodes in each of `pool_names` (one membership per pool), written as rows in bulk. Their
    last_seen is relative to the time of this call, not of the import: a long run must not age them."""
    now = timezone.now()
    backend = Backend.objects.get(name="default")
    pools = {pool.name: pool for pool in Pool.objects.filter(name__in=pool_names)}
    nodes = []
    for index in range(start, start + count):
        defaults = {
            "gpu_product": "NVIDIA-H100-80GB-HBM3" if index % 2 else "NVIDIA-A100-SXM4-80GB",
            "gpu_total": 8, "gpu_allocatable": 8, "gpu_used": index % 9, "gpu_free": max(0, 8 - index % 9),
            "gpu_unhealthy": 0, "cpu_allocatable": 191_450, "cpu_requested": 1_500 * (index % 7),
            "memory_allocatable": 2_162_836_901_888, "memory_requested": 2**30 * index,
            "storage_allocatable": 3_456_067_615_356, "status": "Ready" if index % 4 else "Not ready (Disk pressure)",
            "reasons": [] if index % 4 else ["Disk pressure", "Memory pressure"],
            "pool_names": list(pool_names), "platform_names": [f"{name}/h100" for name in pool_names],
            "labels": {"nvidia.com/gpu.present": "true", "rack": f"r{index % 3}"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            "last_seen": now - dt.timedelta(minutes=index % 5),
        }
        defaults.update(fields)
        nodes.append(Node(backend=backend, name=f"{prefix}-{index:04d}", **defaults))
    nodes = Node.objects.bulk_create(nodes)
    NodeMembership.objects.bulk_create(NodeMembership(node=node, pool=pools[name], platforms=["h100"])
                                       for node in nodes for name in pool_names)
    return nodes


@pytest.fixture
def fleet(defaults, settings):
    writes.import_document(ConfigKind.POOL, {"pools": {ALPHA: pool_document(description="Alpha <b>team</b>"),
                                                        BRAVO: pool_document(description="Secret")}}, author="tests")
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-alpha", "description": "Alpha team", "actions": []},
                            author="tests")
    # By hand: the default backend's nodes here are make_nodes' rows, not a cluster's; no sync round can say it was
    # synced now, which keeps its pools online.
    Backend.objects.filter(name="default").update(last_sync_at=timezone.now())
    # The default pool is open to everyone unless closed; closed, "alpha only" means exactly that.
    settings.ACCESS_DEFAULT_POOL_OPEN = False
    return {"alpha": Pool.objects.get(name=ALPHA), "bravo": Pool.objects.get(name=BRAVO)}


@pytest.fixture
def alpha_member(fleet, django_user_model):
    user = django_user_model.objects.create_user("alice", password="pw-alice-1")
    run("user", "add-role", "alice", "osmo-alpha")
    return user
