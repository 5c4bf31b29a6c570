"""Five principals around one small world of pools and nodes:
anonymous, `nobody` (signed in, no roles), `teammate` (osmo-team, seed 001), `policy_user` (a role with
path policies and a deny) and `staff`.

Each pool has a node of its own (`node-<pool>`), and one node, `node-shared-zq`, sits in three pools at
once: `team-gpu-pool` (which the teammate sees), `sim-a` (which the policy user sees) and `hiddenpool-zq`
(staff only), each through a platform of its own. Whoever sees that node through one pool must not learn
the names of the others or of their platforms. The names are distinctive so that tests can look for them
in the raw bytes of any answer."""

import pytest
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import Backend, ConfigKind, Node, NodeMembership, Platform, Pool, Role, RoleAssignment

# Seed 001: role osmo-team may use the first three and not the next two.
TEAM_POOLS = ["teamcluster01", "team-cluster-02", "team-gpu-pool"]
NOT_TEAM_POOLS = ["myteam-cluster-01", "other-team-pool"]
POLICY_POOLS = ["sim-a", "sim-secret"]
HIDDEN_POOL = "hiddenpool-zq"  # no role grants it: staff only
POOLS = ["default", *TEAM_POOLS, *NOT_TEAM_POOLS, *POLICY_POOLS, HIDDEN_POOL]

# The node shared by pools that different principals see, and the platform it is in, per pool.
SHARED_NODE = "node-shared-zq"
SHARED_PLATFORMS = {"team-gpu-pool": "teamplat-zq", "sim-a": "simplat-zq", HIDDEN_POOL: "hiddenplat-zq"}
HIDDEN_PLATFORM = SHARED_PLATFORMS[HIDDEN_POOL]

TEAM_ROLE = {"name": "osmo-team", "description": "Seed 001's team role", "actions": []}
POLICY_ROLE = {
    "name": "sim-users",
    "description": "Simulation pools except the secret one",
    "actions": [
        {"base": "http", "path": "/api/pool/sim*", "method": "post"},
        {"base": "http", "path": "!/api/pool/sim-secret*", "method": "*"},
        {"base": "http", "path": "http:/api/profile/*", "method": "*"},
    ],
}

PRINCIPALS = ["anonymous", "nobody", "teammate", "policy_user", "staff"]
VISIBLE = {
    "anonymous": set(),
    "nobody": {"default"},
    "teammate": {"default", *TEAM_POOLS},
    "policy_user": {"default", "sim-a"},
    "staff": set(POOLS),
}


def node_of(pool: str) -> str:
    return f"node-{pool}"


def visible_nodes(principal: str) -> set[str]:
    nodes = {node_of(pool) for pool in VISIBLE[principal]}
    if VISIBLE[principal] & SHARED_PLATFORMS.keys():
        nodes.add(SHARED_NODE)
    return nodes | {"node-orphan"} if principal == "staff" else nodes


def hidden_platforms(principal: str) -> list[str]:
    """The platform names `principal` must never see: those of the shared node's pools they may not use."""
    return [platform for pool, platform in SHARED_PLATFORMS.items() if pool not in VISIBLE[principal]]


@pytest.fixture
def shared_node_pools(db):
    build_shared_node_pools()


def build_shared_node_pools():
    """The pools of the module docstring, each with its node, the node they share, and roles osmo-team and
    sim-users. The pools, nodes and platforms are rows written by hand: bare pools and nodes with no cluster behind
    them (a pool written through the configuration gets its templates and re-derives the nodes), the least the
    matrix's thousand cases need to tell each principal's names apart."""
    backend = Backend.objects.create(name="default", kind=Backend.Kind.SIMULATED)
    pools = Pool.objects.bulk_create([Pool(name=name, backend=backend) for name in POOLS])
    nodes = Node.objects.bulk_create([Node(backend=backend, name=node_of(pool.name)) for pool in pools])
    Node.objects.create(backend=backend, name="node-orphan")
    NodeMembership.objects.bulk_create([NodeMembership(node=node, pool=pool) for node, pool in zip(nodes, pools,
                                                                                                strict=True)])
    by_name = {pool.name: pool for pool in pools}
    Platform.objects.bulk_create([Platform(pool=by_name[pool], name=name) for pool, name in SHARED_PLATFORMS.items()])
    shared = Node.objects.create(
        backend=backend, name=SHARED_NODE, gpu_total=8, sharing=Node.Sharing.SHARED,
        pool_names=sorted(SHARED_PLATFORMS),
        platform_names=sorted(f"{pool}/{name}" for pool, name in SHARED_PLATFORMS.items()))
    NodeMembership.objects.bulk_create([NodeMembership(node=shared, pool=by_name[pool], platforms=[name])
                                        for pool, name in SHARED_PLATFORMS.items()])
    writes.import_document(ConfigKind.ROLE, TEAM_ROLE, author="tests")
    writes.import_document(ConfigKind.ROLE, POLICY_ROLE, author="tests")


def give(user, *role_names: str):
    # By hand: the matrix makes its principals per case, a thousand times; `user add-role` is the door
    # (tests/access/test_user_command.py).
    for name in role_names:
        RoleAssignment.objects.create(user=user, role=Role.objects.get(name=name), assigned_by="tests")
    return user


@pytest.fixture
def nobody(shared_node_pools, django_user_model):
    return django_user_model.objects.create_user("nobody", password="pw-nobody-1")


@pytest.fixture
def teammate(shared_node_pools, django_user_model):
    return give(django_user_model.objects.create_user("teammate", password="pw-team-1"), "osmo-team")


@pytest.fixture
def policy_user(shared_node_pools, django_user_model):
    return give(django_user_model.objects.create_user("policy", password="pw-policy-1"), "sim-users")


@pytest.fixture
def anonymous(shared_node_pools):
    return None


@pytest.fixture
def client_as(request, shared_node_pools):
    """client_as("teammate") -> an API client signed in (by session) as that principal."""
    def make(principal: str, **kwargs) -> APIClient:
        client = APIClient(**kwargs)
        user = request.getfixturevalue(principal)
        if user is not None:
            client.force_login(user)
        return client
    return make
