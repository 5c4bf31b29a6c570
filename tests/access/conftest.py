"""Five principals around one small world of pools and nodes:
anonymous, `nobody` (signed in, no roles), `teammate` (osmo-team, seed 001), `policy_user` (a role with
path policies and a deny) and `staff`."""

import pytest
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pool, Role, RoleAssignment

# Seed 001: role osmo-team may use the first three and not the next two.
TEAM_POOLS = ["teamcluster01", "team-cluster-02", "team-gpu-pool"]
NOT_TEAM_POOLS = ["myteam-cluster-01", "other-team-pool"]
POLICY_POOLS = ["sim-a", "sim-secret"]
POOLS = ["default", *TEAM_POOLS, *NOT_TEAM_POOLS, *POLICY_POOLS]

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
    return nodes | {"node-orphan"} if principal == "staff" else nodes


@pytest.fixture
def world(db):
    backend = Backend.objects.create(name="default", kind=Backend.Kind.SIMULATED)
    pools = Pool.objects.bulk_create([Pool(name=name, backend=backend) for name in POOLS])
    nodes = Node.objects.bulk_create([Node(backend=backend, name=node_of(pool.name)) for pool in pools])
    Node.objects.create(backend=backend, name="node-orphan")
    NodeMembership.objects.bulk_create([NodeMembership(node=node, pool=pool) for node, pool in zip(nodes, pools,
                                                                                                strict=True)])
    writes.import_document(ConfigKind.ROLE, TEAM_ROLE, author="tests")
    writes.import_document(ConfigKind.ROLE, POLICY_ROLE, author="tests")


def give(user, *role_names: str):
    for name in role_names:
        RoleAssignment.objects.create(user=user, role=Role.objects.get(name=name), assigned_by="tests")
    return user


@pytest.fixture
def nobody(world, django_user_model):
    return django_user_model.objects.create_user("nobody", password="pw-nobody-1")


@pytest.fixture
def teammate(world, django_user_model):
    return give(django_user_model.objects.create_user("teammate", password="pw-team-1"), "osmo-team")


@pytest.fixture
def policy_user(world, django_user_model):
    return give(django_user_model.objects.create_user("policy", password="pw-policy-1"), "sim-users")


@pytest.fixture
def anonymous(world):
    return None


@pytest.fixture
def client_as(request, world):
    """client_as("teammate") -> an API client signed in (by session) as that principal."""
    def make(principal: str, **kwargs) -> APIClient:
        client = APIClient(**kwargs)
        user = request.getfixturevalue(principal)
        if user is not None:
            client.force_login(user)
        return client
    return make
