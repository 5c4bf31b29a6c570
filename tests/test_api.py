"""The configuration API at /api/configs/: documents in OSMO's shapes, whole-or-nothing writes,
numbered revisions, and staff-only access."""

import copy
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import Backend, ConfigKind, ConfigRevision, Platform, PodTemplate, Pool
from tests.conftest import seed_json_blocks

pytestmark = pytest.mark.django_db

SEED_POOL_NAME = "shared_simulation_training_pool"
L40S = {"l40s": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-L40S"}}}}
A100 = {
    "a100": {
        "spec": {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100"},
            "tolerations": [
                {"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "NVIDIA-A100",
                 "effect": "NoSchedule"},
            ],
        }
    }
}


def put(client, url, body):
    text = body if isinstance(body, str) else json.dumps(body)
    return client.put(url, data=text, content_type="application/json")


def seed_block(marker: str) -> str:
    [block] = [block for block in seed_json_blocks("002") if marker in block]
    return block


def seed_pool_document() -> dict:
    return json.loads(seed_block(f'"name": "{SEED_POOL_NAME}"'))


def pool_body(**overrides) -> dict:
    body = {
        "backend": "default",
        "description": "a pool",
        "default_platform": "main",
        "common_pod_template": ["default_ctrl", "default_user"],
        "common_resource_validations": ["default_cpu"],
        "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"},
        "platforms": {"main": {}},
    }
    body.update(overrides)
    return body


def revision_count(kind=None) -> int:
    revisions = ConfigRevision.objects.all()
    return revisions.filter(kind=kind).count() if kind else revisions.count()


@pytest.fixture
def gpu_templates(api, defaults):
    for name, document in (("l40s", L40S), ("a100", A100)):
        response = put(api, f"/api/configs/pod_template/{name}/", document)
        assert response.status_code == 200, response.content


@pytest.fixture
def seed_pool(api, gpu_templates):
    response = put(api, f"/api/configs/pool/{SEED_POOL_NAME}/?description=why", seed_pool_document())
    assert response.status_code == 200, response.content
    return response.json()


# ---- reading documents ------------------------------------------------------------------------------

def test_it_lists_every_pool_under_a_pools_key(api, defaults):
    writes.import_document(ConfigKind.POOL, {"pools": {"training": pool_body(description="for training")}})

    response = api.get("/api/configs/pool/")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"pools"}
    assert set(body["pools"]) == {"default", "training"}
    assert body["pools"]["training"]["description"] == "for training"
    # default_ctrl stays in the catalog but no pool uses it: its container has no image to run.
    assert body["pools"]["default"]["common_pod_template"] == ["default_user"]
    assert body["pools"]["default"]["platforms"] == {"default": {
        "description": "", "host_network_allowed": False, "privileged_allowed": False, "default_variables": {},
        "resource_validations": [], "override_pod_template": [], "allowed_mounts": []}}


def test_it_returns_one_pool_wrapped_in_pools_by_name(api, defaults):
    writes.import_document(ConfigKind.POOL, {"pools": {"training": pool_body()}})

    response = api.get("/api/configs/pool/default/")

    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["pools"]
    assert list(body["pools"]) == ["default"]
    assert body["pools"]["default"]["backend"] == "default"
    assert body["pools"]["default"]["default_platform"] == "default"


def test_it_returns_pod_templates_as_a_map_of_name_to_body(api, defaults):
    response = api.get("/api/configs/pod_template/")

    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"default_ctrl", "default_user", "gpu_toleration"}
    assert body["gpu_toleration"] == {
        "spec": {
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
        }
    }


def test_it_returns_one_resource_validation_as_its_rule_list(api, defaults):
    response = api.get("/api/configs/resource_validation/default_cpu/")

    assert response.status_code == 200
    body = response.json()
    assert list(body) == ["default_cpu"]
    rules = body["default_cpu"]
    assert isinstance(rules, list)
    assert [rule["operator"] for rule in rules] == ["LE", "GT"]
    assert rules[0]["left_operand"] == "{{USER_CPU}}"
    assert rules[0]["right_operand"] == "{{K8_CPU}}"


def test_it_answers_404_with_a_json_body_for_a_missing_object(api, defaults):
    response = api.get("/api/configs/pool/no-such-pool/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert "no-such-pool" in response.json()["detail"]


def test_it_answers_404_with_a_json_body_for_an_unknown_type(api, defaults):
    response = api.get("/api/configs/widget/")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert "widget" in response.json()["detail"]


# ---- writing documents ------------------------------------------------------------------------------

def test_it_creates_a_pod_template_from_a_raw_json_put(api, defaults):
    before = revision_count(ConfigKind.POD_TEMPLATE)

    response = put(api, "/api/configs/pod_template/l40s/", json.dumps(L40S))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["created"] == ["l40s"]
    assert body["updated"] == []
    assert isinstance(body["revisions"], list)
    assert len(body["revisions"]) == 1
    assert PodTemplate.objects.get(name="l40s").body == L40S["l40s"]
    revision = ConfigRevision.objects.get(kind=ConfigKind.POD_TEMPLATE, number=body["revisions"][0])
    assert (revision.name, revision.action, revision.document) == ("l40s", "create", L40S["l40s"])
    assert revision_count(ConfigKind.POD_TEMPLATE) == before + 1


def test_it_reports_an_identical_second_put_as_unchanged_and_writes_no_revision(api, defaults):
    assert put(api, "/api/configs/pod_template/l40s/", json.dumps(L40S)).status_code == 200
    before = revision_count()

    response = put(api, "/api/configs/pod_template/l40s/", json.dumps(L40S))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["unchanged"] == ["l40s"]
    assert body["created"] == [] and body["updated"] == []
    assert body["revisions"] == []
    assert revision_count() == before


def test_it_creates_the_seed_pool_with_both_platforms_and_records_author_and_description(
        api, staff, gpu_templates):
    response = put(api, f"/api/configs/pool/{SEED_POOL_NAME}/?description=why", seed_pool_document())

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["created"] == [SEED_POOL_NAME]
    pool = Pool.objects.get(name=SEED_POOL_NAME)
    assert pool.default_platform == "l40s_platform"
    assert pool.common_pod_template == ["default_user", "default_ctrl"]
    platforms = {platform.name: platform for platform in Platform.objects.filter(pool=pool)}
    assert set(platforms) == {"l40s_platform", "a100_platform"}
    assert platforms["l40s_platform"].override_pod_template == ["l40s"]
    assert platforms["a100_platform"].override_pod_template == ["a100"]
    [number] = body["revisions"]
    revision = ConfigRevision.objects.get(kind=ConfigKind.POOL, number=number)
    assert revision.name == SEED_POOL_NAME
    assert revision.action == "create"
    assert revision.description == "why"
    assert revision.author == staff
    assert revision.author_name == "ops"


def test_it_refuses_a_whole_type_put_with_one_invalid_pool_and_writes_nothing(api, defaults):
    revisions, backends, pools = revision_count(), Backend.objects.count(), Pool.objects.count()
    document = {"pools": {
        "alpha": pool_body(backend="brand-new-cluster"),
        "beta": pool_body(default_platform="not-a-platform"),
    }}

    response = put(api, "/api/configs/pool/", document)

    assert response.status_code == 400, response.content
    body = response.json()
    assert set(body) >= {"detail", "field"}
    assert "not-a-platform" in body["detail"]
    assert "default_platform" in (body["field"] or "")
    assert not Pool.objects.filter(name="alpha").exists()
    assert Pool.objects.count() == pools
    assert revision_count() == revisions
    assert Backend.objects.count() == backends
    assert not Backend.objects.filter(name="brand-new-cluster").exists()


def test_it_refuses_a_whole_type_put_whose_second_pool_references_a_missing_template(api, defaults):
    revisions, backends = revision_count(), Backend.objects.count()
    document = {"pools": {
        "alpha": pool_body(backend="brand-new-cluster"),
        "beta": pool_body(common_pod_template=["default_ctrl", "no_such_template"]),
    }}

    response = put(api, "/api/configs/pool/", document)

    assert response.status_code == 400, response.content
    assert "no_such_template" in response.json()["detail"]
    assert "common_pod_template" in response.json()["field"]
    assert not Pool.objects.filter(name__in=["alpha", "beta"]).exists()
    assert revision_count() == revisions
    assert Backend.objects.count() == backends


def test_it_refuses_the_malformed_a100_template_of_the_seed_pointing_at_line_and_column(api, defaults):
    malformed = seed_block('"a100": {')
    before = revision_count()

    response = put(api, "/api/configs/pod_template/a100/", malformed)

    assert response.status_code == 400, response.content
    body = response.json()
    assert "line 14, column 9" in body["detail"]
    assert not PodTemplate.objects.filter(name="a100").exists()
    assert revision_count() == before


def test_it_refuses_an_unknown_platform_field_and_names_it(api, defaults):
    body = pool_body(platforms={"main": {"hostnetwork_allowed": True}})

    response = put(api, "/api/configs/pool/typo/", {"pools": {"typo": body}})

    assert response.status_code == 400, response.content
    assert "hostnetwork_allowed" in response.json()["detail"]
    assert "hostnetwork_allowed" in response.json()["field"]
    assert not Pool.objects.filter(name="typo").exists()


def test_it_refuses_a_document_naming_another_pool_than_the_url(api, defaults):
    response = put(api, "/api/configs/pool/alpha/", {"pools": {"beta": pool_body()}})

    assert response.status_code == 400
    assert response.json()["detail"]
    assert not Pool.objects.filter(name__in=["alpha", "beta"]).exists()


def test_it_updates_a_pool_and_records_an_update_revision(api, staff, defaults):
    document = api.get("/api/configs/pool/default/").json()
    document["pools"]["default"]["description"] = "Catch-all pool"

    response = put(api, "/api/configs/pool/default/", document)

    assert response.status_code == 200, response.content
    assert response.json()["updated"] == ["default"]
    assert Pool.objects.get(name="default").description == "Catch-all pool"
    revision = ConfigRevision.objects.filter(kind=ConfigKind.POOL, name="default").order_by("-number").first()
    assert revision.action == "update"
    assert revision.author == staff


# ---- deleting ---------------------------------------------------------------------------------------

def test_it_refuses_to_delete_the_default_pool(api, defaults):
    before = revision_count()

    response = api.delete("/api/configs/pool/default/")

    assert response.status_code == 400, response.content
    assert "default" in response.json()["detail"]
    assert Pool.objects.filter(name="default").exists()
    assert Platform.objects.filter(pool__name="default").exists()
    assert revision_count() == before


def test_it_refuses_to_delete_a_template_a_pool_uses_and_names_the_pool(api, defaults):
    response = api.delete("/api/configs/pod_template/default_user/")

    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert "pool default" in detail
    assert "common_pod_template" in detail
    assert PodTemplate.objects.filter(name="default_user").exists()


def test_it_refuses_to_delete_a_template_a_platform_overrides_with_and_names_pool_and_platform(api, seed_pool):
    before = revision_count()

    response = api.delete("/api/configs/pod_template/l40s/")

    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert SEED_POOL_NAME in detail
    assert "l40s_platform" in detail
    assert "a100_platform" not in detail
    assert PodTemplate.objects.filter(name="l40s").exists()
    assert revision_count() == before


def test_it_deletes_an_unused_template_and_records_a_delete_revision(api, staff, defaults):
    document = api.get("/api/configs/pod_template/gpu_toleration/").json()["gpu_toleration"]

    response = api.delete("/api/configs/pod_template/gpu_toleration/?description=unused")

    assert response.status_code == 200, response.content
    assert response.json()["deleted"] == ["gpu_toleration"]
    assert not PodTemplate.objects.filter(name="gpu_toleration").exists()
    [number] = response.json()["revisions"]
    revision = ConfigRevision.objects.get(kind=ConfigKind.POD_TEMPLATE, number=number)
    assert (revision.name, revision.action) == ("gpu_toleration", "delete")
    assert revision.document == document
    assert revision.author == staff
    assert revision.description == "unused"
    assert api.get("/api/configs/pod_template/gpu_toleration/").status_code == 404


def test_it_answers_404_json_when_deleting_a_missing_object(api, defaults):
    response = api.delete("/api/configs/pod_template/no_such_template/")

    assert response.status_code == 404
    assert "no_such_template" in response.json()["detail"]


# ---- history, diff and rollback ---------------------------------------------------------------------

def change_default_description(api, text: str) -> int:
    document = api.get("/api/configs/pool/default/").json()
    document["pools"]["default"]["description"] = text
    response = put(api, f"/api/configs/pool/default/?description=set+{text}", document)
    assert response.status_code == 200, response.content
    [number] = response.json()["revisions"]
    return number


def test_it_lists_a_pools_revisions_newest_first_with_their_metadata(api, defaults):
    writes.import_document(ConfigKind.POOL, {"pools": {"other": pool_body()}})
    first = ConfigRevision.objects.get(kind=ConfigKind.POOL, name="default").number
    second = change_default_description(api, "second")
    third = change_default_description(api, "third")

    response = api.get("/api/configs/history/?type=pool&name=default")

    assert response.status_code == 200
    rows = response.json()["revisions"]
    assert [row["revision"] for row in rows] == [third, second, first]
    assert {row["name"] for row in rows} == {"default"}
    assert {row["type"] for row in rows} == {"POOL"}
    assert [row["action"] for row in rows] == ["update", "update", "create"]
    assert rows[0]["author"] == "ops"
    assert rows[-1]["author"] == "tests"
    assert rows[0]["description"] == "set third"
    assert all(row["time"] for row in rows)
    assert "document" not in rows[0]


def test_it_adds_documents_to_the_history_when_asked(api, defaults):
    change_default_description(api, "changed")

    response = api.get("/api/configs/history/?type=pool&name=default&documents=1")

    assert response.status_code == 200
    rows = response.json()["revisions"]
    assert rows[0]["document"]["description"] == "changed"
    assert rows[-1]["document"]["description"] == "Default pool"


@pytest.mark.parametrize("limit", ["-1", "abc"])
def test_it_answers_a_bad_history_limit_with_400_not_a_crash(api, defaults, limit):
    response = api.get(f"/api/configs/history/?limit={limit}")

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "limit"


def test_it_limits_the_history_to_the_number_asked_for(api, defaults):
    change_default_description(api, "changed")

    response = api.get("/api/configs/history/?limit=2")

    assert response.status_code == 200
    assert len(response.json()["revisions"]) == 2
    assert response.json()["revisions"][0]["description"] == "set changed"


def test_it_rolls_a_pool_back_to_an_earlier_revision_as_a_new_revision(api, staff, defaults):
    original = ConfigRevision.objects.get(kind=ConfigKind.POOL, name="default").number
    change_default_description(api, "changed")
    assert Pool.objects.get(name="default").description == "changed"
    before = revision_count(ConfigKind.POOL)

    response = api.post("/api/configs/history/rollback/", {"type": "pool", "revision": original}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["updated"] == ["default"]
    assert Pool.objects.get(name="default").description == "Default pool"
    assert revision_count(ConfigKind.POOL) == before + 1
    newest = ConfigRevision.objects.filter(kind=ConfigKind.POOL, name="default").order_by("-number").first()
    assert newest.number == response.json()["revisions"][0]
    assert newest.action == "rollback"  # recorded as what it is, not as an update
    assert newest.author == staff
    assert newest.document["description"] == "Default pool"


def test_it_recreates_a_deleted_template_when_rolled_back_to_its_last_version(api, defaults):
    body = PodTemplate.objects.get(name="gpu_toleration").body
    created = ConfigRevision.objects.get(kind=ConfigKind.POD_TEMPLATE, name="gpu_toleration").number
    assert api.delete("/api/configs/pod_template/gpu_toleration/").status_code == 200

    response = api.post("/api/configs/history/rollback/",
                        {"type": "pod_template", "revision": created}, format="json")

    assert response.status_code == 200, response.content
    assert PodTemplate.objects.get(name="gpu_toleration").body == body


@pytest.mark.parametrize(("payload", "status"), [
    ({"type": "pool"}, 400),
    ({"type": "pool", "revision": "abc"}, 400),
    ({"type": "pool", "revision": 0}, 400),
    ({"revision": 1}, 400),
    ({"type": "pool", "revision": 9999}, 404),
    ({"type": "widget", "revision": 1}, 404),
])
def test_it_answers_bad_rollback_requests_with_a_json_error_not_a_crash(api, defaults, payload, status):
    before = revision_count()

    response = api.post("/api/configs/history/rollback/", payload, format="json")

    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert response.json()
    assert revision_count() == before


def test_it_answers_a_malformed_rollback_body_with_400(api, defaults):
    response = api.post("/api/configs/history/rollback/", data="{not json", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["detail"]


def test_it_shows_the_changed_line_in_a_revisions_diff(api, defaults):
    number = change_default_description(api, "Catch-all")

    response = api.get(f"/api/configs/history/diff/?type=pool&revision={number}")

    assert response.status_code == 200, response.content
    diff = response.json()["diff"]
    assert '-  "description": "Default pool",' in diff
    assert '+  "description": "Catch-all",' in diff
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("---", "+++"))]
    assert changed == ['-  "description": "Default pool",', '+  "description": "Catch-all",']


def test_it_diffs_two_chosen_revisions(api, defaults):
    first = ConfigRevision.objects.get(kind=ConfigKind.POOL, name="default").number
    change_default_description(api, "one")
    last = change_default_description(api, "two")

    response = api.get(f"/api/configs/history/diff/?type=pool&revision={first}&other={last}")

    assert response.status_code == 200
    diff = response.json()["diff"]
    assert '-  "description": "Default pool",' in diff
    assert '+  "description": "two",' in diff
    assert '"one"' not in diff


@pytest.mark.parametrize(("query", "status"), [
    ("type=pool", 400),
    ("type=pool&revision=abc", 400),
    ("type=pool&revision=9999", 404),
    ("type=widget&revision=1", 404),
])
def test_it_answers_bad_diff_requests_with_a_json_error_not_a_crash(api, defaults, query, status):
    response = api.get(f"/api/configs/history/diff/?{query}")

    assert response.status_code == status, response.content
    assert response.json()["detail"]


# ---- access -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("method", "url"), [
    ("get", "/api/configs/pool/"),
    ("put", "/api/configs/pod_template/l40s/"),
    ("delete", "/api/configs/pod_template/gpu_toleration/"),
    ("get", "/api/configs/history/"),
])
def test_it_refuses_anonymous_requests(defaults, method, url):
    client = APIClient()

    response = put(client, url, L40S) if method == "put" else getattr(client, method)(url)

    assert response.status_code in (401, 403)
    assert not PodTemplate.objects.filter(name="l40s").exists()
    assert PodTemplate.objects.filter(name="gpu_toleration").exists()


def test_it_refuses_a_logged_in_member_who_is_not_staff(defaults, member):
    client = APIClient()
    assert client.login(username="researcher", password="pw-res-123")
    before = revision_count()

    read = client.get("/api/configs/pool/")
    write = put(client, "/api/configs/pod_template/l40s/", L40S)
    rollback = client.post("/api/configs/history/rollback/", {"type": "pool", "revision": 1}, format="json")

    assert read.status_code == 403
    assert write.status_code == 403
    assert rollback.status_code == 403
    assert not PodTemplate.objects.filter(name="l40s").exists()
    assert revision_count() == before


def test_it_refuses_a_session_put_without_a_csrf_token(defaults, staff):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="ops", password="pw-ops-123")
    assert client.get("/api/configs/pool/").status_code == 200  # the session itself is valid

    response = put(client, "/api/configs/pod_template/l40s/", L40S)

    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
    assert not PodTemplate.objects.filter(name="l40s").exists()


def test_it_accepts_a_session_put_that_carries_the_csrf_token(defaults, staff):
    client = APIClient(enforce_csrf_checks=True)
    assert client.login(username="ops", password="pw-ops-123")
    secret = "a" * 32
    client.cookies["csrftoken"] = secret

    response = client.put("/api/configs/pod_template/l40s/", data=json.dumps(L40S),
                          content_type="application/json", HTTP_X_CSRFTOKEN=secret)

    assert response.status_code == 200, response.content
    assert PodTemplate.objects.filter(name="l40s").exists()


# ---- query counts -----------------------------------------------------------------------------------

def make_pools(count: int) -> None:
    body = pool_body(platforms={"main": {}, "spare": {"override_pod_template": ["gpu_toleration"]}})
    writes.import_document(ConfigKind.POOL, {"pools": {f"pool-{i:03d}": copy.deepcopy(body) for i in range(count)}})


@pytest.mark.parametrize("count", [5, 50])
def test_it_lists_pools_in_a_bounded_number_of_queries(api, defaults, django_assert_max_num_queries, count):
    make_pools(count)

    with django_assert_max_num_queries(10):
        response = api.get("/api/configs/pool/")

    assert response.status_code == 200
    assert len(response.json()["pools"]) == count + 1
    assert set(response.json()["pools"]["pool-000"]["platforms"]) == {"main", "spare"}


def test_it_lists_5_or_50_pools_with_the_same_number_of_queries(api, defaults):
    def queries_for_listing() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert api.get("/api/configs/pool/").status_code == 200
        return len(queries)

    make_pools(5)
    few = queries_for_listing()
    writes.import_document(ConfigKind.POOL, {"pools": {f"more-{i:03d}": pool_body() for i in range(45)}})
    many = queries_for_listing()

    assert Pool.objects.count() == 51
    assert many == few
