"""Digits are ASCII digits (issue 42): fullwidth and Arabic-Indic digits are digits to Python's `\\d`,
str.isdigit, int() and Decimal, never to a Kubernetes API server. Each door that reads a number or a quantity refuses
them with a 400 naming the field; "²" (a digit to isdigit that int() refuses) is a 400 too, not a 500."""

import pytest

from scheduling.models import Workload
from tests.scheduling.conftest import body
from tests.scheduling.test_osmo import WORKFLOW, submit_workflow

pytestmark = pytest.mark.django_db

NOT_ASCII = [("USER_GPU", "\uff11"), ("USER_MEMORY", "\u0661Gi"), ("USER_CPU", "\uff14")]


def refused(response, field: str) -> dict:
    answer = response.json()
    assert response.status_code == 400, answer
    assert answer["field"] == field, answer
    assert not Workload.objects.exists()
    return answer


@pytest.mark.parametrize("name, value", NOT_ASCII)
def test_a_resource_variable_in_other_digits_is_refused_by_the_api(researcher_api, name, value):
    response = researcher_api.post("/api/workloads/", body(variables={name: value}), format="json")
    assert value in refused(response, f"variables.{name}")["detail"]


@pytest.mark.parametrize("resource, value", [("gpu", "\uff11"), ("memory", "\u0661Gi"), ("cpu", "\uff14")])
def test_a_resource_in_other_digits_is_refused_by_the_api(researcher_api, resource, value):
    resources = {"gpu": 1, "cpu": "4", "memory": "16Gi", resource: value}
    refused(researcher_api.post("/api/workloads/", body(resources=resources), format="json"),
            f"resources.{resource}")


@pytest.mark.parametrize("line, value", [("      cpu: 4\n      gpu: 1\n", "      cpu: 4\n      gpu: '\uff11'\n"),
                                         ("      memory: 16Gi\n", "      memory: \u0661Gi\n"),
                                         ("      cpu: 4\n      gpu: 1\n", "      cpu: '\uff14'\n      gpu: 1\n")])
def test_an_osmo_resource_in_other_digits_is_refused(researcher_api, line, value):
    text = WORKFLOW.replace(line, value, 1)
    assert text != WORKFLOW
    answer = submit_workflow(researcher_api, text=text, query="?dry_run=true")
    assert answer.status_code == 400, answer.json()
    assert "resources" in answer.json()["field"], answer.json()


@pytest.mark.parametrize("fields, field", [({"exec_timeout": "\uff11h"}, "exec_timeout"),
                                           ({"exit_actions": {"FAIL": "\uff11"}}, "exit_actions")])
def test_timeouts_and_exit_codes_in_other_digits_are_refused(researcher_api, fields, field):
    refused(researcher_api.post("/api/workloads/", body(**fields), format="json"), field)


@pytest.mark.parametrize("value", ["\uff11", "\u0661"])
def test_a_quota_in_other_digits_is_refused(api, defaults, value):
    document = {"vision": {"department": "default",
                           "resources": [{"node_pool": "default", "gpu": {"deserved": value}}]}}
    answer = api.put("/api/configs/project/", document, format="json")
    assert answer.status_code == 400, answer.json()
    assert answer.json()["field"] == "vision.resources[0].gpu.deserved"


@pytest.mark.parametrize("name", ["limit", "offset"])
@pytest.mark.parametrize("value", ["²", "\uff11"])
def test_an_osmo_list_page_in_other_digits_is_a_400_naming_it(researcher_api, name, value):
    answer = researcher_api.get("/api/workflow", {name: value})
    assert answer.status_code == 400, answer.content[:300]
    assert answer.json()["field"] == name


@pytest.mark.parametrize("value", ["²", "\uff11"])
def test_a_log_tail_in_other_digits_is_a_400_naming_it(researcher_api, value):
    workload = researcher_api.post("/api/workloads/", body(), format="json").json()
    answer = researcher_api.get(f"/api/workloads/{workload['id']}/logs", {"tail": value})
    assert answer.status_code == 400, answer.content[:300]
    assert answer.json()["field"] == "tail"
