"""OSMO's workflow endpoints and gpuctl's job file, over the seed pool and role: accepted, refused and queued."""

import json

import pytest
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from scheduling.models import Source, Status, Workload
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import SHARED
from tests.support.commands import run

pytestmark = pytest.mark.django_db

WORKFLOW = """
workflow:
  name: sim-train
  resources:
    default:
      cpu: 4
      gpu: 1
      memory: 16Gi
      storage: 10Gi
    big:
      cpu: 8
      gpu: 4
      memory: 64Gi
      platform: a100_platform
  tasks:
  - name: prepare
    image: ubuntu:24.04
    command: [bash, -c, "echo {{ dataset }}"]
  groups:
  - name: train
    tasks:
    - name: worker-0
      lead: true
      image: nvcr.io/nvidia/pytorch:24.05-py3
      command: [python, train.py]
      resource: big
    - name: worker-1
      image: nvcr.io/nvidia/pytorch:24.05-py3
      command: [python, train.py]
      resource: big
"""


def submit_workflow(api, text=WORKFLOW, query="", variables=("dataset=imagenet",)):
    return api.post(f"/api/pool/{SHARED}/workflow{query}", {"file": text, "set_variables": list(variables)},
                    format="json")


def test_a_workflow_becomes_one_gang_workload_per_group_under_one_name(researcher_api):
    response = submit_workflow(researcher_api, query="?priority=LOW")
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert answer["name"] == "sim-train-1"
    assert set(answer) >= {"name", "overview", "logs", "spec", "dashboard_url", "warnings"}
    rows = {w.group or w.name: w for w in Workload.objects.filter(workflow="sim-train-1")}
    assert set(rows) == {"prepare-group", "train"}
    assert rows["train"].replicas == 2 and rows["train"].gpu == 4 and rows["train"].priority == "low"
    assert rows["train"].templates[SHARED]["platform"] == "a100_platform"
    assert rows["prepare-group"].source == Source.OSMO
    user = rows["prepare-group"].templates[SHARED]["pod_template"]["spec"]["containers"][0]
    assert user["command"] == ["bash", "-c", "echo imagenet"]
    assert submit_workflow(researcher_api, query="?priority=LOW").json()["name"] == "sim-train-2"


def test_the_osmo_reads_answer_in_osmo_shapes_and_cancel_cancels_every_group(researcher_api):
    name = submit_workflow(researcher_api, query="?priority=LOW").json()["name"]
    run_cycle()
    listed = researcher_api.get("/api/workflow").json()
    assert [w["name"] for w in listed["workflows"]] == [name]
    detail = researcher_api.get(f"/api/workflow/{name}").json()
    assert {g["name"] for g in detail["groups"]} == {"prepare-group", "train"}
    answer = researcher_api.post(f"/api/workflow/{name}/cancel").json()
    assert answer["message"] == f"Cancel job for workflow {name} is submitted!"
    assert set(Workload.objects.filter(workflow=name).values_list("status", flat=True)) == {Status.FAILED_CANCELED}
    assert researcher_api.get("/api/workflow/nope").status_code == 404


def test_the_workflow_list_pages_past_the_end_and_past_the_databases_integers(researcher_api):
    """Found by the fuzz test: an offset of 10**29 reached SQLite as an OFFSET ("datatype mismatch", a 500)."""
    name = submit_workflow(researcher_api, query="?priority=LOW").json()["name"]

    first = researcher_api.get("/api/workflow?limit=1").json()
    assert [w["name"] for w in first["workflows"]] == [name] and first["more_entries"] is False
    for offset in (1, 10 ** 29):
        response = researcher_api.get(f"/api/workflow?offset={offset}")
        assert response.status_code == 200
        assert response.json() == {"workflows": [], "more_entries": False}


def test_dry_run_saves_nothing_and_normal_priority_above_the_guarantee_is_refused(researcher_api):
    dry = submit_workflow(researcher_api, query="?priority=LOW&dry_run=true")
    assert dry.status_code == 200 and dry.json()["dry_run"] is True
    assert not Workload.objects.exists()
    # vision is guaranteed 2 GPUs in the seed pool; the train group asks for 8 at normal priority.
    refused = submit_workflow(researcher_api)
    assert refused.status_code == 400
    # The hint in OSMO's syntax: the workflow path takes its priority as a query parameter.
    assert "Group train: " in refused.json()["detail"] and "with ?priority=LOW on the workflow path" in \
        refused.json()["detail"]
    assert "priority: low" not in refused.json()["detail"]
    assert not Workload.objects.exists()


def test_fields_we_do_not_run_are_refused_by_name(researcher_api):
    # inputs, outputs and credentials run: tests/workflows/
    for field, value in (("files", "[{path: /a, localpath: a.sh}]"), ("checkpoint", "{}")):
        text = WORKFLOW.replace("    command: [bash, -c, \"echo {{ dataset }}\"]",
                                f"    command: [bash]\n    {field}: {value}")
        response = submit_workflow(researcher_api, text=text)
        assert response.status_code == 400, (field, response.json())
        assert field in response.json()["detail"] and field in (response.json()["field"] or "")


def test_the_seed_role_authorizes_the_osmo_path(world):
    api = APIClient()
    api.force_authenticate(world["other"])  # no osmo-shared role
    response = submit_workflow(api, query="?priority=LOW")
    assert response.status_code == 403
    assert not Workload.objects.exists()


JOB = """kind: training
version: v0.1
job:
  name: qwen-sft
  priority: medium
environment:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  command: ["torchrun", "train.py"]
  args: ["--epochs", "3"]
  env:
    - name: NCCL_DEBUG
      value: INFO
resources:
  pool: training
  gpu: 2
  gpu-type: H100
  cpu: 8
  memory: 64Gi
"""


def test_a_gpuctl_job_file_is_created_listed_and_deleted(world, researcher_api, tmp_path):
    assert researcher_api.patch("/api/profile/", {"default_project": "vision"}, format="json").status_code == 200
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    created = run("create", "-f", str(path), "--as-user", "researcher")
    assert created.startswith("job/qwen-sft created") and "project vision" in created
    workload = Workload.objects.get(name="qwen-sft")
    assert workload.source == Source.GPUCTL and workload.gpu == 2 and workload.priority == "normal"
    assert workload.variables["GPU_TYPE"] == "H100"
    listing = run("get", "jobs", "--pool", "training")
    assert listing.splitlines()[0].split() == ["JOB", "ID", "NAME", "NAMESPACE", "KIND", "STATUS", "READY", "NODE",
                                               "IP", "AGE", "POOL", "START", "(EST.)"]  # gpuctl's, and ours
    assert "qwen-sft" in listing and "proj-vision" in listing and "Pending" in listing
    assert json.loads(run("get", "jobs", "--format", "json"))[0]["name"] == "qwen-sft"
    assert run("delete", "job", "qwen-sft").startswith("job/qwen-sft deleted")
    assert Workload.objects.get().status == Status.FAILED_CANCELED
    with pytest.raises(CommandError, match="no live job named 'qwen-sft'"):
        run("delete", "job", "qwen-sft")


def test_a_gpuctl_file_with_a_field_gpuctl_would_drop_is_refused_by_name(world, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB.replace("  gpu: 2\n", "  gpu: 2\n  gpus: 4\n"))
    with pytest.raises(CommandError, match=r"resources\.gpus"):
        run("create", "-f", str(path), "--as-user", "researcher")
    assert not Workload.objects.exists()
