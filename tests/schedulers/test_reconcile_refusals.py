"""A reconcile works object by object (issue 23, point 3): an object the API server refuses is recorded with the
server's words (on the backend row, shown by its admin page, `backend list` and /metrics) while every other object
is still written and what a removed project left is still deleted; a later run that writes it clears the record;
an immutable field that must change (a pool's topology keys: KAI Topology levels, which the strict stand-in
refuses to patch) deletes and re-creates. Against the stand-in API server through the real client."""

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pools.cluster import ClusterError
from pools.cluster.kinds import KAI_QUEUE, KAI_TOPOLOGY
from pools.cluster.kube import KubeCluster
from pools.models import Backend, Pool, Project
from pools.schedulers.desired import for_backend
from pools.schedulers.kai import queue_name
from pools.schedulers.reconcile import run
from tests.kube_standin import KubeStandin
from tests.scheduling.conftest import project
from tests.support import commands

pytestmark = pytest.mark.django_db
TOO_LONG = ('Queue.scheduling.run.ai "training.research.audio" is invalid: metadata.labels: Invalid value: '
            '"audio-and-speech-recognition-for-the-whole-company-which-is-a-long-name": must be no more than 63 '
            "characters")


def queues(standin) -> set[str]:
    return {queue["metadata"]["name"] for queue in standin.objects(KAI_QUEUE)}


def refused_gauge(client) -> dict:
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape")
    (family,) = [f for f in text_string_to_metric_families(response.content.decode())
                 if f.name == "osmo_backend_engine_refused_objects"]
    return {sample.labels["backend"]: sample.value for sample in family.samples}


def wanted_queues(backend) -> set[str]:
    return {name for (_, name) in dict(for_backend(backend))[KAI_QUEUE]}


def test_a_refused_queue_is_recorded_and_shown_while_every_other_object_is_written_and_a_later_run_clears_it(
        standin, kube, kai, admin_client, client, settings):
    assert run(kai, kube) is not None
    Project.objects.filter(name="nlp").delete()
    project("audio", pools={"training": {"deserved": 1}})
    # The API server refuses the first Queue created (a label too long on a real one), as it would one project's.
    standin.fail_next(1, status=422, path_prefix="/apis/scheduling.run.ai/v2/queues", method="POST", message=TOO_LONG)

    result = run(kai, kube)

    assert result is not None
    (refusal,) = result.refused
    audio = {queue_name(pool, "research", "audio") for pool in Pool.objects.values_list("name", flat=True)}
    assert refusal.kind == "Queue" and refusal.name in audio and refusal.action == "create"
    assert TOO_LONG in refusal.message and "HTTP 422" in refusal.message
    assert queues(standin) == wanted_queues(kai) - {refusal.name}  # the other projects' and audio's other pools'
    assert sorted(result.created) == sorted(f"Queue/{name}" for name in audio - {refusal.name})
    assert {f"Queue/{queue_name(pool, 'research', 'nlp')}" for pool in Pool.objects.values_list("name", flat=True)} \
        == set(result.deleted)  # the removed project's, in the same run

    backend = Backend.objects.get(pk=kai.pk)
    (record,) = backend.engine_refused
    assert record["kind"] == "Queue" and record["name"] == refusal.name and record["action"] == "create"
    assert TOO_LONG in record["message"] and record["since"] == record["at"]
    assert backend.engine_error == "" and backend.engine_objects["refused"] == 1

    page = admin_client.get(f"/admin/pools/backend/{kai.pk}/change/").content.decode()
    assert f"<td>Queue</td><td>{refusal.name}</td><td>create</td><td>{record['since']}</td>" in page
    assert "must be no more than 63 characters" in page
    listing = commands.run("backend", "list")
    assert "REFUSED" in listing.splitlines()[0]
    assert "Refused by the cluster of default in its last reconcile, 1 object (the others were written):" in listing
    assert f"  Queue/{refusal.name} (create, since {record['since']}): " in listing and TOO_LONG in listing
    settings.OSMO_METRICS_TOKEN = "scrape"
    assert refused_gauge(client) == {"default": 1}

    again = run(kai, kube)  # the server takes it now
    assert again.created == [f"Queue/{refusal.name}"] and again.refused == []
    assert Backend.objects.get(pk=kai.pk).engine_refused == []
    assert queues(standin) == wanted_queues(kai)
    assert refused_gauge(client) == {"default": 0}


def test_a_refusal_keeps_its_since_while_the_object_stays_refused(standin, kube, kai):
    theirs = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "training.research"},
              "spec": {"resources": {"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 1}}}}
    kube.create_object(KAI_QUEUE, theirs)
    first_at = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    run(kai, kube, now=first_at)
    run(kai, kube, now=first_at + timedelta(minutes=5))

    (record,) = Backend.objects.get(pk=kai.pk).engine_refused
    assert record["name"] == "training.research" and record["action"] == "create"
    assert record["since"] == first_at.isoformat() and record["at"] == (first_at + timedelta(minutes=5)).isoformat()
    assert "someone else (not labelled as ours)" in record["message"]


def test_new_topology_keys_re_create_the_topology_and_the_same_run_deletes_a_removed_projects_queues(
        standin, kube, kai):
    zone, rack, host = "topology.kubernetes.io/zone", "example.com/rack", "kubernetes.io/hostname"
    # By hand: the configuration refuses topology keys whose labels none of the pool's nodes carries, and the world's
    # nodes are add_nodes' rows without them.
    Pool.objects.filter(name="training").update(topology_keys=[{"key": "zone", "label": zone},
                                                               {"key": "rack", "label": rack}])
    assert run(kai, kube).refused == []
    created_uid = standin.object(KAI_TOPOLOGY, "training")["metadata"]["uid"]
    Project.objects.filter(name="nlp").delete()  # removed while every run failed on the Topology
    Pool.objects.filter(name="training").update(topology_keys=[{"key": "zone", "label": zone},
                                                               {"key": "host", "label": host}])
    with pytest.raises(ClusterError, match="nodeLabel structure is immutable; only aliases may be edited"):
        kube.patch_object(KAI_TOPOLOGY, "training", {"spec": {"levels": [{"nodeLabel": zone}, {"nodeLabel": host}]}})
    topology = "/apis/kai.scheduler/v1alpha1/topologies/training"
    standin.clear_requests()

    result = run(kai, kube)

    assert result.refused == [] and result.recreated == ["Topology/training"]
    assert sorted(result.deleted) == sorted(f"Queue/{queue_name(pool, 'research', 'nlp')}"
                                            for pool in Pool.objects.values_list("name", flat=True))
    stored = standin.object(KAI_TOPOLOGY, "training")
    assert stored["spec"]["levels"] == [{"nodeLabel": zone}, {"nodeLabel": host}]
    assert stored["metadata"]["uid"] != created_uid  # a new object, not a patched one
    assert [r.method for r in standin.requests if r.path.startswith(topology)] == ["DELETE"]
    assert not standin.requests_to(topology, method="PATCH")
    assert run(kai, kube).writes == 0


def test_a_kind_the_cluster_does_not_serve_is_refused_and_every_other_kind_is_written(kai, tmp_path):
    # By hand: the configuration refuses topology keys whose labels none of the pool's nodes carries, and the world's
    # nodes are add_nodes' rows without them.
    Pool.objects.filter(name="training").update(topology_keys=[{"key": "zone", "label": "topology.kubernetes.io/zone"}])
    with KubeStandin(crds=["queues.scheduling.run.ai"]) as older_kai:  # a KAI without the Topology CRD
        client = KubeCluster.from_kubeconfig(older_kai.kubeconfig(tmp_path / "kubeconfig"))
        try:
            result = run(kai, client)
        finally:
            client.close()

        assert [(r.kind, r.action) for r in result.refused] == [("Topology", "list")]
        assert "does not serve topologies.kai.scheduler/v1alpha1" in result.refused[0].message
        assert queues(older_kai) == wanted_queues(kai)  # the Queues are written all the same


def test_a_reconcile_that_writes_leaves_one_audit_row_and_one_that_writes_nothing_leaves_none(standin, kube, kai):
    from pools.models import AuditEvent

    assert run(kai, kube) is not None
    [written] = AuditEvent.objects.filter(kind="engine", action="reconcile")
    assert written.object == "backend/default" and "created" in written.summary
    assert written.actor_kind == "system"
    assert run(kai, kube).writes == 0
    assert AuditEvent.objects.filter(kind="engine").count() == 1
