"""The stand-in refuses the node affinity a real kube-apiserver refuses (core validation's ValidateNodeSelector,
ValidateNodeSelectorRequirement and ValidateNodeFieldSelectorRequirement), with its field paths and words, as the
real `kubernetes` client sees them. Issue 39: a real server refused our pin of a gang to several nodes, one
`matchFields` requirement naming them all, which the stand-in accepted."""

import json

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests import kube_rules

REQUIRED = "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def job(name: str, terms: list | None = None, *, preferred: list | None = None, node_selector=None) -> dict:
    affinity: dict = {}
    if terms is not None:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": terms}
    if preferred is not None:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    spec: dict = {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never",
                  "affinity": {"nodeAffinity": affinity}}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": {"spec": spec}}}


def refused(kube_api, body: dict) -> dict:
    with pytest.raises(ApiException) as caught:
        client.BatchV1Api(kube_api).create_namespaced_job("team-a", body)
    status = json.loads(caught.value.body)
    assert caught.value.status == status["code"] == 422 and status["reason"] == "Invalid"
    return status


def test_it_refuses_one_field_selector_requirement_naming_several_nodes_in_the_real_servers_words(kube_api,
                                                                                                  standin):
    """What kube-apiserver v1.36 answered to our pin of a 2-node gang (issue 39)."""
    pin = {"key": "metadata.name", "operator": "In", "values": ["dgx-a", "dgx-b"]}

    status = refused(kube_api, job("wl-1", [{"matchFields": [pin]}]))

    assert status["message"] == (
        f'Job.batch "wl-1" is invalid: {REQUIRED}.nodeSelectorTerms[0].matchFields[0].values: Required value: '
        "must be only one value when `operator` is 'In' or 'NotIn' for node field selector")
    assert status["details"]["causes"] == [{
        "reason": "FieldValueRequired", "field": f"{REQUIRED}.nodeSelectorTerms[0].matchFields[0].values",
        "message": "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field "
                   "selector"}]
    assert standin.jobs() == []


def test_one_term_per_node_is_accepted(kube_api, standin):
    terms = [{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}],
              "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
             for node in ("dgx-a", "dgx-b")]

    client.BatchV1Api(kube_api).create_namespaced_job("team-a", job("wl-1", terms))

    stored = standin.job("wl-1", namespace="team-a")["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    assert stored["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == terms


@pytest.mark.parametrize("requirement, field, message", [
    ({"key": "metadata.name", "operator": "Exists"}, "operator",
     'Invalid value: "Exists": not a valid selector operator'),
    ({"key": "metadata.labels", "operator": "In", "values": ["a"]}, "key",
     'Invalid value: "metadata.labels": not a valid field selector key'),
    ({"key": "metadata.name", "operator": "NotIn", "values": ["Node_A"]}, "values[0]",
     'Invalid value: "Node_A": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
     "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ({"key": "metadata.name", "operator": "In", "values": []}, "values",
     "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"),
])
def test_a_field_selector_requirement_is_metadata_name_in_or_not_in_one_node_name(kube_api, requirement, field,
                                                                                  message):
    status = refused(kube_api, job("wl-1", [{"matchFields": [requirement]}]))

    where = f"{REQUIRED}.nodeSelectorTerms[0].matchFields[0].{field}"
    assert status["message"] == f'Job.batch "wl-1" is invalid: {where}: {message}'


@pytest.mark.parametrize("requirement, field, message", [
    ({"key": "zone", "operator": "In"}, "values", "Required value: must be specified when `operator` is 'In' or "
                                                  "'NotIn'"),
    ({"key": "zone", "operator": "NotIn", "values": []}, "values",
     "Required value: must be specified when `operator` is 'In' or 'NotIn'"),
    ({"key": "zone", "operator": "Exists", "values": ["a"]}, "values",
     "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    ({"key": "zone", "operator": "DoesNotExist", "values": ["a"]}, "values",
     "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    ({"key": "gpus", "operator": "Gt", "values": ["4", "8"]}, "values",
     "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
    ({"key": "gpus", "operator": "Lt"}, "values",
     "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
    ({"key": "zone", "operator": "Equals", "values": ["a"]}, "operator",
     'Invalid value: "Equals": not a valid selector operator'),
    ({"key": "a/b/c", "operator": "Exists"}, "key",
     "Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
     "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
     "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
     "'example.com/MyName')"),
    ({"key": "zone", "operator": "In", "values": ["a b"]}, "values[0]",
     "Invalid value: \"a b\": a valid label must be an empty string or consist of alphanumeric characters, '-', "
     "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
     "'12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"),
])
def test_a_label_requirement_follows_the_rules_of_its_operator(kube_api, requirement, field, message):
    status = refused(kube_api, job("wl-1", [{"matchExpressions": [requirement]}]))

    where = f"{REQUIRED}.nodeSelectorTerms[0].matchExpressions[0].{field}"
    assert status["message"] == f'Job.batch "wl-1" is invalid: {where}: {message}'


def test_gt_and_lt_take_any_one_value_the_scheduler_parses_it_when_it_matches(kube_api, standin):
    """kube-apiserver counts Gt/Lt values and leaves parsing them as integers to the scheduler's matching."""
    requirement = {"key": "gpus", "operator": "Gt", "values": ["four"]}

    client.BatchV1Api(kube_api).create_namespaced_job("team-a", job("wl-1", [{"matchExpressions": [requirement]}]))

    assert standin.job("wl-1", namespace="team-a")


def test_a_required_node_affinity_needs_a_term(kube_api):
    status = refused(kube_api, job("wl-1", []))

    assert status["message"] == (f'Job.batch "wl-1" is invalid: {REQUIRED}.nodeSelectorTerms: Required value: '
                                 "must have at least one node selector term")


def test_every_error_of_every_term_is_named(kube_api):
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]},
             {"matchExpressions": [{"key": "zone", "operator": "Exists", "values": ["a"]}],
              "matchFields": [{"key": "spec.unschedulable", "operator": "In", "values": ["x"]}]}]

    status = refused(kube_api, job("wl-1", terms))

    assert [cause["field"] for cause in status["details"]["causes"]] == [
        f"{REQUIRED}.nodeSelectorTerms[0].matchFields[0].values",
        f"{REQUIRED}.nodeSelectorTerms[1].matchExpressions[0].values",
        f"{REQUIRED}.nodeSelectorTerms[1].matchFields[0].key"]


def test_a_preferred_term_needs_a_weight_of_1_to_100_and_valid_requirements(kube_api):
    preferred = [{"weight": 0, "preference": {"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}}]

    status = refused(kube_api, job("wl-1", preferred=preferred))

    where = "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
    assert [(cause["field"], cause["message"]) for cause in status["details"]["causes"]] == [
        (f"{where}.weight", "Invalid value: 0: must be in the range 1-100"),
        (f"{where}.preference.matchFields[0].values",
         "Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector")]


def test_a_pod_spec_node_selector_is_checked_as_labels(kube_api):
    status = refused(kube_api, job("wl-1", node_selector={"nvidia.com/gpu.product": "H100 80GB"}))

    assert status["details"]["causes"][0]["field"] == "spec.template.spec.nodeSelector"
    assert status["details"]["causes"][0]["message"].startswith('Invalid value: "H100 80GB": a valid label must be')


def test_a_pod_is_checked_as_a_jobs_template_is():
    body = {"metadata": {"name": "p", "namespace": "team-a"}, "spec": {
        "containers": [{"name": "main", "image": "busybox"}], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}}}}}

    (error,) = kube_rules.validate_create("Pod", body)

    assert error.field == ("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                           ".nodeSelectorTerms[0].matchFields[0].values")
