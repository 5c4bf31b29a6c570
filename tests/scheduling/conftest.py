"""A world to submit into: seed 002's pool (`shared_simulation_training_pool`, l40s and a100 platforms) and
role (`osmo-shared`), with `default_ctrl` left out as `config init` now does; a `training` pool with an H100
platform and spread placement off; department `research` with projects `vision` (4 guaranteed GPUs in
training, member `researcher`) and `nlp` (none guaranteed, may borrow). Nodes are rows, the backend is
online."""

import json

import pytest
from django.utils import timezone

from pools.config import writes
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pool, Role, RoleAssignment
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
    backend = Backend.objects.get(name="default")
    prefix = prefix or f"{pool[:8]}-{platform}"
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


@pytest.fixture
def world(defaults, django_user_model):
    Backend.objects.filter(name="default").update(last_sync_at=timezone.now())
    writes.import_document(ConfigKind.POD_TEMPLATE, {**L40S, **A100, **H100}, author="tests")
    pool = seed_pool()
    pool["common_pod_template"] = ["default_user"]
    training = {**seed_pool(), "name": "training", "default_platform": "h100", "common_pod_template": ["default_user"],
                "max_exec_timeout": "1d", "platforms": {"h100": {"override_pod_template": ["h100"]}}}
    writes.import_document(ConfigKind.POOL, {"pools": {SHARED: pool, "training": training}}, author="tests")
    writes.import_document(ConfigKind.ROLE, seed_role(), author="tests")
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-training", "policies": [{"actions": [
        {"base": "http", "path": "/api/pool/training*", "method": "post"}]}]}, author="tests")
    writes.import_document(ConfigKind.DEPARTMENT, {"research": {"name": "research"}}, author="tests")
    project("vision", pools={"training": {"deserved": 4, "limit": 12}, SHARED: {"deserved": 2}},
            users=["researcher"], default_pools=["training"])
    project("nlp", pools={"training": {"deserved": 0, "over_quota_weight": "Medium"}}, users=["researcher", "other"],
            default_pools=["training"])
    add_nodes(SHARED, "l40s_platform", 2, gpus=4, product="NVIDIA-L40S")
    add_nodes(SHARED, "a100_platform", 1, gpus=8, product="NVIDIA-A100")
    add_nodes("training", "h100", 2, gpus=8)
    add_nodes("default", "default", 1, gpus=0, product="", prefix="cpu")
    researcher = django_user_model.objects.create_user("researcher", password="pw-res-123")
    other = django_user_model.objects.create_user("other", password="pw-oth-123")
    for role in ("osmo-shared", "osmo-training"):
        RoleAssignment.objects.create(user=researcher, role=Role.objects.get(name=role))
    RoleAssignment.objects.create(user=other, role=Role.objects.get(name="osmo-training"))
    return {"researcher": researcher, "other": other}


@pytest.fixture
def researcher_api(world):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(world["researcher"])
    return client


def body(**fields) -> dict:
    request = {"name": "train-resnet", "project": "vision", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
               "command": ["python", "train.py"], "resources": {"gpu": 1, "cpu": "4", "memory": "16Gi"}}
    request.update(fields)
    return request
