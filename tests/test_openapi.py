"""The OpenAPI schema at /api/schema/ types every path parameter and every body for real, is valid
OpenAPI 3.0, is readable by any signed-in user, and describes what the API really answers."""

import datetime as dt
import re

import pytest
from django.utils import timezone
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import ConfigKind

pytestmark = pytest.mark.django_db
METHODS = ("get", "put", "post", "patch", "delete")
# Operations that take no body by design (the URL and, for OSMO's cancel, its query parameters say everything).
NO_BODY = {("post", "/api/configs/role/{name}/{template}/"), ("post", "/api/workflow/{name}/cancel"),
           ("post", "/api/workflow/{name}/portforward/{task}"),
           ("post", "/api/nodes/{name}/uncordon")}
PRIMITIVES = {"string", "integer", "number", "boolean"}


@pytest.fixture
def schema(member):
    client = APIClient()
    client.force_authenticate(member)
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200, response.content
    return response.json()


def resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node or len(node.get("allOf", ())) == 1:
        node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node["allOf"][0]
    return node


def typed(schema: dict, node, seen=()) -> bool:
    """False for a free-form body: `{}`, a bare `{"type": "object"}`, or an object of anything."""
    if not isinstance(node, dict):
        return False
    if "$ref" in node:
        if node["$ref"] in seen:
            return True
        return typed(schema, resolve(schema, node), (*seen, node["$ref"]))
    for key in ("anyOf", "oneOf", "allOf"):
        if key in node:
            return all(typed(schema, item, seen) for item in node[key])
    kind = node.get("type")
    if kind in PRIMITIVES:
        return True
    if kind == "array":
        return typed(schema, node.get("items"), seen)
    if kind in ("object", None):
        if node.get("properties"):
            return True
        extra = node.get("additionalProperties")
        return isinstance(extra, dict) and bool(extra) and typed(schema, extra, seen)
    return False


def operations(schema):
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                yield path, method, item[method]


def test_every_path_parameter_is_typed_with_a_pattern_an_enumeration_or_as_an_integer(schema):
    untyped = []
    for path, method, operation in operations(schema):
        parameters = {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "path"}
        for name in re.findall(r"{(\w+)}", path):
            parameter = parameters.get(name)
            kind = parameter and parameter["schema"]
            if not kind or not (kind.get("type") == "integer"
                                or (kind.get("type") == "string" and ("pattern" in kind or "enum" in kind))):
                untyped.append((method.upper(), path, name, kind))
        untyped += [(method.upper(), path, name, "not in the path") for name in parameters if f"{{{name}}}" not in path]

    assert not untyped, untyped


def test_every_query_parameter_has_a_type(schema):
    untyped = [(method.upper(), path, p["name"]) for path, method, operation in operations(schema)
               for p in operation.get("parameters", []) if p["in"] == "query" and not typed(schema, p["schema"])]

    assert not untyped, untyped


def test_every_request_body_is_typed_json_and_never_a_bare_object(schema):
    untyped, missing = [], []
    for path, method, operation in operations(schema):
        body = operation.get("requestBody")
        if body is None:
            if method in ("post", "put", "patch") and (method, path) not in NO_BODY:
                missing.append((method.upper(), path))
            continue
        assert set(body["content"]) == {"application/json"}, (method, path, list(body["content"]))
        if not typed(schema, body["content"]["application/json"]["schema"]):
            untyped.append((method.upper(), path, body["content"]["application/json"]["schema"]))

    assert not missing, f"writes without a documented body: {missing}"
    assert not untyped, untyped


def test_every_answer_with_a_body_is_typed(schema):
    untyped = []
    for path, method, operation in operations(schema):
        for status, response in operation["responses"].items():
            if not status.startswith("2"):
                continue
            content = response.get("content", {}).get("application/json")
            if (content is None and status != "204") or (content is not None and not typed(schema, content["schema"])):
                untyped.append((method.upper(), path, status, content))

    assert not untyped, untyped


def test_the_schema_is_valid_openapi_3(schema):
    validate_schema(schema)


def test_the_sign_in_schemes_are_documented_for_every_operation(schema):
    """Bearer tokens and the proxy's header (their extensions live in pools.api.schema, not beside the
    authentication classes), named by every operation that asks for sign-in."""
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bearerAuth"] == {"type": "http", "scheme": "bearer",
                                     "description": "A personal token from /api/auth/access_token/"}
    assert schemes["proxyHeader"]["type"] == "apiKey" and schemes["proxyHeader"]["in"] == "header"
    secured = [{name for requirement in operation.get("security", ()) for name in requirement}
               for _, _, operation in operations(schema) if operation.get("security")]
    assert secured and all({"bearerAuth", "proxyHeader"} <= named for named in secured), secured


def test_osmo_routes_are_documented_as_osmo_writes_them(schema):
    assert "/api/auth/user" in schema["paths"]
    assert "/api/auth/user/{user_id}/access_token/{name}" in schema["paths"]
    assert "/api/nodes/{name}/labels" in schema["paths"]
    assert "/api/pools/" in schema["paths"] and "/api/resources/" in schema["paths"]


def test_the_resource_list_documents_every_filter_and_its_pages(schema):
    parameters = {p["name"]: p for p in schema["paths"]["/api/resources/"]["get"]["parameters"]}

    assert set(parameters) == {"pool", "platform", "status", "gpu", "q", "limit", "offset"}
    assert parameters["limit"]["schema"]["type"] == "integer"
    row = schema["components"]["schemas"]["NodeRow"]["properties"]
    assert resolve(schema, row["resource_type"])["enum"] == ["RESERVED", "SHARED", "UNUSED"]
    assert resolve(schema, row["node_type"])["enum"] == ["GPU", "CPU"]


def test_anyone_signed_in_may_read_the_schema_and_no_one_else():
    assert APIClient().get("/api/schema/").status_code == 401


# ---- the schema says what the API answers ---------------------------------------------------------------

def matches(schema: dict, node: dict, data, where: str = "") -> list[str]:
    """Where `data` has keys the schema does not name, or lacks keys it requires (objects and arrays of them)."""
    node = resolve(schema, node)
    if isinstance(data, list) and node.get("type") == "array":
        return [problem for item in data[:3] for problem in matches(schema, node["items"], item, f"{where}[]")]
    if not isinstance(data, dict) or not node.get("properties"):
        return []
    properties = node["properties"]
    problems = [f"{where}.{key}: not in the schema" for key in data if key not in properties]
    problems += [f"{where}.{key}: required, missing" for key in node.get("required", []) if key not in data]
    return problems + [problem for key, value in data.items() if key in properties
                       for problem in matches(schema, properties[key], value, f"{where}.{key}")]


def assert_documented(schema: dict, answers: list[tuple[str, str, str, object]]) -> None:
    """Each (path, method, status, response) answered that status with a body of the documented shape."""
    for path, method, status, response in answers:
        assert response.status_code == int(status), (path, method, response.content)
        node = answer_schema(schema, path, method, status)
        alternatives = resolve(schema, node).get("oneOf", [node])
        assert any(not matches(schema, alternative, response.json()) for alternative in alternatives), (
            path, method, [matches(schema, alternative, response.json()) for alternative in alternatives])


def answer_schema(schema: dict, path: str, method: str, status: str) -> dict:
    return schema["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]


def test_the_access_and_configuration_answers_have_the_documented_shapes(schema, api, defaults, member):
    future = (timezone.now() + dt.timedelta(days=5)).date().isoformat()
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-default", "actions": []}, author="tests")
    answers = [
        ("/api/auth/user", "post", "201", api.post("/api/auth/user", {"id": "ann", "roles": ["osmo-default"]},
                                                  format="json")),
        ("/api/auth/user/{user_id}", "get", "200", api.get("/api/auth/user/ann")),
        ("/api/auth/user/{user_id}/roles", "post", "200",
         api.post("/api/auth/user/ann/roles", {"role_name": "osmo-default"}, format="json")),
        ("/api/auth/roles/{role_name}/users", "get", "200", api.get("/api/auth/roles/osmo-default/users")),
        ("/api/auth/roles/{role_name}/users", "post", "200",
         api.post("/api/auth/roles/osmo-default/users", {"user_ids": ["ann", "ghost"]}, format="json")),
        ("/api/auth/access_token/{name}", "post", "201",
         api.post("/api/auth/access_token/ci", {"expires_at": future}, format="json")),
        ("/api/auth/access_token", "get", "200", api.get("/api/auth/access_token/")),
        ("/api/profile/", "get", "200", api.get("/api/profile/")),
        ("/api/configs/{kind}/{name}/", "put", "200", api.put("/api/configs/role/osmo-x/", {"actions": []},
                                                              format="json")),
        ("/api/configs/history/", "get", "200", api.get("/api/configs/history/?documents=1&limit=2")),
        ("/api/configs/history/diff/", "get", "200", api.get("/api/configs/history/diff/?type=pool&revision=1")),
        ("/api/configs/history/rollback/", "post", "200",
         api.post("/api/configs/history/rollback/", {"type": "pool", "revision": 1}, format="json")),
        ("/api/configs/role/{name}/{template}/", "post", "200", api.post("/api/configs/role/osmo-admin/admin/")),
        ("/api/configs/{kind}/{name}/", "delete", "200", api.delete("/api/configs/role/osmo-x/")),
        ("/api/pools/", "get", "200", api.get("/api/pools/")),
        ("/api/pools/{name}/", "get", "200", api.get("/api/pools/default/")),
        ("/api/resources/", "get", "200", api.get("/api/resources/?limit=5")),
    ]

    assert_documented(schema, answers)
