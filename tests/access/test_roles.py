"""Roles as versioned configuration: seed 002's document through the CLI and the API, history,
refusals naming the field, immutable roles and generated pool roles."""

import json

import pytest
from django.core.management import CommandError

from pools.config import writes
from pools.models import Backend, ConfigKind, ConfigRevision, Pool, Role, RoleAssignment
from tests.conftest import seed_json_blocks
from tests.support.commands import run

pytestmark = pytest.mark.django_db

SEED_ROLE_TEXT = seed_json_blocks("002")[3]
SEED_ROLE = json.loads(SEED_ROLE_TEXT)
# Its URL, from its name (`osmo-shared`, as seed 002 prints it).
SEED_ROLE_URL = f"/api/configs/role/{SEED_ROLE['name']}/"
FULL_ROLE = {
    "name": "vision",
    "description": "Vision team",
    "policies": [
        {"actions": [{"base": "http", "path": "/api/pool/vision*", "method": "POST"}]},
        {"actions": [{"base": "http", "path": "!/api/pool/vision-secret*", "method": "*"}]},
    ],
    "immutable": False,
    "sync_mode": "force",
    "external_roles": ["vision-researchers", "vision-leads"],
}


def config(*args) -> str:
    return run("config", "--author", "role-test", *args)


def set_role_from(tmp_path, name: str, text: str) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(text)
    return config("set", "ROLE", name, "-f", str(path))


def put(client, url, body):
    return client.put(url, data=body if isinstance(body, str) else json.dumps(body), content_type="application/json")


def make_pool(name: str) -> Pool:
    if not Backend.objects.filter(name="default").exists():
        run("backend", "add", "default", "--simulated")
    run("config", "update", "POOL", "-f", "-", stdin=json.dumps({"pools": {name: {"backend": "default"}}}))
    return Pool.objects.get(name=name)


# ---- seed 002 as printed --------------------------------------------------------------------------------

def test_the_seed_002_role_is_set_with_the_cli_as_printed_and_shown_back_unchanged(tmp_path):
    assert SEED_ROLE["name"] == "osmo-shared" and "actions" in SEED_ROLE

    output = set_role_from(tmp_path, "osmo-shared", SEED_ROLE_TEXT)

    assert output.startswith("ROLE: created osmo-shared (revision 1)")
    assert json.loads(config("show", "ROLE", "osmo-shared")) == SEED_ROLE
    assert "unchanged" in set_role_from(tmp_path, "osmo-shared", config("show", "ROLE", "osmo-shared"))


def test_the_seed_002_role_is_put_over_the_api_and_read_back_unchanged(api):
    response = put(api, SEED_ROLE_URL, SEED_ROLE_TEXT)

    assert response.status_code == 200, response.content
    assert response.json()["created"] == ["osmo-shared"]
    assert api.get(SEED_ROLE_URL).json() == SEED_ROLE
    assert api.get("/api/configs/role/").json() == {"roles": {"osmo-shared": SEED_ROLE}}


def test_the_full_osmo_shape_round_trips_with_sync_mode_and_external_roles(api):
    assert put(api, "/api/configs/role/", {"roles": [FULL_ROLE]}).status_code == 200

    role = Role.objects.get(name="vision")
    exported = api.get("/api/configs/role/vision/").json()

    assert role.sync_mode == "force" and role.external_roles == ["vision-researchers", "vision-leads"]
    assert exported == {key: value for key, value in FULL_ROLE.items() if key != "immutable"}
    assert put(api, "/api/configs/role/vision/", exported).json()["unchanged"] == ["vision"]


def test_one_policy_given_as_policies_exports_in_the_short_shape_and_means_the_same():
    document = {"name": "r1", "policies": [{"actions": SEED_ROLE["actions"]}]}
    writes.import_document(ConfigKind.ROLE, document)

    exported = writes.export(ConfigKind.ROLE, "r1")

    assert exported == {"name": "r1", "description": "", "actions": SEED_ROLE["actions"]}
    assert writes.import_document(ConfigKind.ROLE, exported).unchanged == ["r1"]


# ---- history ---------------------------------------------------------------------------------------------

def test_role_changes_are_numbered_revisions_that_diff_and_roll_back(api):
    put(api, SEED_ROLE_URL, SEED_ROLE)
    changed = {**SEED_ROLE, "description": "changed"}
    put(api, f"{SEED_ROLE_URL}?description=why", changed)

    history = api.get("/api/configs/history/?type=role").json()["revisions"]
    diff = api.get("/api/configs/history/diff/?type=role&revision=2").json()["diff"]
    rolled = api.post("/api/configs/history/rollback/", {"type": "role", "revision": 1}, format="json")

    assert [(r["revision"], r["action"], r["description"]) for r in history] == [(2, "update", "why"),
                                                                                 (1, "create", "")]
    assert '-  "description": "Role for shared simulation training pool"' in diff
    assert '+  "description": "changed"' in diff
    assert rolled.status_code == 200 and rolled.json()["revisions"] == [3]
    assert writes.export(ConfigKind.ROLE, "osmo-shared") == SEED_ROLE


def test_deleting_a_role_records_it_and_takes_it_from_its_users(api, member):
    put(api, SEED_ROLE_URL, SEED_ROLE)
    run("user", "add-role", member.get_username(), "osmo-shared")

    response = api.delete(SEED_ROLE_URL)

    assert response.status_code == 200 and response.json()["deleted"] == ["osmo-shared"]
    assert not RoleAssignment.objects.exists()
    revision = ConfigRevision.objects.get(kind=ConfigKind.ROLE, action="delete")
    assert revision.document == SEED_ROLE
    writes.rollback(ConfigKind.ROLE, 1)
    assert Role.objects.filter(name="osmo-shared").exists()


def test_the_cli_lists_role_history():
    writes.import_document(ConfigKind.ROLE, SEED_ROLE)

    assert "ROLE  1    osmo-shared  create" in config("history", "ROLE")


# ---- refusals --------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("document", "field", "words"), [
    ({"name": "r", "actions": [{"base": "http", "path": "/x", "method": "FETCH"}]}, "r.actions[0].method",
     "not one of"),
    ({"name": "r", "actions": [{"base": "grpc", "path": "/x", "method": "GET"}]}, "r.actions[0].base", "http"),
    ({"name": "r", "actions": [{"base": "http", "path": "!", "method": "GET"}]}, "r.actions[0].path", "empty"),
    ({"name": "r", "actions": [{"base": "http", "method": "GET"}]}, "r.actions[0].path", "required"),
    ({"name": "r", "actoins": []}, "r.actoins", "unknown field"),
    ({"name": "r", "sync_mode": "sometimes"}, "r.sync_mode", "import"),
    ({"name": "r", "actions": [], "policies": []}, "r.policies", "not both"),
    ({"name": "r", "external_roles": "vision"}, "r.external_roles", "list"),
    ({"name": "bad name!"}, "name", "invalid"),
    ({"name": "r" * 129}, "name", "at most 128"),
])
def test_a_bad_role_is_refused_whole_naming_the_field(api, document, field, words):
    response = put(api, "/api/configs/role/", document)

    assert response.status_code == 400
    assert response.json()["field"] == field
    assert words in response.json()["detail"]
    assert not Role.objects.exists() and not ConfigRevision.objects.filter(kind=ConfigKind.ROLE).exists()


def test_a_role_document_naming_another_role_than_the_url_is_refused(api):
    response = put(api, "/api/configs/role/osmo-other/", SEED_ROLE)

    assert response.status_code == 400
    assert response.json()["field"] in ("name", "osmo-other.name")


def test_malformed_role_json_is_refused_with_line_and_column(tmp_path):
    with pytest.raises(CommandError, match=r"malformed JSON at line 2, column"):
        set_role_from(tmp_path, "r", '{"name": "r",\n  "actions": [}')


def test_config_set_needs_a_file_or_a_template(tmp_path):
    with pytest.raises(CommandError, match="either -f FILE"):
        config("set", "ROLE", "osmo-x")


# ---- immutable -------------------------------------------------------------------------------------------

def test_an_immutable_role_can_be_neither_changed_nor_deleted(api):
    writes.import_document(ConfigKind.ROLE, {**SEED_ROLE, "immutable": True})

    changed = put(api, SEED_ROLE_URL, {**SEED_ROLE, "immutable": True, "description": "x"})
    unflagged = put(api, SEED_ROLE_URL, SEED_ROLE)
    deleted = api.delete(SEED_ROLE_URL)
    same = put(api, SEED_ROLE_URL, {**SEED_ROLE, "immutable": True})

    assert changed.status_code == unflagged.status_code == deleted.status_code == 400
    assert "immutable" in changed.json()["detail"] and "immutable" in deleted.json()["detail"]
    assert same.status_code == 200 and same.json()["unchanged"] == ["osmo-shared"]
    assert Role.objects.get(name="osmo-shared").description == SEED_ROLE["description"]


# ---- generated roles (seed 000, step 4) -------------------------------------------------------------------

def test_config_set_role_osmo_pool_pool_generates_the_pools_role():
    make_pool("heterogeneous_pool")

    output = config("set", "ROLE", "osmo-heterogeneous_pool", "pool")

    assert output.startswith("ROLE: created osmo-heterogeneous_pool")
    role = Role.objects.get(name="osmo-heterogeneous_pool")
    assert role.rules().pool_grant("heterogeneous_pool") is not None
    assert json.loads(config("show", "ROLE", "osmo-heterogeneous_pool"))["actions"] == [
        {"base": "http", "path": "/api/pool/heterogeneous_pool*", "method": "post"},
        {"base": "http", "path": "/api/profile/*", "method": "*"},
    ]
    assert "unchanged" in config("set", "ROLE", "osmo-heterogeneous_pool", "pool")


@pytest.mark.parametrize(("name", "words"), [("osmo-nothing", "No pool name begins with 'nothing'"),
                                             ("heterogeneous_pool", "osmo-<pool>")])
def test_a_pool_role_is_refused_for_a_pool_that_does_not_exist_or_a_name_outside_the_rule(name, words):
    make_pool("heterogeneous_pool")

    with pytest.raises(CommandError, match=words):
        config("set", "ROLE", name, "pool")
    assert not Role.objects.exists()


def test_an_admin_role_is_generated_too_and_allows_everything():
    config("set", "ROLE", "osmo-admin", "admin")

    rules = Role.objects.get(name="osmo-admin").rules()
    assert rules.decide("PUT", "/api/configs/pool/x/") is not None
    assert rules.pool_grant("any-pool") is not None


def test_the_api_generates_a_pool_role_like_the_cli(api):
    make_pool("heterogeneous_pool")

    response = api.post("/api/configs/role/osmo-heterogeneous_pool/pool/")
    unknown = api.post("/api/configs/role/osmo-heterogeneous_pool/cake/")

    assert response.status_code == 200, response.content
    assert response.json()["created"] == ["osmo-heterogeneous_pool"]
    assert response.json()["role"]["actions"][0]["path"] == "/api/pool/heterogeneous_pool*"
    assert unknown.status_code == 400 and unknown.json()["field"] == "template"
