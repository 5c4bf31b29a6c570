"""Deleting what workloads name: a department, project or pool that only finished workloads name is deleted and
the history keeps showing its name; one that live workloads name is refused, naming them, by the config CLI, the
config documents API and the admin alike (never a database error)."""


import pytest
from django.core.management.base import CommandError
from django.utils import timezone

from pools.config import writes
from pools.models import ConfigKind, Department, Pool, Project
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import body, project, seed_pool
from tests.support.commands import configure, run

pytestmark = pytest.mark.django_db


def config(*args) -> str:
    return run("config", "--author", "tests", *args)


def submit(researcher_api, **fields) -> Workload:
    created = researcher_api.post("/api/workloads/", body(**fields), format="json")
    assert created.status_code == 201, created.content
    return Workload.objects.get(pk=created.json()["id"])


def finish(*workloads) -> None:
    """The follower's end of each, by hand: they were never dispatched (the world has no cluster); a Job completed
    on the stand-in and followed to COMPLETED is the journeys' (tests/support/journey.py)."""
    Workload.objects.filter(pk__in=[w.pk for w in workloads]).update(status=Status.COMPLETED,
                                                                     finished_at=timezone.now())


def shown(api, workload: Workload) -> dict:
    detail = api.get(f"/api/workloads/{workload.pk}/")
    assert detail.status_code == 200, detail.content
    return detail.json()


@pytest.fixture
def lab(world):
    writes.import_document(ConfigKind.DEPARTMENT, {"lab": {"name": "lab"}}, author="tests")
    project("robots", department="lab", pools={"training": {"deserved": 2}}, users=["researcher"],
            default_pools=["training"])


def test_a_project_that_only_finished_workloads_name_is_deleted_by_the_cli_and_they_keep_its_name(
        researcher_api, api, client, staff, lab):
    workload = submit(researcher_api, project="robots")
    run_cycle()
    finish(workload)

    assert "deleted robots" in config("delete", "PROJECT", "robots")

    assert not Project.objects.filter(name="robots").exists()
    detail = shown(api, workload)
    assert detail["project"] == "robots" and detail["department"] == "lab" and detail["pool"] == "training"
    assert [row["id"] for row in api.get("/api/workloads/", {"project": "robots"}).json()] == [str(workload.pk)]
    assert shown(researcher_api, workload)["project"] == "robots"  # its submitter still sees it
    client.force_login(staff)
    page = client.get(f"/workloads/{workload.pk}/")
    assert page.status_code == 200 and "robots (deleted)" in page.content.decode()
    assert "robots" in client.get("/workloads/").content.decode()


def test_a_project_with_a_live_workload_is_refused_by_the_cli_in_one_line_naming_it(researcher_api, lab):
    live = submit(researcher_api, project="robots", name="still-running")
    finished = submit(researcher_api, project="robots", name="long-done")
    finish(finished)

    with pytest.raises(CommandError) as refused:
        config("delete", "PROJECT", "robots")

    message = str(refused.value)
    assert "\n" not in message and "cannot be deleted" in message
    assert f"{live.short_id} still-running (PENDING)" in message and "long-done" not in message
    assert Project.objects.filter(name="robots").exists()


def test_a_project_with_a_live_workload_is_refused_by_the_api_with_a_400(researcher_api, api, lab):
    live = submit(researcher_api, project="robots")
    run_cycle()

    response = api.delete("/api/configs/project/robots/")

    assert response.status_code == 400, response.content
    assert response.json()["field"] == "name"
    assert f"{live.short_id} train-resnet (ADMITTED)" in response.json()["detail"]
    finish(live)
    assert api.delete("/api/configs/project/robots/").status_code == 200
    assert shown(api, live)["project"] == "robots"


def test_a_refusal_names_a_few_live_workloads_and_counts_the_rest(researcher_api, lab):
    for index in range(7):
        submit(researcher_api, project="robots", name=f"job-{index}")

    with pytest.raises(CommandError, match=r"job-0 \(PENDING\), .*job-4 \(PENDING\) and 2 more; cancel them"):
        config("delete", "PROJECT", "robots")


def test_a_department_whose_projects_only_finished_workloads_name_is_deleted_and_they_keep_its_name(
        researcher_api, api, lab):
    workload = submit(researcher_api, project="robots")
    finish(workload)
    assert api.delete("/api/configs/project/robots/").status_code == 200

    assert "deleted lab" in config("delete", "DEPARTMENT", "lab")

    assert not Department.objects.filter(name="lab").exists()
    assert shown(api, workload)["department"] == "lab" and shown(api, workload)["project"] == "robots"


def test_a_department_with_a_live_workload_is_refused_naming_it_by_the_cli_and_the_api(researcher_api, api, lab):
    live = submit(researcher_api, project="robots")

    with pytest.raises(CommandError, match=f"{live.short_id} train-resnet \\(PENDING\\)"):
        config("delete", "DEPARTMENT", "lab")
    response = api.delete("/api/configs/department/lab/")

    assert response.status_code == 400 and live.short_id in response.json()["detail"]
    assert Department.objects.filter(name="lab").exists()


def test_a_pool_that_only_finished_workloads_name_is_deleted_by_the_api_and_they_keep_its_name(
        researcher_api, api, world):
    workload = submit(researcher_api, project="nlp", priority="low")
    run_cycle()
    assert Workload.objects.get(pk=workload.pk).pool.name == "training"
    finish(workload)
    for name in Project.objects.filter(default_node_pools__contains=["training"]).values_list("name", flat=True):
        configure("PROJECT", name, default_node_pools=[])

    response = api.delete("/api/configs/pool/training/")

    assert response.status_code == 200, response.content
    assert not Pool.objects.filter(name="training").exists()
    detail = shown(api, workload)
    assert detail["pool"] == "training" and detail["pools"] == ["training"]
    assert [row["id"] for row in api.get("/api/workloads/", {"pool": "training"}).json()] == [str(workload.pk)]


def test_a_pool_with_a_live_workload_is_refused_naming_it_by_the_cli_and_the_api(researcher_api, api, world):
    waiting = submit(researcher_api, project="nlp", priority="low", name="waits-for-training")

    with pytest.raises(CommandError) as refused:
        config("delete", "POOL", "training")
    response = api.delete("/api/configs/pool/training/")

    assert f"{waiting.short_id} waits-for-training (PENDING)" in str(refused.value)
    assert response.status_code == 400 and waiting.short_id in response.json()["detail"]
    assert Pool.objects.filter(name="training").exists()


def test_a_pool_whose_own_project_runs_live_work_is_refused(researcher_api, api, world):
    quota = {**seed_pool(), "name": "quota", "common_pod_template": ["default_user"],
             "resources": {"gpu": {"guarantee": 2}}}
    writes.import_document(ConfigKind.POOL, {"pools": {"quota": quota}}, author="tests")
    assert Project.objects.get(name="quota").pool.name == "quota"
    created = api.post("/api/workloads/", body(name="own", project="quota", pools=["quota"]), format="json")
    assert created.status_code == 201, created.json()  # staff submit to the pool's own project
    live = Workload.objects.get(pk=created.json()["id"])

    response = api.delete("/api/configs/pool/quota/")

    assert response.status_code == 400 and live.short_id in response.json()["detail"]


def test_the_admin_refuses_a_project_with_live_work_with_a_400_and_deletes_one_with_history(
        researcher_api, admin_client, lab):
    live = submit(researcher_api, project="robots")
    robots = Project.objects.get(name="robots")

    refused = admin_client.post(f"/admin/pools/project/{robots.pk}/delete/", {"post": "yes"})

    assert refused.status_code == 400 and live.short_id in refused.content.decode()
    finish(live)
    assert admin_client.post(f"/admin/pools/project/{robots.pk}/delete/", {"post": "yes"}).status_code == 302
    assert Workload.objects.get(pk=live.pk).project_name == "robots"
    assert "robots" in admin_client.get("/admin/scheduling/workload/").content.decode()
    assert "robots" in admin_client.get(f"/admin/scheduling/workload/{live.pk}/change/").content.decode()


def test_the_rollback_page_refuses_to_undo_a_projects_creation_while_live_work_names_it(
        researcher_api, client, staff, lab):
    from pools.models import ConfigRevision

    live = submit(researcher_api, project="robots")
    created = ConfigRevision.objects.get(kind=ConfigKind.PROJECT, name="robots", action=ConfigRevision.Action.CREATE)
    client.force_login(staff)

    page = client.post(f"/config/history/rollback/?type=project&revision={created.number}&before=1",
                       {"confirm": "yes"})

    assert page.status_code == 400 and live.short_id in page.content.decode()
    assert Project.objects.filter(name="robots").exists()
