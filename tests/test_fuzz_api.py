"""Requests generated from the project's own OpenAPI schema (schemathesis) for every operation, with a staff
token and with a member's token, through the whole WSGI stack (middleware, authentication, views) into a
realistic database: none answers a server error, and every answer the schema documents has its shape.

The demo (`demo_tokens`) is built once for the module; each operation runs in a savepoint of it (as Django's
`setUpTestData`), so every operation starts from the same rows. Its cluster is the simulated one of the
`default` backend, in a temporary state directory: no request reaches a real cluster.

Bounded for CI: FUZZ_EXAMPLES generated requests per operation and token (default 10, about 850 requests in
all), derandomized. Longer runs: `FUZZ_EXAMPLES=100` for more, `FUZZ_COVERAGE=1` to add schemathesis'
coverage phase (boundary values, wrong types and unexpected methods for every field and operation: with
FUZZ_EXAMPLES=100, about 22,000 requests in 5 minutes)."""

import datetime as dt
import os

import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.core import signals
from django.core.handlers.wsgi import WSGIHandler
from django.db import DatabaseError, close_old_connections, transaction
from django.test import override_settings
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from pools.access.tokens import create_token
from pools.config import writes
from pools.config.defaults import init_demo
from pools.fleet.sync import BackendSync, cluster_for
from pools.models import AccessToken, Backend, ConfigKind, Department, Node, Pool, Project, Role
from scheduling.models import Workload
from tests.support.commands import run

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "10"))
REFUSED = "the database refused a value"  # pools/api/errors.py's answer to a DataError


@schemathesis.check
def a_read_is_never_blamed_for_the_databases_refusal(ctx, response, case):
    """A GET sends nothing to store: when the database refuses its SQL, the server built it (a 500, which
    `not_a_server_error` catches), so a 400 that says the database refused a value hides a server error."""
    if case.method.upper() in ("GET", "HEAD") and response.status_code == 400 and REFUSED in response.text:
        raise AssertionError(f"{case.method} {case.formatted_path} answered 400 for a database refusal: "
                             f"{response.text[:300]}")


CHECKS = [not_a_server_error, response_schema_conformance, a_read_is_never_blamed_for_the_databases_refusal]
# Names the demo below has, so that about half the generated names find a row rather than a 404.
POOLS = ["default", "training", "dev", "inference", "simulation"]
NAMES = {"pools": POOLS, "users": ["ops", "alice"], "roles": ["osmo-training"],
         "other": ["dgx-h100-001", "dgx-a100-001", "ovx-l40s-001", "cpu-001", "llm-research", "robotics", "research",
                   "product", "fuzz", "laptop", "train-llm", "eval-llm"]}

schema = schemathesis.openapi.from_dict(
    SchemaGenerator().get_schema(request=None, public=True),
    config=schemathesis.Config.from_dict({
        "dictionaries": {**{key: {"values": values} for key, values in NAMES.items()},
                         "any": {"values": [name for values in NAMES.values() for name in values]}},
        "parameters": {"path.name": {"dictionary": "any", "probability": 0.5},
                       "path.pool": {"dictionary": "pools", "probability": 0.5},
                       "path.user_id": {"dictionary": "users", "probability": 0.5},
                       "path.role_name": {"dictionary": "roles", "probability": 0.5}},
        "generation": {"max-examples": EXAMPLES, "deterministic": True, "database": "none",
                       "dictionaries": {"string": {"dictionary": "any", "probability": 0.2}}},
        "phases": {"coverage": {"enabled": os.environ.get("FUZZ_COVERAGE") == "1"}, "stateful": {"enabled": False}},
        # A loaded CI machine must not turn slowness into a failure.
        "suppress-health-check": ["all"],
    }),
)


@pytest.fixture(scope="module")
def demo_tokens(django_db_setup, django_db_blocker, tmp_path_factory):
    """The demo's configuration on the simulated `default` backend, synced (250 nodes and their pods, five
    pools with platforms, departments and projects with quotas), two pending workloads, a staff user and a
    member (alice, of project llm-research, with a role for pools training and dev, reading configurations,
    and a second token of her own); answers each one's Bearer token."""
    users = get_user_model().objects
    with (django_db_blocker.unblock(), override_settings(OSMO_SIMULATED_STATE_DIR=tmp_path_factory.mktemp("sim")),
          transaction.atomic()):
        init_demo(author="tests")
        backend = Backend.objects.get(name="default")
        BackendSync(backend, cluster_for(backend)).run(seconds=0)
        writes.import_document(ConfigKind.ROLE, {"name": "osmo-training", "policies": [{"actions": [
            {"base": "http", "path": "/api/pool/training*", "method": "post"},
            {"base": "http", "path": "/api/pool/dev*", "method": "post"},
            {"base": "http", "path": "/api/profile/*", "method": "*"},
            {"base": "http", "path": "/api/configs/*", "method": "get"}]}]}, author="tests")
        staff = users.create_user("ops", password="pw-ops-123", is_staff=True, is_superuser=True)
        member = users.create_user("alice", password="pw-ali-123")
        run("user", "add-role", member.get_username(), "osmo-training")
        expires = timezone.now() + dt.timedelta(days=30)
        nobody = users.create_user("nobody", password="pw-nob-123")  # signed in, no role at all
        tokens = {who: create_token(user, "fuzz", expires)[1]
                  for who, user in (("staff", staff), ("member", member), ("nobody", nobody))}
        create_token(member, "laptop", expires)
        client = APIClient()
        client.force_authenticate(member)
        for name, gpus in (("train-llm", 8), ("eval-llm", 1)):
            response = client.post("/api/workloads/", {
                "name": name, "project": "llm-research", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "command": ["python", "train.py"], "resources": {"gpu": gpus, "cpu": "4", "memory": "16Gi"}},
                format="json")
            assert response.status_code == 201, response.content
        named = {*Pool.objects.values_list("name", flat=True), *Node.objects.values_list("name", flat=True),
                 *Project.objects.values_list("name", flat=True), *Department.objects.values_list("name", flat=True),
                 *users.values_list("username", flat=True), *Role.objects.values_list("name", flat=True),
                 *AccessToken.objects.values_list("name", flat=True), *Workload.objects.values_list("name", flat=True)}
        assert {name for values in NAMES.values() for name in values} <= named
        yield tokens
        transaction.set_rollback(True)


@pytest.fixture(scope="module")
def application():
    """Django's WSGI handler as a server runs it, except that it leaves the test's connection open after each
    request (as Django's test client does)."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield WSGIHandler()
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


def send(case, token: str, application):
    savepoint = transaction.savepoint()
    response = case.call(app=application, base_url="http://testserver", headers={"Authorization": f"Bearer {token}"})
    try:
        transaction.savepoint_commit(savepoint)
    except DatabaseError:
        # A statement of the request failed (and was answered 4xx): on a server that ends with the request, here
        # it would abort the test's transaction for the requests after it.
        transaction.savepoint_rollback(savepoint)
    return response


@pytest.mark.parametrize("who", ["staff", "member"])
@schema.parametrize()
@pytest.mark.django_db
def test_no_operation_answers_a_server_error_or_an_undocumented_shape(case, who, demo_tokens, application):
    case.validate_response(send(case, demo_tokens[who], application), checks=CHECKS)


# Issue 25: the doors a hostile signed-in user reaches first, also with a token of no role at all (the
# submission limits, a 429 past 60 submissions a minute, are part of what is fuzzed).
SUBMISSION = schema.include(path_regex=r"^/api/(workloads/|pool/\{pool\}/workflow|workflow)")


@pytest.mark.parametrize("who", ["staff", "member", "nobody"])
@SUBMISSION.parametrize()
@pytest.mark.django_db
def test_submission_and_workflow_endpoints_answer_no_server_error_to_any_role(case, who, demo_tokens, application):
    case.validate_response(send(case, demo_tokens[who], application), checks=CHECKS)


def test_the_submission_fuzz_covers_submit_workflows_and_cancel():
    paths = {operation.path for operation in (result.ok() for result in SUBMISSION.get_all_operations())}
    assert {"/api/workloads/", "/api/pool/{pool}/workflow", "/api/workflow", "/api/workflow/{name}/cancel",
            "/api/workloads/{id}/cancel/"} <= paths, paths


# ---- the harness reaches the views, as each of them ------------------------------------------------------

@pytest.mark.django_db
def test_both_tokens_reach_the_views_and_the_member_is_held_to_her_roles(demo_tokens, application):
    pools = schema["/api/pools/"]["GET"]
    for who in ("staff", "member"):
        response = send(pools.Case(), demo_tokens[who], application)
        assert response.status_code == 200, response.text[:300]
        assert "training" in {row["name"] for row in response.json()}

    write = schema["/api/configs/{kind}/"]["PUT"].Case(path_parameters={"kind": "pool"}, body={"pools": {}})
    assert send(write, demo_tokens["member"], application).status_code == 403


# ---- answers whose shape the schema once got wrong -----------------------------------------------------------

@pytest.mark.django_db
@pytest.mark.parametrize(("path", "parameters", "query"), [
    ("/api/workloads/", {}, {}),
    ("/api/workloads/", {}, {"limit": 1}),
    ("/api/configs/{kind}/", {"kind": "department"}, {}),
    ("/api/configs/{kind}/", {"kind": "project"}, {}),
    ("/api/configs/{kind}/{name}/", {"kind": "project", "name": "llm-research"}, {}),
    ("/api/configs/{kind}/{name}/", {"kind": "department", "name": "research"}, {}),
], ids=["workloads", "a-page-of-workloads", "departments", "projects", "one-project", "one-department"])
def test_workload_rows_and_quota_documents_have_the_documented_shape(demo_tokens, application, path, parameters, query):
    case = schema[path]["GET"].Case(path_parameters=parameters, query=query)
    response = send(case, demo_tokens["staff"], application)

    assert response.status_code == 200, response.text[:300]
    case.validate_response(response, checks=CHECKS)


@pytest.mark.django_db
def test_the_checks_catch_a_read_that_blames_the_client_for_sql_the_server_built(demo_tokens, application, monkeypatch):
    """Before issue 30 every DataError answered 400, so SQL the server built and PostgreSQL refused on a read (a
    stored role's glob it could not compile, until issue 42 left such roles out) was a 400 that
    `not_a_server_error` let through; the check of our own must see it. The refusal is made here by the one read
    the pool list does, as the broken glob made it."""
    from django.db import DataError

    from pools.api import errors, inventory

    def refused(*args, **kwargs):
        raise DataError("invalid regular expression: invalid character range")

    monkeypatch.setattr(inventory.usage, "pool_rows", refused)
    case = schema["/api/pools/"]["GET"].Case()

    assert send(case, demo_tokens["member"], application).status_code == 500
    monkeypatch.setattr(errors, "SAFE_METHODS", ())  # the old mapping: every DataError a 400
    response = send(case, demo_tokens["member"], application)
    assert response.status_code == 400
    with pytest.raises(BaseExceptionGroup) as failed:
        case.validate_response(response, checks=CHECKS)
    assert any("answered 400 for a database refusal" in str(error) for error in failed.value.exceptions)
