"""OSMO's serial workflows (issue 41 point 3), through the OSMO path and on the stand-in API server: a group that
takes another task's output WAITs (its reason and its estimate say for what), is never admitted before that group
has COMPLETED, is queued once it has, and ends FAILED_UPSTREAM when it failed or was canceled; an unknown task, a
task of its own group or a cycle is a 400 naming the place in the file."""

import pytest

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.conftest import body
from tests.support.commands import run
from tests.support.lifecycle import job_status, observe, pod

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def store(world, tmp_path):
    """The training pool's data store, set as an admin sets it (its endpoint is never called here: the stand-in
    runs no container)."""
    key = tmp_path / "key"
    key.write_text("store-secret-zq")
    run("storage", "set", "training", "--endpoint", "http://127.0.0.1:9", "--bucket", "osmo-data",
        "--access-key-id", "store-id", "--access-key-file", str(key))

SERIAL = """
workflow:
  name: serial
  resources:
    default: {cpu: 1, gpu: 1, memory: 1Gi}
  tasks:
  - name: task1
    image: ubuntu:24.04
    command: [sh, -c, "echo hello > /tmp/out.txt"]
  - name: task2
    image: ubuntu:24.04
    command: [sh, -c, "cat /tmp/in.txt"]
    inputs:
    - task: task1
  - name: task3
    image: ubuntu:24.04
    command: [sh, -c, "true"]
    inputs:
    - task: task2
"""


def submit(api, text=SERIAL, pool="training"):
    return api.post(f"/api/pool/{pool}/workflow?project=vision", {"file": text}, format="json")


def group(name: str) -> Workload:
    return Workload.objects.select_related("pool").get(group=name)


def run_to(standin, kube, workload: Workload, condition: str, exit_code: int) -> Workload:
    """Dispatch the admitted workload, then play its pod and Job to their end."""
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    pod(standin, workload, 0, "Succeeded" if exit_code == 0 else "Failed", exit_code=exit_code)
    job_status(standin, workload, condition, "CompletionsReached" if exit_code == 0 else "BackoffLimitExceeded")
    return observe(kube, workload)


def test_a_serial_workflow_waits_for_its_upstream_then_runs_in_order(standin, kube, researcher_api):
    response = submit(researcher_api)
    assert response.status_code == 200, response.json()
    name = response.json()["name"]
    assert {w.group: w.status for w in Workload.objects.all()} == {
        "task1-group": Status.PENDING, "task2-group": Status.WAITING, "task3-group": Status.WAITING}

    detail = researcher_api.get(f"/api/workloads/{group('task2-group').pk}/").json()
    assert detail["status"] == "WAITING"
    assert detail["reason"]["code"] == "UPSTREAM" and "task1-group" in detail["reason"]["message"]
    assert detail["estimated_start"] is None
    assert detail["estimate_basis"] == "unknown: waits for group task1-group of its workflow to complete."
    assert researcher_api.get(f"/api/workflow/{name}").json()["status"] == "PENDING"

    run_cycle()
    assert group("task1-group").status == Status.ADMITTED
    assert group("task2-group").status == Status.WAITING  # capacity is there; it is not admitted before task1 ends

    first = run_to(standin, kube, group("task1-group"), "Complete", 0)
    assert first.status == Status.COMPLETED
    assert researcher_api.get(f"/api/workflow/{name}").json()["status"] == "WAITING"
    run_cycle()
    second = group("task2-group")
    assert second.status == Status.ADMITTED and group("task3-group").status == Status.WAITING
    assert list(second.events.values_list("status", "reason")) == [
        ("WAITING", "SUBMITTED"), ("PENDING", "UPSTREAM_COMPLETED"), ("ADMITTED", "ADMITTED")]
    assert second.queued_at >= first.finished_at  # its queue timeout counts from its release

    run_to(standin, kube, second, "Complete", 0)
    run_cycle()
    run_to(standin, kube, group("task3-group"), "Complete", 0)
    assert researcher_api.get(f"/api/workflow/{name}").json()["status"] == "COMPLETED"
    order = [w.group for w in Workload.objects.order_by("started_at", "admitted_at")]
    assert order == ["task1-group", "task2-group", "task3-group"]


def test_a_failed_upstream_skips_its_downstream_chain_with_the_reason(standin, kube, researcher_api):
    name = submit(researcher_api).json()["name"]
    run_cycle()
    assert run_to(standin, kube, group("task1-group"), "Failed", 3).status == Status.FAILED
    run_cycle()
    second, third = group("task2-group"), group("task3-group")
    assert (second.status, third.status) == (Status.FAILED_UPSTREAM, Status.FAILED_UPSTREAM)
    assert second.events.last().message == "Group task1-group, whose output it takes, ended FAILED: it will not run."
    assert third.events.last().message == ("Group task2-group, whose output it takes, ended FAILED_UPSTREAM: it "
                                           "will not run.")
    assert second.started_at is None and second.job_name == ""
    assert researcher_api.get(f"/api/workflow/{name}").json()["status"] == "FAILED"


def test_a_canceled_upstream_skips_its_downstream(researcher_api):
    response = submit(researcher_api)
    first = group("task1-group")
    assert researcher_api.post(f"/api/workloads/{first.pk}/cancel/").status_code in (200, 202)
    run_cycle()
    assert group("task2-group").status == Status.FAILED_UPSTREAM
    assert "ended FAILED_CANCELED" in group("task2-group").events.last().message
    assert researcher_api.get(f"/api/workflow/{response.json()['name']}").json()["status"] == "FAILED_CANCELED"


def test_cancelling_the_workflow_cancels_the_waiting_groups_too(researcher_api):
    name = submit(researcher_api).json()["name"]
    researcher_api.post(f"/api/workflow/{name}/cancel")
    assert set(Workload.objects.values_list("status", flat=True)) == {Status.FAILED_CANCELED}


@pytest.mark.parametrize(("upstream", "words"), [
    ("nope", "'nope' is not a task of this workflow; its tasks: task1, task2, task3"),
    ("task3", "the inputs form a cycle of groups (task2-group -> task3-group -> task2-group)"),  # task3 waits for 2
])
def test_an_unknown_task_or_a_cycle_is_a_400_naming_the_place(researcher_api, upstream, words):
    response = submit(researcher_api, SERIAL.replace("    - task: task1", f"    - task: {upstream}"))
    assert response.status_code == 400
    assert response.json()["field"] == "workflow.tasks[1].inputs[0].task" and words in response.json()["detail"]
    assert not Workload.objects.exists()


def test_a_task_cannot_wait_for_a_task_of_its_own_group(researcher_api):
    text = """
workflow:
  name: same-group
  resources:
    default: {cpu: 1, gpu: 1, memory: 1Gi}
  groups:
  - name: both
    tasks:
    - name: a
      lead: true
      image: ubuntu:24.04
      command: [sh]
      inputs: [{task: b}]
    - name: b
      image: ubuntu:24.04
      command: [sh]
      inputs: [{task: b}]
"""
    response = submit(researcher_api, text)
    assert response.status_code == 400
    assert response.json()["field"] == "workflow.groups[0].tasks[0].inputs[0].task"
    assert "same group" in response.json()["detail"]


def test_a_native_workload_cannot_name_another_tasks_output(researcher_api):
    response = researcher_api.post("/api/workloads/", body(inputs=[{"task": "task1"}]), format="json")
    assert response.status_code == 400 and response.json()["field"] == "inputs[0].task"
    assert not Workload.objects.exists()
