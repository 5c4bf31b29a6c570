"""Submitting from the browser (issue 26 point 3): `/workloads/new/` and its dry-run fragment go through the same
pipeline as the API; errors are shown beside the box they name; a user picks only projects and pools they may use;
"Run again" fills the form for those who may read the request; CSRF holds; what the user typed is escaped."""

import re

import pytest
from django.test import Client

from scheduling.models import SubmissionCount, Workload
from tests.scheduling.conftest import SHARED, post_workload, project

pytestmark = pytest.mark.django_db

FORM = {"mode": "fields", "project": "vision", "pool_1": "training", "name": "train-resnet",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": "python train.py", "args": "--epochs 10 --note 'a b'",
        "env": "LR=0.001\nWANDB_MODE=offline", "replicas": "2", "gpu": "1", "cpu": "4", "memory": "16Gi",
        "priority": "normal", "exec_timeout": "2h"}
API_BODY = {"name": "train-resnet", "project": "vision", "pools": ["training"],
            "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"],
            "args": ["--epochs", "10", "--note", "a b"], "env": {"LR": "0.001", "WANDB_MODE": "offline"},
            "replicas": 2, "resources": {"gpu": "1", "cpu": "4", "memory": "16Gi"}, "priority": "normal",
            "exec_timeout": "2h"}
# What two submissions of the same input may differ in: identity, time and the door.
OWN = {"id", "submitted_at", "updated_at", "source", "first_events", "_state"}


def form(**changes) -> dict:
    return {**FORM, **changes}


def error_of(text: str, field: str) -> str:
    """The refusal shown beside the box `field` (its `<small id="id_FIELD-error">`)."""
    found = re.search(rf'id="id_{field}-error"[^>]*>(.*?)</small>', text, re.S)
    assert found, f"no error beside {field}"
    return found.group(1)


def test_the_form_creates_the_workload_the_api_would_for_the_same_input(world, researcher_client, researcher_api):
    answer = researcher_client.post("/workloads/new/", form())
    assert answer.status_code == 302, answer.content.decode()[:2000]
    from_form = Workload.objects.get(source="web")
    assert answer["Location"] == f"/workloads/{from_form.pk}/"
    from_api = Workload.objects.get(pk=post_workload(researcher_api, **API_BODY)["id"])

    def columns(workload):
        return {k: v for k, v in vars(workload).items() if k not in OWN}
    assert columns(from_form) == columns(from_api)
    assert from_form.request["args"] == ["--epochs", "10", "--note", "a b"]
    event = from_form.events.get()
    assert "via web" in event.message


def test_the_dry_run_fragment_shows_each_pool_accepting_or_refusing_and_saves_nothing(world, researcher_client):
    before = Workload.objects.count()
    answer = researcher_client.post("/workloads/new/dry-run/", form(pool_1="training", pool_2=SHARED, platform="h100"),
                                    HTTP_HX_REQUEST="true")
    text = answer.content.decode()
    assert answer.status_code == 200, text
    assert "<html" not in text
    assert 'data-pool="training" data-accepted="yes"' in text
    assert f'data-pool="{SHARED}" data-accepted="no"' in text
    assert f"Platform h100 is not one of pool {SHARED}" in text  # the pipeline's words
    assert "&quot;image&quot;: &quot;nvcr.io/nvidia/pytorch:24.05-py3&quot;" in text  # the rendered pod template
    assert "A cycle now would admit it in pool <strong>training</strong>" in text
    assert Workload.objects.count() == before


def test_a_refusal_by_every_pool_is_shown_per_pool_and_nothing_is_saved(world, researcher_client):
    answer = researcher_client.post("/workloads/new/", form(gpu="64"))  # larger than every node
    text = answer.content.decode()
    assert answer.status_code == 400
    assert 'data-pool="training" data-accepted="no"' in text and "No candidate pool can take this workload" in text
    assert not Workload.objects.exists()
    # nlp is guaranteed nothing: the hint is in the form's words.
    text = researcher_client.post("/workloads/new/", form(project="nlp")).content.decode()
    assert "by choosing priority low" in text


def test_the_form_costs_the_same_queries_for_2_or_12_projects(world, researcher_client, django_assert_num_queries):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as few:
        assert researcher_client.get("/workloads/new/").status_code == 200
    for i in range(10):
        project(f"extra-{i}", users=["researcher"], default_pools=["training", SHARED])
    with django_assert_num_queries(len(few.captured_queries)):
        page = researcher_client.get("/workloads/new/")
    assert '<option value="extra-9"' in page.content.decode()


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"gpu": "1.5"}, "gpu", "resources.gpu: &#x27;1.5&#x27; is not a whole number"),
    ({"memory": "lots"}, "memory", "resources.memory:"),
    ({"env": "LR=1\nno equals sign"}, "env", "env: line 2: expected NAME=value"),
    ({"env": "CUDA_VISIBLE_DEVICES=0"}, "env", "CUDA_VISIBLE_DEVICES"),
    ({"name": "not a name!"}, "name", "is not a valid name"),
    ({"image": ""}, "image", "image"),
    ({"command": "python 'unclosed"}, "command", "command: No closing quotation"),
    ({"replicas": "5000"}, "replicas", "replicas: must be between 1 and 1000"),
    ({"replicas": "two"}, "replicas", "Enter a whole number"),
    ({"exec_timeout": "3d"}, "exec_timeout", "above pool training"),
])
def test_validation_errors_are_shown_beside_the_field_they_name(world, researcher_client, changes, field, words):
    answer = researcher_client.post("/workloads/new/", form(**changes))
    text = answer.content.decode()
    assert answer.status_code == 400, text[:500]
    assert words in (error_of(text, field) if field != "exec_timeout" else text)
    assert not Workload.objects.exists()


def test_a_user_may_pick_only_projects_and_pools_they_may_use(world):
    other = Client()
    other.force_login(world["other"])  # member of nlp only; may use training, not the shared pool
    page = other.get("/workloads/new/").content.decode()
    assert '<option value="nlp"' in page and '<option value="vision"' not in page
    assert f'<option value="{SHARED}"' not in page and '<option value="training"' in page

    answer = other.post("/workloads/new/", form(project="vision"))
    assert answer.status_code == 400
    assert "Select a valid choice" in error_of(answer.content.decode(), "project")
    answer = other.post("/workloads/new/", form(project="nlp", pool_1=SHARED))
    assert answer.status_code == 400
    assert "Select a valid choice" in error_of(answer.content.decode(), "pool_1")
    fragment = other.post("/workloads/new/dry-run/", form(project="vision"), HTTP_HX_REQUEST="true")
    assert fragment.status_code == 400 and "Select a valid choice" in fragment.content.decode()
    assert not Workload.objects.exists()


def test_the_project_defaults_come_first_and_are_chosen(world, researcher_client):
    page = researcher_client.get("/workloads/new/?project=vision").content.decode()
    choices = re.search(r'<select name="pool_1".*?</select>', page, re.S).group(0)
    assert re.findall(r'<option value="([^"]*)"', choices) == ["", "training", "default", SHARED]
    assert '<option value="training" selected>training (default)</option>' in choices
    fragment = researcher_client.get("/workloads/new/?project=nlp", HTTP_HX_REQUEST="true",
                                     HTTP_HX_TARGET="pool-choices")
    assert fragment["HX-Trigger"] == "pools-changed"
    assert fragment.content.decode().strip().startswith("<fieldset id=\"pool-choices\"")


def test_run_again_fills_the_form_from_the_request_for_those_who_may_read_it(world, researcher_client,
                                                                             researcher_api):
    workload = post_workload(researcher_api, **{**API_BODY, "project": "nlp", "priority": "low",
                                               "env": {"LR": "0.001", "HF_TOKEN": "hf-secret-zq"}})
    page = researcher_client.get(f"/workloads/{workload['id']}/").content.decode()
    assert f'href="/workloads/new/?from={workload["id"]}"' in page
    again = researcher_client.get(f"/workloads/new/?from={workload['id']}").content.decode()
    assert 'value="train-resnet"' in again and 'value="python train.py"' in again
    assert "value=\"--epochs 10 --note &#x27;a b&#x27;\"" in again
    assert 'value="16Gi"' in again and 'value="2h"' in again and 'value="2"' in again
    assert "HF_TOKEN=hf-secret-zq" in again  # the submitter reads their own values
    assert '<option value="nlp" selected>' in again

    member = Client()
    member.force_login(world["other"])  # a member of nlp who did not submit it: reads it, credentials masked
    masked = member.get(f"/workloads/new/?from={workload['id']}").content.decode()
    assert "hf-secret-zq" not in masked and "HF_TOKEN=********" in masked and "replace them" in masked

    hidden = post_workload(researcher_api, **{**API_BODY, "project": "default", "pools": ["default"],
                                              "resources": {"cpu": "1"}, "command": ["secret-flag-zq"]})
    refused = member.get(f"/workloads/new/?from={hidden['id']}")  # default: everyone sees it, few read it
    assert refused.status_code == 200
    text = refused.content.decode()
    assert "secret-flag-zq" not in text and "may read its request" in text
    assert member.get("/workloads/new/?from=not-a-uuid").status_code == 404
    vision = post_workload(researcher_api, name="only-vision")
    assert member.get(f"/workloads/new/?from={vision['id']}").status_code == 404  # not theirs to see


def test_run_again_gives_a_request_the_boxes_cannot_hold_as_a_body(world, researcher_client, researcher_api):
    workload = post_workload(researcher_api, **{**API_BODY, "exit_actions": {"RESCHEDULE": "3"}})
    text = researcher_client.get(f"/workloads/new/?from={workload['id']}").content.decode()
    assert re.search(r'<input type="radio" name="mode" value="request"[^>]*checked', text)
    assert "&quot;exit_actions&quot;" in text
    answer = researcher_client.post("/workloads/new/", form(mode="request", file=re.search(
        r'<textarea name="file"[^>]*>(.*?)</textarea>', text, re.S).group(1).replace("&quot;", '"')
        .replace("&#x27;", "'")))
    assert answer.status_code == 302, re.findall(r'role="alert"[^>]*>(.*?)<', answer.content.decode())
    again = Workload.objects.get(source="web")
    assert again.exit_actions == {"RESCHEDULE": "3"} and again.replicas == 2


def test_csrf_is_enforced_for_the_submit_and_the_dry_run(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["researcher"])
    assert client.post("/workloads/new/", form()).status_code == 403
    assert client.post("/workloads/new/dry-run/", form(), HTTP_HX_REQUEST="true").status_code == 403
    page = client.get("/workloads/new/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert client.post("/workloads/new/", form(csrfmiddlewaretoken=token)).status_code == 302
    assert Workload.objects.count() == 1


def test_hostile_input_is_escaped_in_the_form_and_the_dry_run(world, researcher_client):
    hostile = "<script>alert(1)</script>"
    answer = researcher_client.post("/workloads/new/dry-run/", form(args=f"'{hostile}'", env=f"NOTE={hostile}",
                                                                    platform=hostile), HTTP_HX_REQUEST="true")
    text = answer.content.decode()
    assert hostile not in text and "&lt;script&gt;" in text
    page = researcher_client.post("/workloads/new/", form(name=hostile, env=f"NOTE={hostile}"))
    assert page.status_code == 400
    assert hostile not in page.content.decode() and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.content.decode()


OSMO = """workflow:
  name: paste-flow
  resources:
    default: {cpu: 2, gpu: 1, memory: 8Gi}
  groups:
  - name: train
    tasks:
    - {name: w0, image: nvcr.io/nvidia/pytorch:24.05-py3, command: [python, train.py], lead: true}
    - {name: w1, image: nvcr.io/nvidia/pytorch:24.05-py3, command: [python, train.py]}
"""
GPUCTL = """kind: training
job: {name: paste-job, priority: low}
environment: {image: nvcr.io/nvidia/pytorch:24.05-py3, command: [python, train.py]}
resources: {gpu: 1, cpu: 2, memory: 8Gi}
"""


def test_a_pasted_osmo_workflow_and_gpuctl_job_go_through_their_readers(world, researcher_client):
    dry = researcher_client.post("/workloads/new/dry-run/", form(mode="osmo", file=OSMO), HTTP_HX_REQUEST="true")
    assert dry.status_code == 200 and "Workflow <code>paste-flow</code>" in dry.content.decode()
    assert not Workload.objects.exists()
    answer = researcher_client.post("/workloads/new/", form(mode="osmo", file=OSMO))
    assert answer.status_code == 302 and answer["Location"] == "/workloads/?workflow=paste-flow-1"
    flow = Workload.objects.get(workflow="paste-flow-1")
    assert (flow.name, flow.replicas, flow.pools, flow.project.name) == ("train", 2, ["training"], "vision")

    answer = researcher_client.post("/workloads/new/", form(mode="gpuctl", file=GPUCTL, project="nlp"))
    assert answer.status_code == 302, answer.content.decode()[:1500]
    job = Workload.objects.get(name="paste-job")
    assert (job.priority, job.project.name, job.pools) == ("low", "nlp", ["training"])

    notebook = researcher_client.post("/workloads/new/", form(mode="gpuctl", project="nlp", file=GPUCTL.replace(
        "kind: training", "kind: notebook").replace("paste-job", "paste-notebook")))
    assert notebook.status_code == 302 and Workload.objects.get(name="paste-notebook").kind == "notebook"
    bad = researcher_client.post("/workloads/new/", form(mode="gpuctl", file=GPUCTL.replace("kind: training",
                                                                                            "kind: batch")))
    assert bad.status_code == 400 and "kind: &#x27;batch&#x27;" in error_of(bad.content.decode(), "file")
    empty = researcher_client.post("/workloads/new/", form(mode="osmo", file=""))
    assert "paste the OSMO workflow here" in error_of(empty.content.decode(), "file")


def test_the_form_honours_the_rate_and_size_limits(world, researcher_client, settings):
    settings.OSMO_SUBMISSIONS_PER_MINUTE = 2
    for _ in range(2):
        assert researcher_client.post("/workloads/new/dry-run/", form(), HTTP_HX_REQUEST="true").status_code == 200
    limited = researcher_client.post("/workloads/new/dry-run/", form(), HTTP_HX_REQUEST="true")
    assert limited.status_code == 429 and "OSMO_SUBMISSIONS_PER_MINUTE" in limited.content.decode()
    SubmissionCount.objects.all().delete()
    settings.OSMO_SUBMISSION_MAX_BYTES = 500
    large = researcher_client.post("/workloads/new/", form(mode="osmo", file=OSMO + "#" * 600))
    assert large.status_code == 413 and "OSMO_SUBMISSION_MAX_BYTES" in large.content.decode()
    assert not Workload.objects.exists()


def test_the_workloads_and_project_pages_link_to_the_form(world, researcher_client):
    assert 'id="new-workload" role="button" href="/workloads/new/"' in researcher_client.get(
        "/workloads/").content.decode()
    assert 'href="/workloads/new/?project=vision"' in researcher_client.get("/projects/vision/").content.decode()
    page = researcher_client.get("/workloads/new/?project=nlp").content.decode()
    assert '<option value="nlp" selected>' in page
