"""Cordon and uncordon (CLI and API), `describe node` and `resource list`'s status columns, against the stand-in
API server through the real client: the cluster is written first, then the database."""

import json

import pytest
from django.core.management.base import CommandError

from pools.models import Node
from tests.test_inventory_ops import cluster, run  # noqa: F401  (the fixture, and the command runner)

pytestmark = pytest.mark.django_db


def test_cordon_marks_the_node_unschedulable_in_the_cluster_then_here_and_uncordon_undoes_it(cluster, standin):  # noqa: F811
    assert "node/node-2 cordoned (Not ready (Scheduling disabled))" in run("cordon", "node-2")

    assert standin.node("node-2")["spec"]["unschedulable"] is True
    node = Node.objects.get(name="node-2")
    assert node.unschedulable and node.status == "Not ready (Scheduling disabled)"
    assert node.reasons == ["Scheduling disabled"]

    assert "node/node-2 uncordoned (Ready)" in run("uncordon", "node-2")
    assert "unschedulable" not in standin.node("node-2")["spec"]
    node.refresh_from_db()
    assert not node.unschedulable and node.status == "Ready"


def test_cordon_of_an_unknown_node_is_one_line_and_touches_nothing(cluster, standin):  # noqa: F811
    before = len(standin.requests)
    with pytest.raises(CommandError, match="node 'ghost' is not known") as refused:
        run("cordon", "ghost")
    assert "\n" not in str(refused.value)
    assert len(standin.requests) == before


def test_a_cluster_that_refuses_the_cordon_leaves_the_database_as_it_was(cluster, standin, api):  # noqa: F811
    standin.fail_next(1, status=500)

    response = api.post("/api/nodes/node-1/cordon", {"cordon": True}, format="json")

    assert response.status_code in (502, 503) and response.json()["field"] is None
    assert not Node.objects.get(name="node-1").unschedulable


def test_the_cordon_api_cordons_and_uncordons_and_answers_the_node(cluster, standin, api):  # noqa: F811
    cordoned = api.post("/api/nodes/node-3/cordon", {"cordon": True}, format="json")
    assert cordoned.status_code == 200, cordoned.content
    assert cordoned.json()["schedulable"] is False and cordoned.json()["status"] == "Not ready (Scheduling disabled)"
    assert standin.node("node-3")["spec"]["unschedulable"] is True
    assert api.get("/api/resources/", {"status": "attention"}).json()[0]["node"] == "node-3"

    uncordoned = api.post("/api/nodes/node-3/cordon", {"cordon": False}, format="json")
    assert uncordoned.json()["schedulable"] is True and uncordoned.json()["status"] == "Ready"
    assert api.get("/api/nodes/node-3/").json()["schedulable"] is True


def test_the_cordon_api_refuses_a_bad_body_naming_the_field_and_an_unknown_node(cluster, api):  # noqa: F811
    refused = api.post("/api/nodes/node-3/cordon", {"cordon": "true"}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "cordon"
    assert api.post("/api/nodes/ghost/cordon", {"cordon": True}, format="json").status_code == 404
    assert not Node.objects.filter(unschedulable=True).exists()


def test_members_may_not_cordon(cluster, client, member):  # noqa: F811
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


def test_resource_list_shows_reasons_and_filters_nodes_needing_attention(cluster):  # noqa: F811
    run("cordon", "node-1")

    lines = run("resource", "list", "--status", "attention").splitlines()

    assert [line.split()[0] for line in lines[1:-1]] == ["node-1"]
    assert lines[1].rstrip().endswith("Not ready (Scheduling disabled)  Scheduling disabled")
    rows = json.loads(run("resource", "list", "--status", "attention", "--format", "json"))
    assert [(row["node"], row["reasons"]) for row in rows] == [("node-1", ["Scheduling disabled"])]
