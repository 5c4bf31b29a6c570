"""Submission limits (scheduling.submit.limits, issue 25 point 7): each a setting with a default, each refusal a 400
naming the limit and the field (the rate: a 429 with Retry-After), and a project's own limits set by staff in its
document. The rate's clock is the module's `clock`: the tests' `clock`, moved by the tests."""


import pytest

from pools.config import writes
from pools.engine import ConfigError
from pools.models import ConfigKind, Project
from scheduling.models import SubmissionCount, Workload
from scheduling.submit import limits
from tests.scheduling.conftest import SHARED, body
from tests.scheduling.test_osmo import submit_workflow

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def the_rate_reads_the_clock(clock, monkeypatch):
    clock.at(45)  # five seconds into a minute (T0 is 08:53:20)
    monkeypatch.setattr(limits, "clock", clock.now)


def refused(response, field: str, setting: str) -> dict:
    answer = response.json()
    assert response.status_code == 400, answer
    assert answer["field"] == field and setting in answer["detail"], answer
    assert not Workload.objects.exists()
    return answer


def test_a_gang_over_the_replica_limit_is_refused_naming_it(researcher_api):
    response = researcher_api.post("/api/workloads/", body(replicas=1000, resources={"gpu": 8}, priority="low"),
                                   format="json")
    refused(response, "replicas", "OSMO_MAX_REPLICAS")
    assert "1000 is over the limit of 128 replicas per workload" in response.json()["detail"]


def test_ten_thousand_env_entries_are_refused(researcher_api):
    env = {f"V{i}": "x" for i in range(10_000)}
    refused(researcher_api.post("/api/workloads/", body(env=env), format="json"), "env", "OSMO_MAX_ENV_ENTRIES")


def test_a_megabyte_of_command_is_refused(researcher_api, settings):
    settings.OSMO_SUBMISSION_MAX_BYTES = 4 * 1024 * 1024  # the body limit would refuse it first
    response = researcher_api.post("/api/workloads/", body(command=["bash", "-c", "A" * 1_000_000]), format="json")
    refused(response, "command", "OSMO_MAX_COMMAND_BYTES")


def test_args_count_with_the_command(researcher_api, settings):
    settings.OSMO_MAX_COMMAND_BYTES = 100
    response = researcher_api.post("/api/workloads/", body(command=["python"], args=["x" * 95]), format="json")
    refused(response, "command", "OSMO_MAX_COMMAND_BYTES")


def test_a_dry_run_naming_thousands_of_pools_is_refused_before_any_is_evaluated(researcher_api):
    pools = [f"pool-{i}" for i in range(5_000)]
    response = researcher_api.post("/api/workloads/?dry_run=1", body(pools=pools), format="json")
    refused(response, "pools", "OSMO_MAX_POOLS_PER_REQUEST")
    assert len(response.content) < 2000


def test_a_body_over_the_submission_limit_answers_413_naming_it(researcher_api, settings):
    settings.OSMO_SUBMISSION_MAX_BYTES = 1000
    response = researcher_api.post("/api/workloads/", body(command=["echo", "A" * 2000]), format="json")
    assert response.status_code == 413
    assert response.json()["limit"] == "OSMO_SUBMISSION_MAX_BYTES" and response.json()["field"] == "request body"


def test_live_workloads_per_user_are_limited_and_finished_ones_do_not_count(researcher_api, settings):
    settings.OSMO_MAX_LIVE_WORKLOADS_PER_USER = 2
    for name in ("a", "b"):
        assert researcher_api.post("/api/workloads/", body(name=name), format="json").status_code == 201
    response = researcher_api.post("/api/workloads/", body(name="c"), format="json")
    assert response.status_code == 400 and response.json()["field"] == "submitter"
    assert "OSMO_MAX_LIVE_WORKLOADS_PER_USER" in response.json()["detail"]
    ended = Workload.objects.get(name="a").pk
    assert researcher_api.post(f"/api/workloads/{ended}/cancel/").status_code == 200  # pending: ended at once
    assert researcher_api.post("/api/workloads/", body(name="c"), format="json").status_code == 201


def test_live_workloads_per_project_are_limited_across_users(researcher_api, world, settings):
    from rest_framework.test import APIClient

    settings.OSMO_MAX_LIVE_WORKLOADS_PER_PROJECT = 1
    assert researcher_api.post("/api/workloads/", body(project="nlp", priority="low"), format="json").status_code \
        == 201
    other = APIClient()
    other.force_authenticate(world["other"])
    response = other.post("/api/workloads/", body(project="nlp", priority="low"), format="json")
    assert response.status_code == 400 and response.json()["field"] == "project"
    assert "OSMO_MAX_LIVE_WORKLOADS_PER_PROJECT" in response.json()["detail"]


def test_a_workflow_with_more_task_groups_than_the_limit_saves_nothing(researcher_api, settings):
    settings.OSMO_MAX_TASKS_PER_WORKFLOW = 5
    tasks = "".join(f"  - name: t{i}\n    image: ubuntu:24.04\n    command: [echo]\n" for i in range(6))
    text = f"workflow:\n  name: many\n  resources:\n    default:\n      cpu: 1\n      gpu: 0\n  tasks:\n{tasks}"
    response = submit_workflow(researcher_api, text=text, variables=())
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == "workflow.tasks" and "OSMO_MAX_TASKS_PER_WORKFLOW" in response.json()["detail"]
    assert not Workload.objects.exists()


def test_the_live_limit_counts_every_group_of_a_workflow(researcher_api, settings):
    settings.OSMO_MAX_LIVE_WORKLOADS_PER_USER = 2
    tasks = "".join(f"  - name: t{i}\n    image: ubuntu:24.04\n    command: [echo]\n" for i in range(3))
    text = f"workflow:\n  name: three\n  resources:\n    default:\n      cpu: 1\n      gpu: 0\n  tasks:\n{tasks}"
    response = submit_workflow(researcher_api, text=text, variables=())
    assert response.status_code == 400 and response.json()["field"] == "submitter"
    assert not Workload.objects.exists()


def test_submissions_per_minute_answer_429_with_retry_after(researcher_api, settings, clock):
    settings.OSMO_SUBMISSIONS_PER_MINUTE = 3
    for i in range(3):  # a dry run and a refusal count too: they cost the same work
        query = "?dry_run=1" if i == 0 else ""
        extra = {"replicas": 5000} if i == 1 else {}
        assert researcher_api.post(f"/api/workloads/{query}", body(name=f"w{i}", **extra), format="json"
                                   ).status_code in (200, 201, 400)
    response = researcher_api.post("/api/workloads/", body(name="w3"), format="json")
    assert response.status_code == 429
    assert response["Retry-After"] == "55"  # the minute ends 55 s after the clock's 08:54:05
    assert response.json()["limit"] == "OSMO_SUBMISSIONS_PER_MINUTE"
    # The OSMO door shares the count.
    assert submit_workflow(researcher_api).status_code == 429
    clock.advance(55)
    assert researcher_api.post("/api/workloads/", body(name="w3"), format="json").status_code == 201
    assert SubmissionCount.objects.count() == 1  # the past minute's row is gone


def test_another_user_is_not_slowed_by_one_users_rate(researcher_api, world, settings, clock):
    from rest_framework.test import APIClient

    settings.OSMO_SUBMISSIONS_PER_MINUTE = 1
    researcher_api.post("/api/workloads/", body(name="a"), format="json")
    assert researcher_api.post("/api/workloads/", body(name="b"), format="json").status_code == 429
    other = APIClient()
    other.force_authenticate(world["other"])
    assert other.post("/api/workloads/", body(name="c", project="nlp", priority="low"), format="json"
                      ).status_code == 201


def test_staff_raise_a_projects_limit_in_its_document(researcher_api, settings):
    settings.OSMO_MAX_REPLICAS = 2
    request = body(replicas=3, resources={"gpu": 1}, priority="low")
    refused(researcher_api.post("/api/workloads/", request, format="json"), "replicas", "OSMO_MAX_REPLICAS")
    document = writes.export(ConfigKind.PROJECT, "vision")
    writes.import_document(ConfigKind.PROJECT, {**document, "limits": {"replicas": 4}}, author="tests")
    assert Project.objects.get(name="vision").limits == {"replicas": 4}
    assert researcher_api.post("/api/workloads/", request, format="json").status_code == 201
    assert writes.export(ConfigKind.PROJECT, "vision")["limits"] == {"replicas": 4}
    # Another project keeps the setting's limit.
    other = researcher_api.post("/api/workloads/", {**request, "project": "nlp", "name": "x"}, format="json")
    assert other.status_code == 400 and other.json()["field"] == "replicas"


def test_only_staff_write_a_projects_limits(researcher_api, world):
    response = researcher_api.put("/api/configs/project/vision", {"department": "research",
                                                                  "limits": {"replicas": 1000}}, format="json")
    assert response.status_code in (403, 404)
    assert Project.objects.get(name="vision").limits == {}


@pytest.mark.parametrize("limits_value, field", [
    ({"replicaz": 3}, "vision.limits.replicaz"), ({"replicas": -1}, "vision.limits.replicas"),
    ({"replicas": "many"}, "vision.limits.replicas"), ([1], "vision.limits"),
    ({"replicas": 2 ** 31}, "vision.limits.replicas"), ({"replicas": True}, "vision.limits.replicas"),
    ({"replicas": 4.0}, "vision.limits.replicas")])
def test_a_projects_limits_are_checked_when_written(world, limits_value, field):
    document = writes.export(ConfigKind.PROJECT, "vision")
    with pytest.raises(ConfigError) as refused_write:
        writes.import_document(ConfigKind.PROJECT, {"vision": {**document, "limits": limits_value}}, author="t")
    assert refused_write.value.field == field


@pytest.mark.parametrize("limits_value, kept", [
    (None, {}), ({}, {}), ({"replicas": 0}, {"replicas": 0}), ({"replicas": 2 ** 31 - 1}, {"replicas": 2 ** 31 - 1}),
    ({"replicas": 4, "env_entries": 3}, {"env_entries": 3, "replicas": 4})])
def test_a_projects_limits_are_kept_from_0_to_the_largest_32_bit_number(world, limits_value, kept):
    document = writes.export(ConfigKind.PROJECT, "vision")
    writes.import_document(ConfigKind.PROJECT, {"vision": {**document, "limits": limits_value}}, author="t")
    assert Project.objects.get(name="vision").limits == kept


def test_every_setting_of_the_limits_is_documented():
    from pathlib import Path

    settings_page = (Path(__file__).resolve().parents[2] / "docs" / "operations" / "settings.md").read_text()
    for limit in limits.LIMITS.values():
        assert f"`{limit.setting}` | {limit.default} |" in settings_page
    for setting in (limits.RATE_SETTING, limits.BODY_SETTING):
        assert f"`{setting}`" in settings_page


def test_a_request_within_every_limit_is_accepted(researcher_api):
    response = researcher_api.post("/api/workloads/", body(pools=["training", SHARED], env={"A": "1"}), format="json")
    assert response.status_code == 201, response.json()
