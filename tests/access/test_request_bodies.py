"""Every POST and PUT body of the API goes through one JSON parser and one serializer (configuration
documents: the kind's document models): a refusal is 400 `{"detail", "field"}` naming the field, and
changes nothing."""

import datetime as dt
import json

import pytest
from django.utils import timezone

from pools.models import AccessToken, ConfigRevision, Node, RoleAssignment
from tests.access.conftest import node_of

pytestmark = pytest.mark.django_db
FUTURE = (timezone.now() + dt.timedelta(days=10)).date().isoformat()
NODE = node_of("sim-a")


def snapshot() -> tuple:
    return (ConfigRevision.objects.count(), RoleAssignment.objects.count(), AccessToken.objects.count(),
            list(Node.objects.order_by("pk").values_list("labels", "unschedulable")))


REFUSED = [
    # (url, body, field)
    ("/api/auth/user", {}, "id"),
    ("/api/auth/user", {"id": 7}, "id"),
    ("/api/auth/user", {"id": "x" * 151}, "id"),
    ("/api/auth/user", {"id": "a/b"}, "id"),
    ("/api/auth/user", {"id": "a", "roles": [1]}, "roles.0"),
    ("/api/auth/user", {"id": "a", "roles": None}, "roles"),
    ("/api/auth/user/nobody/roles", {"role_name": ["osmo-team"]}, "role_name"),
    ("/api/auth/user/nobody/roles", {"role_name": ""}, "role_name"),
    ("/api/auth/roles/osmo-team/users", {}, "user_ids"),
    ("/api/auth/roles/osmo-team/users", {"user_ids": ["nobody", 3]}, "user_ids.1"),
    ("/api/auth/access_token/laptop", {"expires_at": FUTURE, "roles": "osmo-team"}, "roles"),
    ("/api/auth/access_token/laptop", {"expires_at": [FUTURE]}, "expires_at"),
    ("/api/auth/user/nobody/access_token/ci", {}, "expires_at"),
    (f"/api/nodes/{NODE}/labels", {}, "labels"),
    (f"/api/nodes/{NODE}/labels", {"labels": {}}, "labels"),
    (f"/api/nodes/{NODE}/labels", {"labels": ["runwhere.ai/pool"]}, "labels"),
    (f"/api/nodes/{NODE}/labels", {"labels": {"runwhere.ai/pool": 5}}, "labels.runwhere.ai/pool"),
    (f"/api/nodes/{NODE}/labels", {"labels": {"other/key": "x"}}, "labels.other/key"),
    (f"/api/nodes/{NODE}/labels", {"labels": {"runwhere.ai/pool": "a b"}}, "labels.runwhere.ai/pool"),
    (f"/api/nodes/{NODE}/labels", {"labels": {"runwhere.ai/pool": "a"}, "overwrite": "yes"}, "overwrite"),
    (f"/api/nodes/{NODE}/cordon", {"cordon": "yes"}, "cordon"),
    (f"/api/nodes/{NODE}/cordon", {"cordon": None}, "cordon"),
    ("/api/configs/history/rollback/", {"type": 3, "revision": 1}, "type"),
    ("/api/configs/history/rollback/", {"type": "role", "revision": 1, "description": False}, "description"),
]


@pytest.mark.parametrize(("url", "body", "field"), REFUSED)
def test_a_refused_body_names_its_field_and_changes_nothing(client_as, nobody, url, body, field):
    before = snapshot()

    response = client_as("staff").post(url, body, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    assert field.split(".")[0] in response.json()["detail"]
    assert snapshot() == before


@pytest.mark.parametrize("url", ["/api/auth/user", "/api/auth/user/nobody/roles", "/api/configs/history/rollback/",
                                 f"/api/nodes/{NODE}/labels", f"/api/nodes/{NODE}/cordon",
                                 "/api/auth/access_token/laptop"])
def test_a_body_that_is_not_an_object_is_refused_without_a_field(client_as, nobody, url):
    response = client_as("staff").post(url, ["a list"], format="json")

    assert response.status_code == 400
    assert response.json() == {"detail": "Invalid data. Expected a dictionary, but got list.", "field": None}


@pytest.mark.parametrize(("method", "url"), [("post", "/api/auth/user"), ("post", f"/api/nodes/{NODE}/labels"),
                                             ("post", "/api/configs/history/rollback/"),
                                             ("put", "/api/configs/role/x/")])
def test_malformed_json_is_refused_with_its_line_and_column(client_as, method, url):
    response = getattr(client_as("staff"), method)(url, data='{\n"id": ', content_type="application/json")

    assert response.status_code == 400
    assert "malformed JSON at line 2, column 7" in response.json()["detail"]


def test_a_body_that_is_not_json_is_refused_as_an_unsupported_media_type(client_as):
    response = client_as("staff").post("/api/auth/user", data="id=a", content_type="application/x-www-form-urlencoded")

    assert response.status_code == 415
    assert not AccessToken.objects.exists()


def test_a_configuration_document_is_checked_by_its_kinds_model(client_as):
    response = client_as("staff").put("/api/configs/role/x/", data=json.dumps({"actions": [{"path": "/a"}]}),
                                      content_type="application/json")

    assert response.status_code == 400
    assert response.json()["field"] == "x.actions[0].method"


def test_a_token_body_without_roles_acts_with_every_role(client_as, teammate):
    response = client_as("teammate").post("/api/auth/access_token/laptop", {"expires_at": FUTURE, "roles": None},
                                          format="json")

    assert response.status_code == 201, response.content
    assert response.json()["roles"] is None
