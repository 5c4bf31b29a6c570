"""Input hardening (issue 15, point 1): hostile JSON, YAML, URLs and names answer a 4xx JSON body that says
where, never a 500, and the CLI ends in one paragraph, never a traceback."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import DataError

from pools.api.errors import exception_handler
from pools.engine import ConfigError, read_json, read_yaml
from pools.models import PodTemplate, Pool

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[1]
DEEP = "[" * 10_000 + "]" * 10_000


def put(client, url, text: str):
    return client.put(url, data=text, content_type="application/json")


def refused(response, status: int = 400) -> dict:
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail", "field"}
    return body


def pool_text(**variables) -> str:
    return json.dumps({"backend": "default", "description": "a pool", "default_platform": "main",
                       "common_pod_template": ["default_ctrl", "default_user"],
                       "common_resource_validations": ["default_cpu"],
                       "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi",
                                                    "USER_STORAGE": "1Gi", **variables},
                       "platforms": {"main": {}}})


# ---- depth ----------------------------------------------------------------------------------------

def test_json_nested_10000_deep_on_a_config_write_is_a_400_not_a_500(api, defaults):
    body = refused(put(api, "/api/configs/pool/", DEEP))
    assert "nested more than 64 levels" in body["detail"]


def test_json_nested_10000_deep_on_an_access_token_request_is_a_400_not_a_500(api, defaults):
    response = api.post("/api/auth/access_token/deep", data=DEEP, content_type="application/json")
    assert "nested more than 64 levels" in refused(response)["detail"]


def test_a_pod_template_470_deep_is_refused_at_write_so_the_pool_pages_stay_up(api, client, staff, defaults):
    deep = {"spec": {"containers": [{"name": "x", "env": []}]}}
    inner = deep
    for _ in range(470):
        inner["nested"] = {}
        inner = inner["nested"]
    body = refused(put(api, "/api/configs/pod_template/deep/", json.dumps({"deep": deep})))
    assert "nested more than 64 levels" in body["detail"]
    assert not PodTemplate.objects.filter(name="deep").exists()
    client.force_login(staff)
    assert client.get("/pools/default/").status_code == 200


def test_yaml_nested_deeply_is_refused_without_recursing(tmp_path):
    with pytest.raises(ConfigError, match="nested more than 64 levels"):
        read_yaml("a: " + "[" * 10_000 + "]" * 10_000, "file")
    with pytest.raises(ConfigError, match="nested more than 64 levels"):
        read_yaml("- " * 200 + "x", "file")


# ---- numbers, NUL and lone surrogates -------------------------------------------------------------

@pytest.mark.parametrize(("value", "words"), [
    ("NaN", "NaN is not a number"),
    ("Infinity", "Infinity is not a number"),
    ("-Infinity", "-Infinity is not a number"),
    ("1e309", "overflows to infinity"),
    ("1" * 4301, "4301 digits is too long"),
    ('"a\\u0000b"', "NUL character"),
    ('"a\\ud800b"', "lone surrogate"),
])
def test_refused_values_answer_400_naming_where(api, defaults, value, words):
    text = pool_text().replace('"USER_STORAGE": "1Gi"', f'"USER_STORAGE": "1Gi", "EXTRA": {value}')
    body = refused(put(api, "/api/configs/pool/training/", text))
    assert words in body["detail"]
    assert body["field"] == "common_default_variables.EXTRA"
    assert not Pool.objects.filter(name="training").exists()


def test_nan_in_resources_is_refused_not_stored_as_null(api, defaults):
    text = pool_text().replace('"platforms"', '"resources": {"gpu": {"guarantee": NaN}}, "platforms"')
    body = refused(put(api, "/api/configs/pool/training/", text))
    assert body["field"] == "resources.gpu.guarantee"


def test_nul_and_lone_surrogates_in_keys_are_refused():
    with pytest.raises(ConfigError, match="NUL character") as nul:
        read_json('{"pools": {"a\\u0000": 1}}')
    assert nul.value.field == "pools.a\\x00"
    with pytest.raises(ConfigError, match="lone surrogate"):
        read_json('{"\\udc00": 1}')


@pytest.mark.parametrize("url", ["/api/configs/pool/a%00b/", "/api/pools/a%00b/", "/api/configs/history/?type=a%00",
                                 "/pools/a%00b/"])
def test_nul_in_a_url_is_a_400_not_a_500(api, defaults, url):
    response = api.get(url)
    assert response.status_code == 400, response.content[:300]


# ---- size -----------------------------------------------------------------------------------------

def test_a_20_mb_body_answers_413_json(api, defaults):
    text = json.dumps({"pools": {"x": "y" * (20 * 1024 * 1024)}})
    body = refused(put(api, "/api/configs/pool/", text), status=413)
    assert "larger than" in body["detail"]


def test_a_body_over_the_limit_without_a_declared_length_still_answers_413(api, defaults, settings):
    settings.OSMO_JSON_MAX_BYTES = 1000
    body = refused(put(api, "/api/configs/pool/training/", pool_text(PADDING="x" * 2000)), status=413)
    assert body["field"] == "request body"


# ---- names matched whole ---------------------------------------------------------------------------

def test_a_pool_name_with_a_trailing_newline_is_refused(api, defaults):
    response = put(api, "/api/configs/pool/", json.dumps({"pools": {"training\n": json.loads(pool_text())}}))
    body = refused(response)
    assert "invalid" in body["detail"]
    assert body["field"]
    assert not Pool.objects.filter(name__startswith="training").exists()


def test_label_keys_and_values_with_a_trailing_newline_are_refused(api, defaults):
    for selector in ({"runwhere.ai/pool\n": "a"}, {"runwhere.ai/pool": "a\n"}):
        text = pool_text().replace('"platforms"', f'"node_selector": {json.dumps(selector)}, "platforms"')
        body = refused(put(api, "/api/configs/pool/training/", text))
        assert "label" in body["detail"]
        assert "node_selector" in body["field"]


def test_node_label_writes_refuse_a_trailing_newline(settings):
    from pools.fleet.labels import LabelError, check_labels

    prefix = settings.OSMO_LABEL_PREFIX
    with pytest.raises(LabelError) as key:
        check_labels({f"{prefix}pool\n": "a"})
    assert key.value.field == f"labels.{prefix}pool\n"
    with pytest.raises(LabelError, match="not a valid Kubernetes label value"):
        check_labels({f"{prefix}pool": "a\n"})


# ---- database refusals -------------------------------------------------------------------------------

def test_a_database_data_error_answers_400_json():
    response = exception_handler(DataError("integer out of range"), {})
    assert response is not None
    assert response.status_code == 400
    assert "integer out of range" in response.data["detail"]


@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS"])
def test_a_database_data_error_on_a_read_is_left_a_server_error(method):
    from types import SimpleNamespace

    read = {"request": SimpleNamespace(method=method)}
    assert exception_handler(DataError("invalid regular expression"), read) is None


def test_a_database_data_error_on_a_write_answers_400():
    from types import SimpleNamespace

    response = exception_handler(DataError("value too long"), {"request": SimpleNamespace(method="POST")})
    assert response is not None and response.status_code == 400


# ---- CLI --------------------------------------------------------------------------------------------

def test_config_history_with_a_negative_limit_is_one_paragraph_not_a_traceback(defaults):
    with pytest.raises(CommandError, match="--limit must be"):
        call_command("config", "history", "--limit", "-1")
    done = subprocess.run([sys.executable, "manage.py", "config", "history", "--limit", "-1"], cwd=ROOT,
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "--limit must be" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(("text", "words"), [
    (DEEP, "nested more than 64 levels"),
    ('{"pools": {"p": NaN}}', "at pools.p: NaN is not a number"),
    ('{"a": "\\u0000"}', "at a contains a NUL character"),
    ('{"a": ' + "9" * 4301 + "}", "4301 digits is too long"),
])
def test_config_update_with_a_hostile_file_says_what_and_where(defaults, tmp_path, text, words):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(CommandError, match=words):
        call_command("config", "update", "POOL", "--file", str(path))


@pytest.mark.parametrize("text", ["a: " + "[" * 10_000 + "]" * 10_000, "a: .nan", "a: " + "9" * 5000, "a: \"\\0\""])
def test_cli_yaml_files_are_checked_like_json(tmp_path, text):
    from scheduling.management.cli import read_document

    path = tmp_path / "job.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError):
        read_document(str(path))


# ---- found by the fuzz test (tests/test_fuzz_api.py) -----------------------------------------------------

@pytest.mark.parametrize(("url", "document", "field"), [
    ("/api/configs/department/", [{"name": {}, "description": ""}], "name"),
    ("/api/configs/project/", [{"name": ["vision"], "department": "default"}], "name"),
    ("/api/configs/department/research/", {"name": {"research": 1}}, "research.name"),
])
def test_a_department_or_project_named_by_something_other_than_text_is_a_400_not_a_500(api, defaults, url,
                                                                                        document, field):
    assert refused(api.put(url, document, format="json"))["field"] == field


@pytest.mark.parametrize("path", ["", "cancel/"])
def test_a_workload_id_of_36_characters_that_is_not_a_uuid_is_a_404_not_a_500(api, defaults, path):
    assert api.get(f"/api/workloads/{'0' * 36}/{path}").status_code == 404
    assert api.post(f"/api/workloads/{'0' * 36}/{path}").status_code in (404, 405)
    assert api.get(f"/api/workloads/{'0' * 8}-{'0' * 4}-{'0' * 4}-{'0' * 4}-{'0' * 12}/").status_code == 404


@pytest.mark.parametrize(("resource", "value"), [("gpu", 1e30), ("gpu", 1e11), ("gpu", "1e999999"), ("cpu", "1e30"),
                                                 ("memory", 10 ** 26)])
def test_a_quota_beyond_what_the_database_holds_is_a_400_naming_the_field(api, defaults, resource, value):
    """Found by hand beside the fuzz test: 1e30 GPUs raised decimal.InvalidOperation, and on SQLite 1e30
    millicores an OverflowError (500 both); on PostgreSQL the database refused them in its own words."""
    document = {"vision": {"department": "default", "resources": [{"node_pool": "default",
                                                                    resource: {"deserved": value}}]}}
    body = refused(api.put("/api/configs/project/", document, format="json"))
    assert body["field"] == f"vision.resources[0].{resource}.deserved"
    assert "is out of range (at most" in body["detail"]


@pytest.mark.parametrize(("weight", "meant"), [("inf", "High"), ("1e400", "High"), ("-inf", "Lowest"),
                                               ("nan", "Medium")])
def test_an_osmo_pool_weight_beyond_any_number_is_clamped_like_any_other_not_a_500(api, defaults, weight, meant):
    document = {"pools": {"p9": {"backend": "default", "platforms": {"x": {}},
                                 "resources": {"gpu": {"weight": weight}}}}}
    assert api.put("/api/configs/pool/", document, format="json").status_code == 200
    project = api.get("/api/configs/project/p9/").json()
    assert project["resources"][0]["gpu"]["over_quota_weight"] == meant
