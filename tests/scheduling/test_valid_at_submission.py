"""Valid at submission or refused (issue 25 point 6): variables and env are checked against the rules of the field
they fill, the rendered pod template against the Pod's schema and the API server's rules (pools.engine.pod_rules),
and a list filter with a value it does not know answers 400 naming it instead of every row."""

import pytest

from pools.config import writes
from pools.engine.pod_rules import pod_errors
from pools.models import ConfigKind
from scheduling.models import Status, Workload
from tests.scheduling.conftest import body
from tests.scheduling.test_osmo import submit_workflow

pytestmark = pytest.mark.django_db


def refused(response, field: str, words: str) -> dict:
    answer = response.json()
    assert response.status_code == 400, answer
    assert answer["field"] == field and words in answer["detail"], answer
    assert not Workload.objects.exists()
    return answer


@pytest.mark.parametrize("value, words", [(1.5, "not a whole number"), ("1.5", "not a whole number"),
                                          ("1 ", "no spaces"), (" 1", "no spaces"), ("-1", "greater than or equal"),
                                          ("lots", "not a quantity"), (True, "not a quantity")])
def test_a_gpu_variable_that_is_no_whole_number_of_gpus_is_refused(researcher_api, value, words):
    response = researcher_api.post("/api/workloads/", body(variables={"USER_GPU": value}), format="json")
    refused(response, "variables.USER_GPU", words)


@pytest.mark.parametrize("name, value", [("USER_CPU", "4 "), ("USER_MEMORY", "16 Gi"), ("USER_MEMORY", "16GB"),
                                         ("USER_STORAGE", "-1Gi")])
def test_resource_variables_must_be_quantities_the_api_server_reads(researcher_api, name, value):
    response = researcher_api.post("/api/workloads/", body(variables={name: value}), format="json")
    refused(response, f"variables.{name}", value)


def test_whole_and_quantity_variables_are_accepted(researcher_api):
    response = researcher_api.post("/api/workloads/", body(variables={"USER_GPU": 2, "USER_MEMORY": "32Gi",
                                                                      "USER_CPU": "1500m"}), format="json")
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize("name", ["A=B", "", "1ST", "has space", "dash-ed", "dot.ted", "é"])
def test_env_names_must_be_c_identifiers(researcher_api, name):
    response = researcher_api.post("/api/workloads/", body(env={name: "x"}), format="json")
    refused(response, f"env.{name}", "not an environment variable name")


def test_a_pod_template_a_real_server_would_refuse_is_refused_at_submit_naming_the_path(researcher_api):
    writes.import_document(ConfigKind.POD_TEMPLATE, {"typo": {"spec": {"containers": [
        {"name": "{{USER_CONTAINER_NAME}}", "resourcez": {}}]}}}, author="tests")
    document = writes.export(ConfigKind.POOL, "training")["pools"]["training"]
    document["platforms"]["h100"]["override_pod_template"] = ["h100", "typo"]
    writes.import_document(ConfigKind.POOL, {"pools": {"training": document}}, author="tests")
    response = researcher_api.post("/api/workloads/", body(), format="json")
    answer = response.json()
    assert response.status_code == 400, answer
    candidate = answer["candidates"][0]
    assert (candidate["step"], candidate["code"]) == ("templates", "POD_SPEC")
    assert "spec.containers[0]" in candidate["message"] and "'resourcez' was unexpected" in candidate["message"]


def test_a_template_variable_that_makes_a_bad_quantity_is_refused(researcher_api):
    writes.import_document(ConfigKind.POD_TEMPLATE, {"shm": {"spec": {"containers": [
        {"name": "{{USER_CONTAINER_NAME}}", "resources": {"limits": {"memory": "{{SHM}}"}}}]}}}, author="tests")
    document = writes.export(ConfigKind.POOL, "training")["pools"]["training"]
    document["platforms"]["h100"]["override_pod_template"] = ["h100", "shm"]
    writes.import_document(ConfigKind.POOL, {"pools": {"training": document}}, author="tests")
    response = researcher_api.post("/api/workloads/", body(variables={"SHM": "8 Gi"}), format="json")
    assert response.status_code == 400
    message = response.json()["candidates"][0]["message"]
    assert "spec.containers[0].resources.limits.memory" in message and "no spaces" in message
    assert researcher_api.post("/api/workloads/", body(variables={"SHM": "32Gi"}), format="json").status_code == 201


def test_the_osmo_door_checks_the_same_rules(researcher_api):
    text = ("workflow:\n  name: w\n  resources:\n    default:\n      cpu: 1\n      gpu: 0\n  tasks:\n"
            "  - name: t\n    image: ubuntu:24.04\n    command: [echo]\n    environment:\n      A=B: x\n")
    response = submit_workflow(researcher_api, text=text, variables=())
    assert response.status_code == 400, response.json()
    assert "A=B" in response.json()["detail"]
    assert not Workload.objects.exists()


@pytest.mark.parametrize("spec, path", [
    ({"containers": [{"name": "Main", "image": "i"}]}, "spec.containers[0].name"),
    ({"containers": [{"name": "m", "image": "i", "env": [{"name": "A=B"}]}]}, "spec.containers[0].env[0].name"),
    ({"containers": [{"name": "m", "image": "i", "resources": {"requests": {"nvidia.com/gpu": 1}}}]},
     "spec.containers[0].resources.limits"),
    ({"containers": [{"name": "m", "image": "i", "resources": {"requests": {"nvidia.com/gpu": 1},
                                                               "limits": {"nvidia.com/gpu": 2}}}]},
     "spec.containers[0].resources.requests.nvidia.com/gpu"),
    ({"containers": [{"name": "m", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]},
     "spec.containers[0].resources.limits.nvidia.com/gpu"),
    ({"containers": [{"name": "m", "image": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": 1}}}]},
     "spec.containers[0].resources.requests.cpu"),
    ({"containers": [{"name": "m", "image": "i", "env": [{"name": "A", "value": 3}]}]},
     "spec.containers[0].env[0].value"),
    ({"containers": [{"name": "m"}]}, "spec.containers[0]"),  # image is optional in the schema; ours requires it
    ({"containers": [{"name": "m", "image": "i"}], "restartPolicy": 1}, "spec.restartPolicy"),
])
def test_pod_rules_name_what_a_real_server_refuses(spec, path):
    errors = pod_errors({"spec": spec})
    if path == "spec.containers[0]":
        assert errors == []
        return
    assert path in [where for where, _message in errors], errors


def test_pod_rules_accept_a_real_pod():
    assert pod_errors({"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "Never", "containers": [
        {"name": "user", "image": "i", "env": [{"name": "A", "value": "1"}, {"name": "B.c-d"}],
         "resources": {"requests": {"cpu": "500m", "memory": "16Gi", "nvidia.com/gpu": 1},
                       "limits": {"memory": 17179869184, "nvidia.com/gpu": "1"}}}],
        "tolerations": [{"key": "k", "operator": "Exists"}], "nodeSelector": {"x": "y"}}}) == []


def test_pod_rules_remember_answers_by_the_exact_template():
    """The per-process memory of answers never answers one template with another's: an env value "3" (valid)
    and 3 (refused) have the same JSON-ish look but different answers, in either order, and repeatedly."""
    def spec(value):
        return {"spec": {"containers": [{"name": "m", "image": "i", "env": [{"name": "A", "value": value}]}]}}
    for _round in range(2):
        assert pod_errors(spec("3")) == []
        assert [where for where, _message in pod_errors(spec(3))] == ["spec.containers[0].env[0].value"]
        assert pod_errors(spec(True)) != [] and pod_errors(spec("True")) == []
    answer = pod_errors(spec(3))
    answer.clear()  # a caller changing its answer does not change the next one
    assert pod_errors(spec(3)) != []


@pytest.mark.parametrize("query, field", [("status=NOPE", "status"), ("status=PENDING&status=NOPE", "status"),
                                          ("priority=urgent", "priority"), ("source=fax", "source")])
def test_an_unknown_filter_value_answers_400_naming_the_filter(researcher_api, query, field):
    researcher_api.post("/api/workloads/", body(), format="json")
    response = researcher_api.get(f"/api/workloads/?{query}")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field


def test_known_filter_values_still_filter(researcher_api):
    researcher_api.post("/api/workloads/", body(), format="json")
    assert len(researcher_api.get("/api/workloads/?status=PENDING&priority=normal&source=api").json()) == 1
    assert researcher_api.get("/api/workloads/?status=RUNNING").json() == []


@pytest.mark.parametrize("query, field", [("statuses=NOPE", "statuses"), ("order=SIDEWAYS", "order"),
                                          ("limit=ten", "limit"), ("offset=-1", "offset"),
                                          ("priority=URGENT", "priority")])
def test_the_workflow_list_refuses_unknown_filter_values(researcher_api, query, field):
    response = researcher_api.get(f"/api/workflow?{query}")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field


def test_the_workflow_list_still_filters_by_a_known_status(researcher_api):
    assert submit_workflow(researcher_api, query="?priority=LOW").status_code == 200
    assert researcher_api.get("/api/workflow?statuses=PENDING").json()["workflows"]
    assert researcher_api.get(f"/api/workflow?statuses={Status.COMPLETED}").json()["workflows"] == []
