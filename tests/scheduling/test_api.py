"""`/api/workloads/`: submit, dry run, read, list and cancel, through the five steps and one admission cycle."""

import pytest

from scheduling.models import Status, Workload, WorkloadEvent
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import SHARED, body
from tests.support.commands import configure

pytestmark = pytest.mark.django_db


def test_it_queues_a_workload_and_answers_it_as_get_shows_it(researcher_api):
    response = researcher_api.post("/api/workloads/", body(), format="json")
    assert response.status_code == 201, response.json()
    created = response.json()
    assert created["status"] == "PENDING"
    assert created["pools"] == ["training"]  # the project's default list
    assert created["resources"] == {"gpu": 1, "cpu": 4, "memory": 16 * 1024 ** 3, "storage": 1024 ** 3}
    template = created["pod_templates"]["training"]
    assert template["platform"] == "h100"
    user = template["pod_template"]["spec"]["containers"][0]
    assert user["name"] == "user" and user["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert user["resources"]["requests"]["nvidia.com/gpu"] == 1
    assert template["pod_template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    fetched = researcher_api.get(f"/api/workloads/{created['id']}/").json()
    assert fetched == created
    assert [e["status"] for e in fetched["events"]] == ["PENDING"]


def test_a_cycle_admits_it_and_records_the_event(researcher_api):
    created = researcher_api.post("/api/workloads/", body(), format="json").json()
    result = run_cycle()
    assert [item["id"] for item in result.admitted] == [created["id"]]
    workload = Workload.objects.get(pk=created["id"])
    assert workload.status == Status.ADMITTED and workload.pool.name == "training"
    assert sum(workload.placement.values()) == 1
    assert list(WorkloadEvent.objects.filter(workload=workload).values_list("status", flat=True)) == [
        "PENDING", "ADMITTED"]


def test_dry_run_answers_each_candidate_and_saves_nothing(researcher_api):
    response = researcher_api.post("/api/workloads/?dry_run=1", body(pools=["training", SHARED]), format="json")
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert [c["pool"] for c in answer["candidates"]] == ["training", SHARED]
    assert all(c["accepted"] for c in answer["candidates"])
    assert answer["candidates"][1]["platform"] == "l40s_platform"
    assert answer["admission"]["would_admit"] is True
    assert not Workload.objects.exists()


def test_it_refuses_a_request_no_candidate_can_ever_take_listing_each_refusal(researcher_api):
    response = researcher_api.post("/api/workloads/", body(pools=["training", SHARED], resources={"gpu": 16}),
                                   format="json")
    assert response.status_code == 400
    answer = response.json()
    assert answer["field"] == "pools"
    assert [(c["pool"], c["step"], c["code"]) for c in answer["candidates"]] == [
        ("training", "schedule", "CAPACITY"), (SHARED, "schedule", "CAPACITY")]
    assert "more than any node of platform training/h100 has (the largest: 8 H100 GPUs" in answer["detail"]
    assert not Workload.objects.exists()


def test_non_preemptible_work_above_deserved_everywhere_is_refused_with_a_suggestion(researcher_api):
    response = researcher_api.post("/api/workloads/", body(resources={"gpu": 4}, replicas=2), format="json")
    assert response.status_code == 400
    candidate = response.json()["candidates"][0]
    assert candidate["code"] == "QUOTA" and 'with "priority": "low" in the request body' in candidate["message"]
    low = researcher_api.post("/api/workloads/", body(resources={"gpu": 4}, replicas=2, priority="low"), format="json")
    assert low.status_code == 201


def test_pending_work_carries_a_reason_per_pool_with_numbers_and_positions(researcher_api):
    for i in range(4):
        researcher_api.post("/api/workloads/", body(name=f"fill-{i}", resources={"gpu": 1}), format="json")
    run_cycle()
    waiting = researcher_api.post("/api/workloads/", body(name="waits", resources={"gpu": 1}), format="json").json()
    run_cycle()
    shown = researcher_api.get(f"/api/workloads/{waiting['id']}/").json()
    assert shown["status"] == "PENDING"
    assert shown["reasons"][0]["code"] == "QUOTA"
    assert shown["reasons"][0]["message"].startswith("Project vision has 4 of 4 guaranteed H100 GPUs in use")
    assert shown["positions"] == {"training": 1}


def test_bad_input_is_a_400_naming_the_field(researcher_api):
    for data, field in (({"name": "x"}, "image"), (body(resources={"gpu": "lots"}), "resources.gpu"),
                        (body(priority="urgent"), "priority"), (body(replicas=0), "replicas"),
                        (body(project="nope"), "project"), (body(exec_timeout="forever"), "exec_timeout")):
        response = researcher_api.post("/api/workloads/", data, format="json")
        assert response.status_code == 400, (data, response.json())
        assert response.json()["field"] == field
    assert not Workload.objects.exists()


def test_timeouts_above_the_pool_maximum_are_refused_not_capped(researcher_api):
    response = researcher_api.post("/api/workloads/", body(exec_timeout="2d"), format="json")
    assert response.status_code == 400
    assert "above pool training's maximum of 1d" in response.json()["candidates"][0]["message"]


def test_a_pool_the_user_may_not_use_is_refused_as_if_it_did_not_exist(world, client, django_user_model):
    from rest_framework.test import APIClient

    outsider = django_user_model.objects.create_user("outsider")
    api = APIClient()
    api.force_authenticate(outsider)
    response = api.post("/api/workloads/", body(project="default", pools=["training"]), format="json")
    assert response.status_code == 403
    assert "does not exist or you may not use it" in response.json()["candidates"][0]["message"]


def test_only_members_submit_to_a_project(world):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(world["other"])
    response = api.post("/api/workloads/", body(project="vision"), format="json")
    assert response.status_code == 400 and response.json()["field"] == "project"


def test_maintenance_refuses_everyone_but_staff(researcher_api, api):
    configure("POOL", "training", enable_maintenance=True)
    response = researcher_api.post("/api/workloads/", body(), format="json")
    assert response.status_code == 403
    assert response.json()["candidates"][0]["message"] == ("Pool training is in maintenance: only admins may submit "
                                                           "to it until it ends.")
    assert api.post("/api/workloads/", body(), format="json").status_code == 201
    run_cycle()
    assert Workload.objects.get().reasons[0]["code"] == "MAINTENANCE"


def test_the_owner_cancels_and_others_may_not(researcher_api, world):
    from rest_framework.test import APIClient

    created = researcher_api.post("/api/workloads/", body(project="nlp", priority="low"), format="json").json()
    other = APIClient()
    other.force_authenticate(world["other"])
    assert other.post(f"/api/workloads/{created['id']}/cancel/").status_code == 403
    answer = researcher_api.post(f"/api/workloads/{created['id']}/cancel/").json()
    assert answer["status"] == "FAILED_CANCELED" and answer["canceled"] is True
    assert researcher_api.post(f"/api/workloads/{created['id']}/cancel/").json()["canceled"] is False


def test_lists_are_scoped_and_filtered(researcher_api, world, api):
    researcher_api.post("/api/workloads/", body(name="mine"), format="json")
    api.post("/api/workloads/", body(name="staff-only", project="default", pools=["default"], resources={"gpu": 0}),
             format="json")
    from rest_framework.test import APIClient

    other = APIClient()
    other.force_authenticate(world["other"])
    # The default project is open to everyone; vision is not other's.
    assert [w["name"] for w in other.get("/api/workloads/").json()] == ["staff-only"]
    assert {w["name"] for w in researcher_api.get("/api/workloads/").json()} == {"mine", "staff-only"}
    mine = Workload.objects.get(name="mine").pk
    assert other.get(f"/api/workloads/{mine}/").status_code == 404
    assert {w["name"] for w in api.get("/api/workloads/").json()} == {"mine", "staff-only"}
    assert [w["name"] for w in api.get("/api/workloads/?pool=training").json()] == ["mine"]
    assert [w["name"] for w in api.get("/api/workloads/?status=PENDING&project=vision").json()] == ["mine"]
    page = api.get("/api/workloads/?limit=1").json()
    assert page["count"] == 2 and len(page["results"]) == 1


def test_the_list_costs_a_fixed_number_of_queries(researcher_api, django_assert_max_num_queries):
    for i in range(3):
        researcher_api.post("/api/workloads/", body(name=f"w{i}"), format="json")
    with django_assert_max_num_queries(8):
        assert len(researcher_api.get("/api/workloads/").json()) == 3


def test_a_profile_sets_the_default_project_of_submissions(researcher_api):
    assert researcher_api.get("/api/profile/").json()["default_project"] == "default"
    refused = researcher_api.patch("/api/profile/", {"default_project": "secret"}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "default_project"
    assert researcher_api.patch("/api/profile/", {"default_project": "nlp"}, format="json").json()[
        "default_project"] == "nlp"
    request = body(priority="low")
    del request["project"]
    created = researcher_api.post("/api/workloads/", request, format="json").json()
    assert created["project"] == "nlp"
    assert researcher_api.patch("/api/profile/", {"default_project": None}, format="json").json()[
        "default_project"] == "default"


def test_the_workload_answers_have_the_documented_shapes(researcher_api):
    from tests.test_openapi import assert_documented

    schema = researcher_api.get("/api/schema/?format=json").json()
    created = researcher_api.post("/api/workloads/", body(), format="json")
    run_cycle()
    pending = researcher_api.post("/api/workloads/", body(name="later", resources={"gpu": 4}), format="json")
    run_cycle()
    workload_id = pending.json()["id"]
    answers = [
        ("/api/workloads/", "post", "201", created),
        ("/api/workloads/", "post", "200", researcher_api.post("/api/workloads/?dry_run=1", body(), format="json")),
        ("/api/workloads/", "get", "200", researcher_api.get("/api/workloads/")),
        ("/api/workloads/{id}/", "get", "200", researcher_api.get(f"/api/workloads/{workload_id}/")),
        ("/api/workloads/{id}/cancel/", "post", "200",
         researcher_api.post(f"/api/workloads/{workload_id}/cancel/", {"message": "no longer needed"}, format="json")),
    ]
    assert_documented(schema, answers)


def test_the_admin_shows_a_workload_read_only(researcher_api, admin_client):
    created = researcher_api.post("/api/workloads/", body(name="shown"), format="json").json()
    page = admin_client.get(f"/admin/scheduling/workload/{created['id']}/change/")
    assert page.status_code == 200
    assert b"nvcr.io/nvidia/pytorch" in page.content and b"Submitted by researcher" in page.content
    assert admin_client.get("/admin/scheduling/workload/?status__exact=PENDING").status_code == 200


@pytest.mark.parametrize("debug", [False, True])
def test_a_cancel_without_the_trailing_slash_cancels_with_debug_on_or_off(researcher_api, settings, debug):
    settings.DEBUG = debug
    created = researcher_api.post("/api/workloads", body(project="nlp", priority="low"), format="json")
    assert created.status_code == 201, created.content

    answer = researcher_api.post(f"/api/workloads/{created.json()['id']}/cancel")

    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "FAILED_CANCELED" and answer.json()["canceled"] is True
