"""Issue 24, point 5: `get jobs` (READY from the pods, POOL, a gang's nodes summarised), the doors' sources, `--as-user`
on every command that acts for a user, the workload page (cancel below the status, confirmed for dispatched work;
earlier attempts only; the submitter's own pools), OSMO's answers for a stopping workflow, and refusal hints in the
syntax of the door."""

import json

import pytest
from django.core.management.base import CommandError
from django.test import Client
from django.utils import timezone

from pools.config import writes
from pools.inventory.jobs import pod_run_facts
from pools.models import ConfigKind, ManagedJob
from scheduling.models import Source, Status, Workload
from scheduling.run import attempts
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import body
from tests.scheduling.test_osmo import JOB, submit_workflow
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def submit(api, **fields) -> Workload:
    response = api.post("/api/workloads/", body(**fields), format="json")
    assert response.status_code == 201, response.json()
    return Workload.objects.get(pk=response.json()["id"])


def dispatched(workload: Workload, pods: dict[str, tuple[str, str]]) -> Workload:
    """The workload as dispatch and the sync leave it: its Job named, RUNNING, and the Job's pods (name -> (node,
    phase)) as the sync stores them (pools.inventory.jobs.pod_run_facts of each pod object). By hand: the corrections
    read only these rows, and the world has no cluster; dispatch and the sync on the stand-in are the journeys'."""
    workload.refresh_from_db()
    job = f"wl-{workload.id.hex[:12]}-{workload.attempt}"
    Workload.objects.filter(pk=workload.pk).update(status=Status.RUNNING, job_name=job, namespace="proj-vision",
                                                   dispatched_at=timezone.now(), started_at=timezone.now())
    now = timezone.now().isoformat()
    facts = {name: pod_run_facts({"metadata": {"name": name}, "spec": {"nodeName": node},
                                  "status": {"phase": phase, "podIP": f"10.0.0.{i}" if node else "",
                                             "conditions": [{"type": "Ready",
                                                             "status": str(phase == "Running")}]}}, seen_at=now)
             for i, (name, (node, phase)) in enumerate(pods.items(), 1)}
    ManagedJob.objects.create(backend=workload.pool.backend, namespace="proj-vision", name=job,
                              workload=str(workload.id), attempt=workload.attempt, pods=facts,
                              updated_at=timezone.now())
    workload.refresh_from_db()
    return workload


def test_get_jobs_counts_ready_pods_names_the_pool_and_summarises_a_gangs_nodes(researcher_api):
    gang = submit(researcher_api, name="gang", replicas=4, resources={"gpu": 1, "cpu": "1", "memory": "1Gi"})
    run_cycle()
    gang = dispatched(gang, {f"gang-{i}": (f"h100-{i:03d}", "Running") for i in range(1, 4)}
                      | {"gang-4": ("", "Pending")})
    (row,) = json.loads(run("get", "jobs", "--format", "json"))
    assert (row["ready"], row["pool"], row["node"]) == ("3/4", "training", "h100-001 +2")
    assert row["nodes"] == ["h100-001", "h100-002", "h100-003"] and row["ip"] == "10.0.0.1 +2"
    header, line = run("get", "jobs").splitlines()
    assert header.split()[-4:] == ["AGE", "POOL", "START", "(EST.)"]
    assert "3/4" in line and "h100-001 +2" in line and line.split()[-2:] == ["training", "-"]
    assert "h100-002" not in line  # one summary, not every name padding the row


def test_get_jobs_as_a_user_lists_only_what_they_may_see(world, researcher_api):
    submit(researcher_api, name="mine")
    assert "mine" in run("get", "jobs", "--as-user", "researcher")
    assert "mine" not in run("get", "jobs", "--as-user", "other")  # not a member of vision
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        run("get", "jobs", "--as-user", "nobody")


def test_each_door_records_its_own_source(world, researcher_api, tmp_path):
    assert submit(researcher_api, name="by-api").source == Source.API
    request = tmp_path / "request.yaml"
    request.write_text("name: by-cli\nproject: vision\nimage: busybox\nresources: {gpu: 1}\n")
    run("workload", "submit", "-f", str(request), "--as-user", "researcher")
    assert Workload.objects.get(name="by-cli").source == Source.CLI
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    assert researcher_api.patch("/api/profile/", {"default_project": "vision"}, format="json").status_code == 200
    run("create", "-f", str(job), "--as-user", "researcher")
    assert Workload.objects.get(name="qwen-sft").source == Source.GPUCTL
    assert submit_workflow(researcher_api, query="?priority=LOW").status_code == 200
    assert set(Workload.objects.filter(workflow="sim-train-1").values_list("source", flat=True)) == {Source.OSMO}
    listed = researcher_api.get("/api/workloads/?source=cli").json()
    names = [r["name"] for r in (listed["results"] if isinstance(listed, dict) else listed)]
    assert names == ["by-cli"]


def test_delete_job_acts_for_a_user_as_create_does(world, researcher_api, django_user_model):
    submit(researcher_api, name="sweep")
    with pytest.raises(CommandError, match="no live job named 'sweep'"):
        run("delete", "job", "sweep", "--as-user", "other")  # not theirs to see
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["researcher", "other"]},
        "default_node_pools": ["training"], "resources": [{"node_pool": "training", "gpu": {"deserved": 4}}]}},
        author="tests")
    with pytest.raises(CommandError, match="Only the workload's submitter or an admin may cancel it"):
        run("delete", "job", "sweep", "--as-user", "other")  # a member now, but not the submitter
    assert Workload.objects.get(name="sweep").status == Status.PENDING
    assert run("delete", "job", "sweep", "--as-user", "researcher").startswith("job/sweep deleted")
    workload = Workload.objects.get(name="sweep")
    assert workload.status == Status.FAILED_CANCELED
    assert workload.events.get(reason="CANCELED").message.startswith("Canceled by researcher:")
    with pytest.raises(CommandError, match="applies to jobs only"):
        run("delete", "pool", "training", "--as-user", "researcher")


def test_a_pending_workload_cancels_at_once_and_dispatched_work_asks_for_a_confirmation(world, researcher_api):
    browser = Client()
    browser.force_login(world["researcher"])
    pending = submit(researcher_api, name="waits", replicas=2, resources={"gpu": 8, "cpu": "1", "memory": "1Gi"},
                     priority="low")
    running = submit(researcher_api, name="runs")
    run_cycle()
    running = dispatched(running, {"runs-0": ("h100-001", "Running")})

    page = browser.get(f"/workloads/{pending.pk}/").content.decode()
    assert page.index('id="workload-status"') < page.index('id="cancel-form"')
    assert 'id="cancel-confirm"' not in page
    assert browser.post(f"/workloads/{pending.pk}/cancel/").status_code == 302
    assert Workload.objects.get(pk=pending.pk).status == Status.FAILED_CANCELED

    page = browser.get(f"/workloads/{running.pk}/").content.decode()
    assert page.index('id="workload-status"') < page.index('id="cancel-form"')
    confirm = page[page.index('id="cancel-confirm"') - 40:page.index("</label>", page.index('id="cancel-confirm"'))]
    assert "required" in confirm and f"proj-vision/{running.job_name}" in confirm
    answer = browser.post(f"/workloads/{running.pk}/cancel/", {"message": "oops"}, follow=True)
    assert "tick the confirmation to stop it" in answer.content.decode()
    running.refresh_from_db()
    assert running.status == Status.RUNNING and not running.stop_status  # one click stops nothing
    browser.post(f"/workloads/{running.pk}/cancel/", {"message": "oops", "confirm": "yes"})
    running.refresh_from_db()
    assert running.stop_status == Status.FAILED_CANCELED


def test_earlier_attempts_leave_out_the_current_one(world, researcher_api):
    browser = Client()
    browser.force_login(world["researcher"])
    workload = submit(researcher_api, name="retried")
    run_cycle()
    workload = dispatched(workload, {"retried-0": ("h100-001", "Running")})
    attempts.finish(workload, attempts.RESCHEDULE, "EXIT_CODE", "Exit code 137: rescheduled.", exit_code=137)
    run_cycle()
    workload = dispatched(workload, {"retried-1": ("h100-001", "Succeeded")})
    attempts.finish(workload, Status.COMPLETED, "COMPLETED", "Every replica succeeded.", exit_code=0)
    workload.refresh_from_db()
    assert [a["attempt"] for a in workload.attempts] == [1, 2] and workload.attempt == 2
    page = browser.get(f"/workloads/{workload.pk}/").content.decode()
    table = page[page.index('id="workload-attempts"'):page.index("</table>", page.index('id="workload-attempts"'))]
    assert table.count("<tr>") == 2  # the header and attempt 1
    assert "Exit code 137" in table and "Every replica succeeded" not in table
    assert "Job, attempt 2" in page


def test_the_submitter_reads_every_pool_their_request_named(world, researcher_api, django_user_model):
    secret = {"name": "secret", "backend": "default", "platforms": {"h100": {}}, "default_platform": "h100"}
    writes.import_document(ConfigKind.POOL, {"pools": {"secret": secret}}, author="tests")
    workload = submit(researcher_api, name="named", pools=["secret", "training"])
    first = workload.events.get(reason="SUBMITTED")
    assert "secret" in first.message and "secret" in first.pools

    answer = researcher_api.get(f"/api/workloads/{workload.pk}/").json()
    assert answer["events"][0]["message"] == first.message
    assert answer["request"]["pools"] == ["secret", "training"]
    browser = Client()
    browser.force_login(world["researcher"])
    page = browser.get(f"/workloads/{workload.pk}/").content.decode()
    assert "(about a pool you may not see)" not in page and "Refused by secret" in page

    # A member who did not submit it still reads no word of a pool they may not see.
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["researcher", "other"]},
        "default_node_pools": ["training"], "resources": [{"node_pool": "training", "gpu": {"deserved": 4}}]}},
        author="tests")
    peer = Client()
    peer.force_login(world["other"])
    page = peer.get(f"/workloads/{workload.pk}/").content.decode()
    assert "(about a pool you may not see)" in page and "Refused by secret" not in page


def test_osmo_answers_say_a_workflow_is_stopping_while_its_cancel_deletes_its_jobs(researcher_api):
    name = submit_workflow(researcher_api, query="?priority=LOW").json()["name"]
    run_cycle()
    for workload in Workload.objects.filter(workflow=name):
        dispatched(workload, {f"{workload.group}-0": ("a100-001", "Running")})
    before = researcher_api.get(f"/api/workflow/{name}").json()
    assert before["status"] == "RUNNING" and before["stopping"] is None
    researcher_api.post(f"/api/workflow/{name}/cancel")
    detail = researcher_api.get(f"/api/workflow/{name}").json()
    assert detail["status"] == "RUNNING" and detail["stopping"] == "FAILED_CANCELED"
    assert {g["stopping"] for g in detail["groups"]} == {"FAILED_CANCELED"}
    (listed,) = researcher_api.get("/api/workflow").json()["workflows"]
    assert listed["stopping"] == "FAILED_CANCELED"


def test_refusal_hints_name_the_syntax_of_the_door(world, researcher_api, tmp_path):

    too_big = {"gpu": 4, "cpu": "1", "memory": "1Gi"}
    api = researcher_api.post("/api/workloads/", body(name="big", replicas=2, resources=too_big), format="json")
    assert 'with "priority": "low" in the request body' in api.json()["candidates"][0]["message"]

    request = tmp_path / "request.yaml"
    request.write_text("name: big\nproject: vision\npools: [training]\nimage: busybox\nreplicas: 2\n"
                       "resources: {gpu: 4}\n")
    with pytest.raises(CommandError, match="with priority: low in the request file"):
        run("workload", "submit", "-f", str(request), "--as-user", "researcher")

    assert researcher_api.patch("/api/profile/", {"default_project": "vision"}, format="json").status_code == 200
    job = tmp_path / "job.yaml"
    job.write_text(JOB.replace("  gpu: 2\n", "  gpu: 8\n"))
    with pytest.raises(CommandError, match=r"with job\.priority: low in the job file"):
        run("create", "-f", str(job), "--as-user", "researcher")
    assert not Workload.objects.exists()
