"""The world of workloads as a plugin of the whole suite (tests/conftest.py's pytest_plugins), so that modules
outside tests/scheduling/ use it without importing a fixture: seed 002's pool and role, a `training` pool,
department `research` with projects `vision` and `nlp`, users `researcher` and `other` (tests/scheduling/conftest.py
holds the helpers it is built with)."""

import pytest
from django.utils import timezone

from pools.config import writes
from pools.models import Backend, ConfigKind
from tests.scheduling.conftest import A100, H100, L40S, SHARED, add_nodes, project, seed_pool, seed_role
from tests.support.commands import run


@pytest.fixture
def world(defaults, django_user_model):
    # By hand: the default backend has no cluster here (its nodes are add_nodes' rows), so no sync round can say it
    # was synced now, which keeps its pools online.
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
    run("user", "add-role", "researcher", "osmo-shared", "osmo-training")
    run("user", "add-role", "other", "osmo-training")
    return {"researcher": researcher, "other": other}


@pytest.fixture
def researcher_api(world):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(world["researcher"])
    return client


@pytest.fixture
def kai(world):
    """The world's default backend, scheduled by KAI."""
    run("backend", "add", "default", "--simulated", "--scheduler", "kai")
    return Backend.objects.get(name="default")
