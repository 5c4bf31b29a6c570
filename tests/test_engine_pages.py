"""Where an engine backend (KAI Scheduler, Kueue) shows: the Backend admin page and its "Reconcile engine objects
now" action, `backend list` and `backend reconcile`, which engine enforces a pool's quotas on the quota and pool
pages (its objects' state for staff only), and topology keys checked against the pool's nodes when a pool is
written. Engine objects are written to the stand-in API server through the real client."""

import json

import pytest
from django.core.management import CommandError
from django.test import Client
from django.utils import timezone

from pools.cluster.kinds import KAI_QUEUE
from pools.models import Backend, ConfigKind, ConfigRevision, Node, Pool
from pools.schedulers import reconcile
from tests.scheduling.conftest import SHARED
from tests.support.commands import run
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db
RACK = {"key": "rack", "label": "example.com/rack"}


@pytest.fixture
def on_standin(kai, standin, tmp_path, shared_clients):
    """The KAI backend connected to the stand-in API server."""
    run("backend", "add", kai.name, "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    return Backend.objects.get(pk=kai.pk)


@pytest.fixture
def unreachable(kai, tmp_path, shared_clients):
    """The KAI backend pointing at a port nobody listens on."""
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
        "users": [{"name": "gone", "user": {}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}]}))
    run("backend", "add", kai.name, "--kubeconfig", str(path))
    return Backend.objects.get(pk=kai.pk)


def reconciled(backend: Backend, kube) -> Backend:
    assert reconcile.run(backend, kube) is not None
    return Backend.objects.get(pk=backend.pk)


def queues(kube) -> set[str]:
    return {item["metadata"]["name"] for item in kube.list_objects(KAI_QUEUE).items}


def text(response) -> str:
    return response.content.decode()


# ---- the Backend admin page ------------------------------------------------------------------------------

def test_the_backend_admin_page_shows_the_engine_the_objects_we_manage_and_the_last_reconcile(admin_client, kai,
                                                                                              standin, kube):
    backend = reconciled(kai, kube)
    count = sum(backend.engine_objects["objects"].values())
    assert count > 1

    page = text(admin_client.get(f"/admin/pools/backend/{backend.pk}/change/"))

    assert "Engine (admission and placement)" in page
    assert f"<strong>KAI Scheduler · {count} objects · less than a minute ago</strong>" in page
    assert "Objects we manage in it" in page
    assert f"<tr><td>Queue</td><td>{backend.engine_objects['objects']['Queue']}</td></tr>" in page
    assert f"created {count}, updated 0, deleted 0, unchanged 0" in page
    listing = text(admin_client.get("/admin/pools/backend/"))
    assert f"KAI Scheduler · {count} objects · less than a minute ago" in listing


def test_the_backend_admin_page_shows_the_engine_error_escaped_and_the_refused_names(admin_client, kai):
    # By hand: a reconcile's outcome with markup in the cluster's words, which the stand-in does not answer.
    Backend.objects.filter(pk=kai.pk).update(
        engine_error="<b>queues.scheduling.run.ai</b> is not served", engine_reconciled_at=timezone.now(),
        engine_objects={"created": 0, "updated": 0, "deleted": 0, "unchanged": 3, "refused": 1,
                        "objects": {"Queue": 3}},
        engine_refused=[{"kind": "Queue", "namespace": "", "name": "team-x", "action": "create",
                         "message": "<i>the name is taken</i>", "since": "2026-11-27T10:00:00+00:00",
                         "at": "2026-11-27T10:05:00+00:00"}])

    page = text(admin_client.get(f"/admin/pools/backend/{kai.pk}/change/"))
    listing = text(admin_client.get("/admin/pools/backend/"))

    assert "failing: &lt;b&gt;queues.scheduling.run.ai&lt;/b&gt; is not served" in page
    assert "<b>queues" not in page and "<b>queues" not in listing
    assert "failing: &lt;b&gt;queues" in listing
    assert "<td>Queue</td><td>team-x</td><td>create</td><td>2026-11-27T10:00:00+00:00</td>" in page
    assert "<td>&lt;i&gt;the name is taken&lt;/i&gt;</td>" in page


def test_the_reconcile_action_writes_the_engine_objects_and_says_what_it_did(admin_client, on_standin, kube):
    response = admin_client.post("/admin/pools/backend/", {"action": "reconcile_engine",
                                                           "_selected_action": [on_standin.pk]}, follow=True)

    assert response.status_code == 200
    [message] = [str(m) for m in response.context["messages"]]
    backend = Backend.objects.get(pk=on_standin.pk)
    created = backend.engine_objects["created"]
    assert created > 1 and backend.engine_error == "" and backend.engine_reconciled_at is not None
    assert message.startswith(f"default (KAI Scheduler): created {created}, updated 0, deleted 0, unchanged 0; "
                              "objects now: Queue ")
    assert "training.research.vision" in queues(kube)


def test_the_reconcile_action_reports_an_unreachable_cluster_as_a_message_not_a_500(admin_client, unreachable):
    response = admin_client.post("/admin/pools/backend/", {"action": "reconcile_engine",
                                                           "_selected_action": [unreachable.pk]}, follow=True)

    assert response.status_code == 200
    [message] = list(response.context["messages"])
    assert message.level_tag == "error" and str(message).startswith("default: reconcile failed: ")
    backend = Backend.objects.get(pk=unreachable.pk)
    assert backend.engine_error and backend.engine_reconciled_at is None
    assert "failing: " in text(response)


def test_the_reconcile_action_says_when_there_is_nothing_to_reconcile_or_no_connection(admin_client, world):
    # By hand: a backend with no connection, which `backend add` refuses to make.
    kueue = Backend.objects.create(name="kueue-cluster", scheduler=Backend.Scheduler.KUEUE)
    default = Backend.objects.get(name="default")

    response = admin_client.post("/admin/pools/backend/", {"action": "reconcile_engine",
                                                           "_selected_action": [default.pk, kueue.pk]}, follow=True)

    messages = sorted(str(m) for m in response.context["messages"])
    assert messages == [
        "default: Kubernetes default scheduler, no engine objects of ours: nothing to reconcile.",
        "kueue-cluster: not connected (set its kubeconfig or in-cluster configuration).",
    ]


# ---- ./manage.py backend list | reconcile ----------------------------------------------------------------

def backend_command(*args) -> str:
    return run("backend", *args)


def test_backend_list_shows_the_engine_its_object_count_and_the_last_reconcile(kai, standin, kube):
    backend = reconciled(kai, kube)
    # By hand: backends with no connection (which `backend add` refuses), one with a reconcile's error.
    Backend.objects.create(name="kueue-cluster", scheduler=Backend.Scheduler.KUEUE,
                           engine_error="the cluster does not serve clusterqueues.kueue.x-k8s.io/v1beta1: is the "
                                        "engine installed (its CRDs)?")
    Backend.objects.create(name="plain")
    count = sum(backend.engine_objects["objects"].values())

    lines = backend_command("list").splitlines()

    header = lines[0].split("  ")
    assert [cell.strip() for cell in header if cell.strip()][:5] == ["BACKEND", "KIND", "ENGINE", "ENGINE OBJECTS",
                                                                     "RECONCILED"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["default"].split()[1:5] == ["simulated", "kai", str(count), "just"]
    assert "error: the cluster does not serve clust…" in rows["kueue-cluster"]
    assert rows["plain"].split()[1:5] == ["unconnected", "default", "0", "-"]


def test_backend_list_json_has_the_engine_fields(kai, standin, kube):
    backend = reconciled(kai, kube)

    rows = {row["name"]: row for row in json.loads(backend_command("list", "--format", "json"))}

    default = rows["default"]
    assert default["engine"] == "kai" and default["scheduler"] == "kai"
    assert default["engine_objects"]["objects"] == backend.engine_objects["objects"]
    assert default["engine_reconciled_at"] and default["engine_error"] == ""
    assert default["nodes"] == Node.objects.filter(backend=backend).count()


def test_backend_reconcile_prints_what_it_did_in_one_paragraph(on_standin, kube):
    printed = backend_command("reconcile", "default")

    backend = Backend.objects.get(pk=on_standin.pk)
    created, kinds = backend.engine_objects["created"], backend.engine_objects["objects"]
    assert printed.count("\n") == 1
    assert printed.startswith(f"Backend default (KAI Scheduler) reconciled: created {created}, updated 0, "
                              "deleted 0, unchanged 0, refused 0. Objects of ours now: ")
    assert f"Queue {kinds['Queue']}" in printed
    again = backend_command("reconcile", "default")
    assert f"created 0, updated 0, deleted 0, unchanged {created}, refused 0" in again


def test_backend_reconcile_names_objects_left_alone(on_standin, kube):
    kube.create_object(KAI_QUEUE, {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue",
                                   "metadata": {"name": "training.research"},
                                   "spec": {"resources": {"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 1}}}})

    printed = backend_command("reconcile", "default")

    assert "refused 1." in printed
    assert ("Refused: Queue/training.research (create): the name is taken by an object of someone else (not "
            "labelled as ours); left alone.") in printed


def test_backend_reconcile_fails_in_one_paragraph_without_a_traceback(unreachable):
    with pytest.raises(CommandError) as caught:
        backend_command("reconcile", "default")

    message = str(caught.value)
    assert message.startswith("Backend default (KAI Scheduler): the reconcile failed")
    assert "\n" not in message and "Traceback" not in message
    assert caught.value.returncode == 1
    assert Backend.objects.get(pk=unreachable.pk).engine_error


def test_backend_reconcile_refuses_an_unknown_or_unconnected_backend(db):
    Backend.objects.create(name="kai-new", scheduler=Backend.Scheduler.KAI)  # by hand: `backend add` wants a connection
    with pytest.raises(CommandError, match="no backend named 'nope'"):
        backend_command("reconcile", "nope")
    with pytest.raises(CommandError, match="Backend kai-new is not connected"):
        backend_command("reconcile", "kai-new")


def test_backend_reconcile_has_nothing_to_do_on_the_default_scheduler(world):
    printed = backend_command("reconcile", "default")

    assert printed == ("Backend default uses the Kubernetes default scheduler, where our own admission enforces "
                       "quotas, and holds no engine objects of ours: nothing to reconcile.\n")


# ---- the quota and pool pages ----------------------------------------------------------------------------

@pytest.fixture
def kai_training(world):
    """Pool training on a KAI backend whose last reconcile failed; the other pools on the default scheduler. By hand:
    the reconcile's error with markup in it, and a pool moved without re-deriving the world's add_nodes rows."""
    backend = Backend.objects.create(name="kai-cluster", scheduler=Backend.Scheduler.KAI,
                                     engine_error="<script>alert(1)</script> queues refused",
                                     engine_reconciled_at=timezone.now())
    Pool.objects.filter(name="training").update(backend=backend)
    return backend


KAI_TEXT = ("Enforced by KAI Scheduler (Queues training.&lt;department&gt; and "
            "training.&lt;department&gt;.&lt;project&gt;)")


def section(page: str, pool: str) -> str:
    start = page.index(f'data-pool="{pool}"')
    return page[start:page.index("</section>", start)]


def test_staff_see_which_engine_enforces_each_pools_quotas_and_its_error(client, staff, kai_training):
    client.force_login(staff)

    page = text(client.get("/quotas/"))

    training = section(page, "training")
    assert KAI_TEXT in training
    assert "last reconcile of its objects failed: &lt;script&gt;alert(1)&lt;/script&gt; queues refused" in training
    assert "<script>alert" not in page
    assert "Enforced by our admission" in section(page, SHARED)
    assert "reconcile" not in section(page, SHARED)


def test_a_kueue_pool_says_kueue_enforces_its_quotas(client, staff, kai_training):
    # By hand, as kai_training: an unconnected backend, which `backend add` does not make.
    Backend.objects.filter(pk=kai_training.pk).update(scheduler=Backend.Scheduler.KUEUE, engine_error="",
                                                      engine_reconciled_at=None)
    client.force_login(staff)

    training = section(text(client.get("/quotas/")), "training")

    assert ("Enforced by Kueue (ClusterQueues &lt;project&gt; in Cohorts &lt;department&gt;) · "
            '<span data-testid="engine-state">its objects are not reconciled yet</span>') in training


def test_staff_see_when_the_engine_objects_were_reconciled(client, staff, kai_training):
    Backend.objects.filter(pk=kai_training.pk).update(engine_error="")  # by hand, as kai_training
    client.force_login(staff)

    training = section(text(client.get("/quotas/")), "training")

    assert "objects reconciled <time" in training and "less than a minute ago</time>" in training


def test_a_member_sees_the_engine_but_neither_its_backend_nor_its_error(kai_training, world):
    member = Client()
    member.force_login(world["researcher"])

    page = text(member.get("/quotas/"))

    assert KAI_TEXT in section(page, "training")
    assert "Enforced by our admission" in section(page, SHARED)
    assert "alert(1)" not in page and "queues refused" not in page and "reconcile" not in page
    assert "kai-cluster" not in page


def test_the_pool_page_says_in_one_line_who_enforces_its_quotas(client, staff, kai_training, world):
    client.force_login(staff)
    staff_page = text(client.get("/pools/training/"))
    member = Client()
    member.force_login(world["researcher"])
    member_page = text(member.get("/pools/training/"))
    default_page = text(member.get(f"/pools/{SHARED}/"))

    assert f'<p id="pool-engine">Quotas: <span class="quota-engine" data-testid="quota-engine">{KAI_TEXT} · ' \
           in staff_page
    assert "failed: &lt;script&gt;" in staff_page
    line = member_page[member_page.index('<p id="pool-engine">'):]
    assert line[:line.index("</p>")] == (f'<p id="pool-engine">Quotas: <span class="quota-engine" '
                                         f'data-testid="quota-engine">{KAI_TEXT}</span>')
    assert "alert(1)" not in member_page
    assert 'data-testid="quota-engine">Enforced by our admission</span></p>' in default_page


# ---- topology keys against the pool's nodes --------------------------------------------------------------

def put_pool(api, name: str, **fields):
    document = api.get(f"/api/configs/pool/{name}/").json()
    document["pools"][name].update(fields)
    return api.put(f"/api/configs/pool/{name}/", data=json.dumps(document), content_type="application/json")


def test_a_topology_key_whose_label_no_node_of_the_pool_carries_is_refused_and_nothing_written(api, kai):
    revisions = ConfigRevision.objects.count()

    response = put_pool(api, "training", topology_keys=[{"key": "zone", "label": "nvidia.com/gpu.product"}, RACK],
                        description="racks")

    assert response.status_code == 400, response.content
    assert response.json() == {
        "detail": 'Pool training: topology key "rack" uses node label example.com/rack, which no node of the pool '
                  "carries (2 nodes checked).",
        "field": "training.topology_keys"}
    pool = Pool.objects.get(name="training")
    assert pool.topology_keys == [] and pool.description != "racks"
    assert ConfigRevision.objects.count() == revisions
    assert pool.memberships.count() == 2  # the placement recomputed in the write was rolled back with it


def test_a_topology_key_is_accepted_when_one_node_of_the_pool_carries_its_label(api, kai):
    node = Node.objects.get(name="training-h100-000")
    # By hand: the world's nodes are add_nodes' rows, with no cluster for `label node` to write first.
    Node.objects.filter(pk=node.pk).update(labels={**node.labels, "example.com/rack": "r1"})

    response = put_pool(api, "training", topology_keys=[RACK])

    assert response.status_code == 200, response.content
    assert response.json()["updated"] == ["training"]
    assert Pool.objects.get(name="training").topology_keys == [RACK]


def test_a_pool_without_nodes_yet_is_accepted_with_its_topology_keys_and_a_warning(api, kai):
    run("backend", "add", "kai-new", "--simulated", "--scheduler", "kai")

    response = put_pool(api, "training", backend="kai-new", topology_keys=[RACK])

    assert response.status_code == 200, response.content
    assert response.json()["warnings"] == [
        'Pool training has no nodes yet, so its topology keys "rack" (example.com/rack) could not be checked '
        "against node labels."]
    pool = Pool.objects.get(name="training")
    assert (pool.backend.name, pool.topology_keys, pool.memberships.count()) == ("kai-new", [RACK], 0)


def test_the_topology_check_also_guards_the_admin_and_the_cli_write_path(kai):
    from pools.config import writes
    from pools.engine import ConfigError

    document = writes.export(ConfigKind.POOL, "training")
    document["pools"]["training"]["topology_keys"] = [RACK]
    with pytest.raises(ConfigError, match='topology key "rack"'):
        writes.validate(ConfigKind.POOL, document, name="training")
    assert not Pool.objects.get(name="training").topology_keys
