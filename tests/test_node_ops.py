"""Cordon and uncordon (CLI and API), `describe node` and `resource list`'s status columns, against the stand-in
API server through the real client: the cluster is written first, then the database."""

import json

import pytest
from django.core.management.base import CommandError

from pools.models import AuditEvent, Node
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def test_cordon_marks_the_node_unschedulable_in_the_cluster_then_here_and_uncordon_undoes_it(gpu_backend, standin):
    assert "node/node-2 cordoned (Cordoned)" in run("cordon", "node-2")

    assert standin.node("node-2")["spec"]["unschedulable"] is True
    node = Node.objects.get(name="node-2")
    assert node.unschedulable and node.status == "Cordoned"
    assert node.reasons == ["Scheduling disabled"]

    assert "node/node-2 uncordoned (Ready)" in run("uncordon", "node-2")
    assert "unschedulable" not in standin.node("node-2")["spec"]
    node.refresh_from_db()
    assert not node.unschedulable and node.status == "Ready"
    audited = list(AuditEvent.objects.filter(kind="node").order_by("id").values_list("object", "action", "actor"))
    assert audited == [("node/node-2", "cordon", "manage.py cordon"), ("node/node-2", "uncordon", "manage.py uncordon")]


def test_cordon_of_an_unknown_node_is_one_line_and_touches_nothing(gpu_backend, standin):
    before = len(standin.requests)
    with pytest.raises(CommandError, match="node 'ghost' is not known") as refused:
        run("cordon", "ghost")
    assert "\n" not in str(refused.value)
    assert len(standin.requests) == before


def test_a_cluster_that_refuses_the_cordon_leaves_the_database_as_it_was(gpu_backend, standin, api):
    standin.fail_next(1, status=500)

    response = api.post("/api/nodes/node-1/cordon", {"cordon": True}, format="json")

    assert response.status_code in (502, 503) and response.json()["field"] is None
    assert not Node.objects.get(name="node-1").unschedulable
    assert not AuditEvent.objects.filter(kind="node").exists()


def test_the_cordon_api_cordons_and_uncordons_and_answers_the_node(gpu_backend, standin, api):
    cordoned = api.post("/api/nodes/node-3/cordon", {"cordon": True}, format="json")
    assert cordoned.status_code == 200, cordoned.content
    assert cordoned.json()["schedulable"] is False and cordoned.json()["status"] == "Cordoned"
    assert standin.node("node-3")["spec"]["unschedulable"] is True
    assert api.get("/api/resources/", {"status": "attention"}).json()[0]["node"] == "node-3"

    uncordoned = api.post("/api/nodes/node-3/cordon", {"cordon": False}, format="json")
    assert uncordoned.json()["schedulable"] is True and uncordoned.json()["status"] == "Ready"
    audited = list(AuditEvent.objects.filter(kind="node").order_by("id").values_list("action", "actor", "address"))
    assert audited == [("cordon", "ops", "127.0.0.1"), ("uncordon", "ops", "127.0.0.1")]
    assert api.get("/api/nodes/node-3/").json()["schedulable"] is True


def test_the_cordon_api_refuses_a_bad_body_naming_the_field_and_an_unknown_node(gpu_backend, api):
    refused = api.post("/api/nodes/node-3/cordon", {"cordon": "true"}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "cordon"
    assert api.post("/api/nodes/ghost/cordon", {"cordon": True}, format="json").status_code == 404
    assert not Node.objects.filter(unschedulable=True).exists()


def test_members_may_not_cordon(gpu_backend, client, member):
    client.force_login(member)

    response = client.post("/api/nodes/node-1/cordon", {"cordon": True}, content_type="application/json")

    assert response.status_code == 403
    assert not Node.objects.get(name="node-1").unschedulable


def test_the_openapi_schema_documents_the_cordon_body(api):
    schema = api.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/nodes/{name}/cordon"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
    assert schema["components"]["schemas"][body]["properties"]["cordon"]["type"] == "boolean"
    assert "unschedulable" in operation["description"]


def test_resource_list_shows_reasons_and_filters_nodes_needing_attention(gpu_backend):
    run("cordon", "node-1")

    lines = run("resource", "list", "--status", "attention").splitlines()

    assert [line.split()[0] for line in lines[1:-1]] == ["node-1"]
    assert lines[1].rstrip().endswith("Cordoned  Scheduling disabled")
    rows = json.loads(run("resource", "list", "--status", "attention", "--format", "json"))
    assert [(row["node"], row["reasons"]) for row in rows] == [("node-1", ["Scheduling disabled"])]


def test_describe_node_prints_the_node_pages_facts_as_text(gpu_backend, standin):
    run("cordon", "node-1")

    text = run("describe", "node", "node-1")

    assert "Status:       Cordoned" in text
    assert "Reasons:      Scheduling disabled" in text and "Schedulable:  no (cordoned)" in text
    assert "GPUs:         6 used / 8 total, 2 free, 0 unhealthy" in text
    assert "Conditions:" in text and "  Ready " in text and "KubeletReady" in text
    assert "Taints:\n  (none)" in text  # the stand-in has no node controller to add the cordon's taint
    assert "nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB" in text
    pods = text.split("Pods:\n", 1)[1]
    assert "default/train" in pods and "6" in pods and "16.0 GiB" in pods
    events = text.split("Events:\n", 1)[1].split("Taints:", 1)[0]
    # Newest first: the status that the cordon brought, the cordon, the node's appearance at the first sync.
    assert [line.split()[1] for line in events.splitlines()[1:]] == ["status", "cordon", "added"]
    assert "Status Ready \u2192 Cordoned" in events
    assert "Cordoned (scheduling disabled)" in events
    assert "Appeared: Ready, pools default" in events
    described = json.loads(run("describe", "node", "node-1", "--format", "json"))
    assert described["status"] == "Cordoned"
    assert [event["kind"] for event in described["events"]] == ["status", "cordon", "added"]


def test_describe_node_of_an_unknown_name_is_one_line(gpu_backend):
    with pytest.raises(CommandError) as refused:
        run("describe", "node", "ghost")
    assert str(refused.value) == "There is no node named 'ghost'"


def test_the_node_page_cordons_and_uncordons_for_staff(gpu_backend, standin, client, staff):
    client.force_login(staff)

    cordoned = client.post("/nodes/node-2/cordon/", {"cordon": "true"}, follow=True)

    assert standin.node("node-2")["spec"]["unschedulable"] is True
    text = cordoned.content.decode()
    assert "Node node-2 cordoned: Cordoned." in text and 'id="uncordon-button"' in text
    uncordoned = client.post("/nodes/node-2/cordon/", {"cordon": "false", "backend": "gpu-cluster"}, follow=True)
    assert "unschedulable" not in standin.node("node-2")["spec"]
    assert 'id="cordon-button"' in uncordoned.content.decode()
    assert cordoned.redirect_chain[-1][0] == "/nodes/node-2/"
    assert uncordoned.redirect_chain[-1][0] == "/nodes/node-2/?backend=gpu-cluster"


def test_the_node_page_says_why_the_cluster_refused_a_cordon(gpu_backend, standin, client, staff):
    client.force_login(staff)
    standin.fail_next(1, status=500)

    text = client.post("/nodes/node-2/cordon/", {"cordon": "true"}, follow=True).content.decode()

    assert "Node node-2: " in text and "message-error" in text
    assert not Node.objects.get(name="node-2").unschedulable


def test_cordon_and_uncordon_need_no_body_with_or_without_the_trailing_slash(gpu_backend, standin, api):
    cordoned = api.post("/api/nodes/node-3/cordon")
    assert cordoned.status_code == 200, cordoned.content
    assert cordoned.json()["schedulable"] is False and standin.node("node-3")["spec"]["unschedulable"] is True

    uncordoned = api.post("/api/nodes/node-3/uncordon/")
    assert uncordoned.status_code == 200, uncordoned.content
    assert uncordoned.json()["schedulable"] is True and not Node.objects.get(name="node-3").unschedulable
    assert api.post("/api/nodes/node-3/cordon/", {"cordon": True}, format="json").json()["schedulable"] is False
    assert api.post("/api/nodes/ghost/uncordon").status_code == 404


def test_the_openapi_schema_lists_uncordon_without_a_body(api):
    schema = api.get("/api/schema/?format=json").json()
    assert "requestBody" not in schema["paths"]["/api/nodes/{name}/uncordon"]["post"]
    assert not schema["paths"]["/api/nodes/{name}/cordon"]["post"]["requestBody"].get("required")
