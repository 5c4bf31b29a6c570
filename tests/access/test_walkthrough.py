"""Seed 000's walk-through end to end: create a pool, generate its role, assign the role to a user;
the user then sees and may use that pool and no other. Once by API, once by CLI."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from pools.models import Pool
from pools.models.visibility import access_for

pytestmark = pytest.mark.django_db
POOL = "heterogeneous_pool"
POOL_DOCUMENT = {"name": POOL, "backend": "default", "description": "Heterogeneous pool", "platforms": {}}


def sees(client) -> set[str]:
    return {pool["name"] for pool in client.get("/api/profile/").json()["pools"]}


def test_the_walk_through_by_api(api, defaults, django_user_model):
    assert api.put("/api/configs/pool/other_pool/", json.dumps({**POOL_DOCUMENT, "name": "other_pool"}),
                   content_type="application/json").status_code == 200
    steps = [
        api.put(f"/api/configs/pool/{POOL}/", json.dumps(POOL_DOCUMENT), content_type="application/json"),
        api.post(f"/api/configs/role/osmo-{POOL}/pool/"),
        api.post("/api/auth/user", {"id": "researcher@example.com"}, format="json"),
        api.post("/api/auth/user/researcher@example.com/roles", {"role_name": f"osmo-{POOL}"}, format="json"),
    ]
    assert [step.status_code for step in steps] == [200, 200, 201, 201], [s.content for s in steps]

    researcher = django_user_model.objects.get(username="researcher@example.com")
    client = APIClient()
    client.force_login(researcher)

    assert sees(client) == {"default", POOL}
    assert access_for(researcher).may_use_pool(POOL)
    assert not access_for(researcher).may_use_pool("other_pool")
    assert client.get("/api/configs/pool/").status_code == 403


def test_the_walk_through_by_cli(tmp_path, defaults, django_user_model):
    path = tmp_path / "platform_config.json"
    path.write_text(json.dumps(POOL_DOCUMENT))
    out = StringIO()
    call_command("config", "update", "POOL", POOL, "--file", str(path), stdout=out)
    call_command("config", "set", "ROLE", f"osmo-{POOL}", "pool", stdout=out)
    researcher = django_user_model.objects.create_user("researcher")
    staff = django_user_model.objects.create_user("ops-cli", is_staff=True)
    admin = APIClient()
    admin.force_login(staff)
    assert admin.post("/api/auth/user/researcher/roles", {"role_name": f"osmo-{POOL}"},
                      format="json").status_code == 201
    secret = StringIO()
    call_command("token", "create", "researcher", "laptop", stdout=secret, stderr=StringIO())

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret.getvalue().strip()}")

    assert sees(client) == {"default", POOL}
    assert set(Pool.objects.visible_to(researcher).values_list("name", flat=True)) == {"default", POOL}
