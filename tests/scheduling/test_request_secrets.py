"""Who reads a workload's request (issue 25 point 3): status, pools and timings for everyone who sees the
workload; the request (command, args, env, variables) and its rendered pod templates only for the submitter,
members of its project other than `default`, and staff; credential-looking env values masked for all but the
submitter; credentials from a Secret of the project's namespace instead of the request."""

import json

import pytest
from rest_framework.test import APIClient

from scheduling.models import Workload
from tests.scheduling.conftest import SHARED, body
from tests.support.commands import run

pytestmark = pytest.mark.django_db

HF = "hf_live_0123456789abcdef"
S3 = "s3-live-secret-value"
TASK_WORKFLOW = """
workflow:
  name: leak-check
  resources:
    default: {cpu: 1, gpu: 1, memory: 4Gi}
  tasks:
  - name: fetch
    image: ubuntu:24.04
    command: [bash, -c, "download --private-flag-xyzzy"]
    environment:
      HF_TOKEN: hf_live_0123456789abcdef
      S3_SECRET: s3-live-secret-value
"""


def client_of(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def secret_body(**fields):
    return body(env={"HF_TOKEN": HF, "S3_SECRET": S3, "LOG_LEVEL": "debug"},
                command=["python", "train.py", "--private-flag-xyzzy"], variables={"DATASET": "private-set-xyzzy"},
                priority="low", **fields)


def text(response) -> str:
    return response.content.decode()


def test_another_user_reads_nothing_of_a_request_submitted_without_a_project(world):
    researcher, other = client_of(world["researcher"]), client_of(world["other"])
    request = secret_body(pools=["training"])
    del request["project"]
    created = researcher.post("/api/workloads/", request, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["project"] == "default"

    seen = other.get(f"/api/workloads/{created.json()['id']}/")

    assert seen.status_code == 200  # status, pool, project and timings stay visible to every user
    shown = seen.json()
    assert shown["status"] == "PENDING" and shown["project"] == "default" and shown["submitted_at"]
    assert shown["request_visible"] is False
    assert shown["request"] == {} and shown["variables"] == {} and shown["pod_templates"] == {}
    for secret in (HF, S3, "private-flag-xyzzy", "private-set-xyzzy"):
        assert secret not in text(seen)


def test_another_user_reads_nothing_of_an_osmo_workflow_in_a_pool_they_cannot_see(world, client):
    researcher, other = client_of(world["researcher"]), client_of(world["other"])  # other may not use SHARED
    answer = researcher.post(f"/api/pool/{SHARED}/workflow?priority=LOW", {"file": TASK_WORKFLOW}, format="json")
    assert answer.status_code == 200, answer.json()
    workload = Workload.objects.get(workflow=answer.json()["name"])
    assert workload.project.name == "default"

    listed = other.get("/api/workloads/")
    seen = other.get(f"/api/workloads/{workload.pk}/")
    client.force_login(world["other"])
    page = client.get(f"/workloads/{workload.pk}/")

    assert [row["id"] for row in listed.json()] == [str(workload.pk)]
    assert seen.status_code == 200 and seen.json()["request_visible"] is False
    for response in (listed, seen, page):
        for secret in (HF, S3, "private-flag-xyzzy"):
            assert secret not in text(response)


def test_the_detail_page_and_the_cli_hide_the_request_from_other_users(world, client):
    researcher = client_of(world["researcher"])
    request = secret_body(pools=["training"])
    del request["project"]
    pk = researcher.post("/api/workloads/", request, format="json").json()["id"]

    client.force_login(world["other"])
    page = client.get(f"/workloads/{pk}/")
    described = run("workload", "describe", pk, "--as-user", "other", "--format", "json")

    assert page.status_code == 200 and 'id="request-hidden"' in text(page)
    for secret in (HF, S3, "private-flag-xyzzy"):
        assert secret not in text(page) and secret not in described
    assert json.loads(described)["request_visible"] is False


def test_members_of_the_project_read_the_request_with_credentials_masked(world, api):
    researcher, other = client_of(world["researcher"]), client_of(world["other"])  # both are members of nlp
    pk = researcher.post("/api/workloads/", secret_body(project="nlp"), format="json").json()["id"]

    member = other.get(f"/api/workloads/{pk}/").json()
    admin = api.get(f"/api/workloads/{pk}/").json()
    own = researcher.get(f"/api/workloads/{pk}/").json()

    for shown in (member, admin):
        assert shown["request_visible"] is True
        assert shown["request"]["command"] == ["python", "train.py", "--private-flag-xyzzy"]
        assert shown["request"]["env"] == {"HF_TOKEN": "********", "S3_SECRET": "********", "LOG_LEVEL": "debug"}
        env = {e["name"]: e.get("value") for pool in shown["pod_templates"].values()
               for c in pool["pod_template"]["spec"]["containers"] for e in c.get("env") or []}
        assert env["HF_TOKEN"] == "********" and env["LOG_LEVEL"] == "debug"
        assert HF not in json.dumps(shown) and S3 not in json.dumps(shown)
    assert own["request"]["env"]["HF_TOKEN"] == HF  # the submitter sees what they sent


def test_outsiders_of_a_project_do_not_see_its_workloads_at_all(world, django_user_model):
    researcher = client_of(world["researcher"])
    pk = researcher.post("/api/workloads/", secret_body(), format="json").json()["id"]  # project vision
    assert client_of(world["other"]).get(f"/api/workloads/{pk}/").status_code == 404


@pytest.mark.parametrize(("query", "field", "project"), [
    ("?project=nlp", "", "nlp"), ("", "  project: nlp\n", "nlp"), ("", "", "default")])
def test_an_osmo_workflow_takes_its_project_from_the_query_or_the_file(researcher_api, query, field, project):
    text_ = TASK_WORKFLOW.replace("  name: leak-check\n", f"  name: leak-check\n{field}")
    answer = researcher_api.post(f"/api/pool/{SHARED}/workflow?priority=LOW&{query.lstrip('?')}", {"file": text_},
                                 format="json")
    assert answer.status_code == 200, answer.json()
    assert Workload.objects.get(workflow=answer.json()["name"]).project.name == project


def test_an_osmo_workflow_for_a_project_one_is_not_a_member_of_is_refused_by_name(world):
    other = client_of(world["other"])
    answer = other.post("/api/pool/training/workflow?priority=LOW&project=vision", {"file": TASK_WORKFLOW},
                        format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "project"
    assert not Workload.objects.exists()


def test_env_from_secret_reads_a_secret_of_the_project_namespace_and_stores_no_value(researcher_api):
    created = researcher_api.post("/api/workloads/", body(env_from_secret={"HF_TOKEN": "hf-creds/token"}),
                                  format="json")
    assert created.status_code == 201, created.json()
    workload = Workload.objects.get(pk=created.json()["id"])
    user = workload.templates["training"]["pod_template"]["spec"]["containers"][0]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-creds", "key": "token"}}} in user["env"]
    assert workload.request["env_from_secret"] == {"HF_TOKEN": "hf-creds/token"}


@pytest.mark.parametrize(("value", "field"), [
    ({"HF_TOKEN": "no-slash"}, "env_from_secret.HF_TOKEN"),
    ({"HF_TOKEN": "Upper_Case/key"}, "env_from_secret.HF_TOKEN"),
    ({"HF_TOKEN": "creds/bad key"}, "env_from_secret.HF_TOKEN"),
    ({"A=B": "creds/key"}, "env_from_secret.A=B"),
    ({"NVIDIA_VISIBLE_DEVICES": "creds/key"}, "env_from_secret.NVIDIA_VISIBLE_DEVICES"),
    ({"LOG_LEVEL": "creds/key"}, "env_from_secret.LOG_LEVEL")])
def test_a_bad_env_from_secret_is_a_400_naming_the_entry(researcher_api, value, field):
    response = researcher_api.post("/api/workloads/", body(env={"LOG_LEVEL": "x"}, env_from_secret=value),
                                   format="json")
    assert response.status_code == 400 and response.json()["field"] == field, response.json()
    assert not Workload.objects.exists()


def test_the_admin_masks_credentials_too(researcher_api, admin_client):
    pk = researcher_api.post("/api/workloads/", secret_body(), format="json").json()["id"]
    page = admin_client.get(f"/admin/scheduling/workload/{pk}/change/")
    assert page.status_code == 200 and b"private-flag-xyzzy" in page.content
    assert HF.encode() not in page.content and S3.encode() not in page.content


def test_an_osmo_task_reads_env_from_a_secret(researcher_api):
    flow = TASK_WORKFLOW.replace("      S3_SECRET: s3-live-secret-value\n",
                                 "    env_from_secret:\n      S3_SECRET: s3-creds/secret-key\n")
    answer = researcher_api.post(f"/api/pool/{SHARED}/workflow?priority=LOW", {"file": flow}, format="json")
    assert answer.status_code == 200, answer.json()
    workload = Workload.objects.get(workflow=answer.json()["name"])
    env = workload.templates[SHARED]["pod_template"]["spec"]["containers"][0]["env"]
    assert {"name": "S3_SECRET", "valueFrom": {"secretKeyRef": {"name": "s3-creds", "key": "secret-key"}}} in env
    assert S3 not in json.dumps(workload.request)


def test_a_bad_osmo_env_from_secret_names_its_place_in_the_file(researcher_api):
    flow = TASK_WORKFLOW.replace("      S3_SECRET: s3-live-secret-value\n",
                                 "    env_from_secret:\n      S3_SECRET: no-key\n")
    answer = researcher_api.post(f"/api/pool/{SHARED}/workflow?priority=LOW", {"file": flow}, format="json")
    assert answer.status_code == 400
    assert answer.json()["field"] == "workflow.tasks[0].env_from_secret.S3_SECRET", answer.json()
