"""Workflows belong to their submitter (issue 25 point 4): names follow workload names' rules, IDs are allocated
atomically per submitter, a workload joins only its caller's own workflow, and another user's workflow answers
exactly like an unknown name."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from scheduling.models import Status, Workflow, Workload
from scheduling.submit import submission
from tests.scheduling.conftest import body

pytestmark = pytest.mark.django_db

FLOW = """
workflow:
  name: {name}
  resources:
    default: {{cpu: 1, gpu: 1, memory: 4Gi}}
  tasks:
  - name: step
    image: ubuntu:24.04
    command: ["true"]
"""


def client_of(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def submit(client, name="nightly", query=""):
    return client.post(f"/api/pool/training/workflow?priority=LOW{query}", {"file": FLOW.format(name=name)},
                       format="json")


def test_a_workload_cannot_join_another_users_workflow(world):
    researcher, other = client_of(world["researcher"]), client_of(world["other"])
    flow = submit(researcher, query="&project=nlp").json()["name"]  # nlp: both are members

    joined = other.post("/api/workloads/", body(project="nlp", workflow=flow, priority="low"), format="json")
    assert joined.status_code == 201, joined.json()

    detail = researcher.get(f"/api/workflow/{flow}").json()
    assert [g["name"] for g in detail["groups"]] == ["step-group"]
    canceled = researcher.post(f"/api/workflow/{flow}/cancel")
    assert canceled.status_code == 200, canceled.json()
    assert Workload.objects.get(submitter=world["researcher"]).status == Status.FAILED_CANCELED
    assert Workload.objects.get(submitter=world["other"]).status == Status.PENDING


def test_a_name_like_another_users_hidden_workflow_answers_as_an_unknown_name_would(world):
    researcher, other = client_of(world["researcher"]), client_of(world["other"])
    assert submit(researcher, query="&project=vision").json()["name"] == "nightly-1"  # other is not in vision

    assert submit(other).json()["name"] == "nightly-1"
    unknown = other.get("/api/workflow/nightly-7")
    hidden = researcher.get("/api/workflow/nightly-1")
    assert hidden.status_code == 200 and hidden.json()["user"] == "researcher"
    mine = other.get("/api/workflow/nightly-1").json()
    assert mine["user"] == "other" and [g["workload"] for g in mine["groups"]] == \
        [str(Workload.objects.get(submitter=world["other"]).pk)]
    assert unknown.status_code == 404
    assert submit(other).json()["name"] == "nightly-2"
    assert other.post("/api/workflow/nightly-9/cancel").json() == \
        {"detail": "Workflow nightly-9 does not exist or is not yours to see."}


def test_a_reader_of_two_users_workflows_of_one_id_chooses_with_user(world, api):
    researcher, other = client_of(world["researcher"]), client_of(world["other"])
    submit(researcher), submit(other)

    listed = api.get("/api/workflow").json()["workflows"]
    ambiguous = api.get("/api/workflow/nightly-1")
    chosen = api.get("/api/workflow/nightly-1?user=other")

    assert sorted((w["name"], w["user"]) for w in listed) == [("nightly-1", "other"), ("nightly-1", "researcher")]
    assert ambiguous.status_code == 400 and ambiguous.json()["field"] == "user"
    assert chosen.status_code == 200 and chosen.json()["user"] == "other"


@pytest.mark.parametrize("name", ["<script>alert(1)</script>", "evil\u202egnp.exe", "a/b", "line\r\nbreak", "-x",
                                  "x" * 64])
def test_a_workflow_name_follows_the_rules_of_workload_names(researcher_api, name):
    response = researcher_api.post("/api/pool/training/workflow?priority=LOW",
                                   {"file": FLOW.format(name=f'"{name}"')}, format="json")
    assert response.status_code == 400 and response.json()["field"] == "workflow.name", response.json()
    assert not Workload.objects.exists() and not Workflow.objects.exists()


@pytest.mark.parametrize("name", ["<script>x</script>", "a/b", "crlf\r\n", "rtl\u202e"])
def test_a_native_workload_cannot_name_a_workflow_outside_the_rules(researcher_api, name):
    response = researcher_api.post("/api/workloads/", body(workflow=name, priority="low"), format="json")
    assert response.status_code == 400 and response.json()["field"] == "workflow", response.json()


@pytest.mark.django_db(transaction=True)
def test_concurrent_submissions_of_one_name_get_distinct_ids(world, monkeypatch):
    """Both requests are evaluated before either allocates its ID; the second allocation waits on the first's
    unique row and counts again."""
    barrier = threading.Barrier(2, timeout=60)
    evaluate = submission.evaluate

    def evaluate_then_wait(*args, **kwargs):
        result = evaluate(*args, **kwargs)
        barrier.wait()
        return result

    monkeypatch.setattr(submission, "evaluate", evaluate_then_wait)
    answers = []

    def post(user):
        try:
            # A named project: an earlier transactional test's flush may have removed the migrations' `default`.
            answers.append(submit(client_of(user), query="&project=nlp").json())
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(world["researcher"],)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(str(answer.get("name")) for answer in answers) == ["nightly-1", "nightly-2"], answers
    assert sorted(Workload.objects.values_list("workflow", flat=True)) == ["nightly-1", "nightly-2"]
