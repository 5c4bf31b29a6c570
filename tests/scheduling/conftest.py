"""A world to submit into: seed 002's pool (`shared_simulation_training_pool`, l40s and a100 platforms) and
role (`osmo-shared`), with `default_ctrl` left out as `config init` now does; a `training` pool with an H100
platform and spread placement off; department `research` with projects `vision` (4 guaranteed GPUs in
training, member `researcher`) and `nlp` (none guaranteed, may borrow). Nodes are rows, the backend is
online."""

import json

import pytest
from django.test import Client
from django.utils import timezone

from pools.config import writes
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pool
from scheduling.run.cycle import run_cycle
from tests.conftest import seed_json_blocks

SHARED = "shared_simulation_training_pool"
GIB = 1024 ** 3

L40S = {"l40s": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}}}}
# Seed 002 prints this template with a bracket missing; this is what it means.
A100 = {"a100": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100"}, "tolerations": [
    {"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "NVIDIA-A100", "effect": "NoSchedule"}]}}}
H100 = {"h100": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}}


def seed_pool() -> dict:
    return json.loads(seed_json_blocks("002")[2])


def seed_role() -> dict:
    return json.loads(seed_json_blocks("002")[3])


def add_nodes(pool: str, platform: str, count: int, *, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3",
              prefix: str | None = None, cpu: int = 128_000, memory: int = 1024 * GIB, **fields) -> list[Node]:
    """Node rows as the sync writes them, written directly: admission reads only these rows, and the admission
    tests need hundreds of fleets; nodes read from the stand-in through the sync are the journeys' (tests/support/
    journey.py)."""
    backend = Backend.objects.get(name="default")
    prefix = prefix or f"{pool[:8]}-{platform}".replace("_", "-")  # a node name is a DNS subdomain
    nodes = Node.objects.bulk_create(Node(
        backend=backend, name=f"{prefix}-{i:03d}", gpu_product=product, gpu_total=gpus, gpu_allocatable=gpus,
        gpu_free=gpus, cpu_allocatable=cpu, memory_allocatable=memory, storage_allocatable=2000 * GIB,
        status="Ready", pool_names=[pool], platform_names=[f"{pool}/{platform}"], last_seen=timezone.now(),
        labels={"nvidia.com/gpu.product": product} if product else {}, **fields) for i in range(count))
    pool_row = Pool.objects.get(name=pool)
    NodeMembership.objects.bulk_create(NodeMembership(node=node, pool=pool_row, platforms=[platform]) for node in nodes)
    return nodes


def project(name: str, department: str = "research", pools: dict | None = None, users=(), roles=(),
            default_pools=()) -> None:
    body = {"name": name, "department": department, "members": {"users": list(users), "roles": list(roles)},
            "default_node_pools": list(default_pools),
            "resources": [{"node_pool": pool, "gpu": gpu} for pool, gpu in (pools or {}).items()]}
    writes.import_document(ConfigKind.PROJECT, {name: body}, author="tests")


def body(**fields) -> dict:
    request = {"name": "train-resnet", "project": "vision", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
               "command": ["python", "train.py"], "resources": {"gpu": 1, "cpu": "4", "memory": "16Gi"}}
    request.update(fields)
    return request


@pytest.fixture
def researcher_client(world):
    """A browser-like client (django.test.Client) signed in as `researcher`."""
    client = Client()
    client.force_login(world["researcher"])
    return client


def post_workload(api, **fields) -> dict:
    """POST /api/workloads/ of `body(**fields)` through `api`: the created workload, as answered."""
    response = api.post("/api/workloads/", body(**fields), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.fixture
def training_queue(researcher_api):
    """In training (2 nodes of 8 H100s; vision deserves 4, limit 12): big-one (8, low) borrows and is
    admitted, big-two would pass the limit (LIMIT); wait-0 and wait-1 (2 each, normal) fill the deserved 4,
    wait-2 would pass both the limit and the deserved (LIMIT is said first)."""
    first = post_workload(researcher_api, name="big-one", resources={"gpu": 8, "cpu": "4", "memory": "16Gi"},
                          priority="low")
    second = post_workload(researcher_api, name="big-two", resources={"gpu": 8, "cpu": "4", "memory": "16Gi"},
                           priority="low")
    run_cycle()
    waiting = [post_workload(researcher_api, name=f"wait-{i}", resources={"gpu": 2, "cpu": "1", "memory": "1Gi"},
                              priority="normal") for i in range(3)]
    run_cycle()
    return {"admitted": [first, *waiting[:2]], "pending": [second, waiting[2]]}
