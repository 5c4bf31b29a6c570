"""One cluster, one backend (issue 23, point 4): `backend add` reads the uid of the cluster's kube-system namespace
and refuses a second backend for a cluster already registered, naming the first, unless the admin splits it on
purpose with --same-cluster-as; two backends splitting one API server each own only the engine objects they wrote
(the `<prefix>backend` label), so reconciling them in turn writes nothing the second time round. Against the
stand-in API server through the real client."""

import json

import pytest
from django.core.management import CommandError

from pools.cluster.kinds import KAI_QUEUE
from pools.cluster.simulated import SimulatedCluster
from pools.models import Backend
from pools.schedulers.reconcile import run
from tests.scheduling.conftest import SHARED
from tests.support import commands
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db
PREFIX = "runwhere.ai/"
MANAGED = {f"{PREFIX}managed-by": "osmo-pools"}
WRITES = ("POST", "PUT", "PATCH", "DELETE")


def add(*args: str) -> str:
    return commands.run("backend", "add", *args)


def test_a_cluster_registered_twice_is_refused_naming_the_first(standin, tmp_path, defaults):
    path = standin.kubeconfig(tmp_path / "kubeconfig")
    add("first", "--kubeconfig", path)
    assert Backend.objects.get(name="first").cluster_uid == standin.kube_system_uid

    with pytest.raises(CommandError) as refused:
        add("second", "--kubeconfig", path, "--scheduler", "kai")

    assert str(refused.value) == (
        f"This cluster is already registered as backend first (kube-system uid {standin.kube_system_uid}). Use "
        "backend first, or, to split the cluster between backends on purpose (each with its own pools and "
        "namespaces), add --same-cluster-as first.")
    assert not Backend.objects.filter(name="second").exists()
    add("first", "--kubeconfig", path, "--scheduler", "kai")  # the first one, updated: itself is no second
    assert Backend.objects.get(name="first").scheduler == "kai"


def test_same_cluster_as_names_a_backend_of_this_cluster(standin, tmp_path, defaults):
    from tests.kube_standin import KubeStandin

    path = standin.kubeconfig(tmp_path / "kubeconfig")
    add("first", "--kubeconfig", path)
    with KubeStandin() as elsewhere:
        add("other", "--kubeconfig", elsewhere.kubeconfig(tmp_path / "other"))
        with pytest.raises(CommandError, match="--same-cluster-as nobody: there is no other backend named 'nobody'"):
            add("second", "--kubeconfig", path, "--same-cluster-as", "nobody")
        with pytest.raises(CommandError, match=f"backend other is another cluster .kube-system uid "
                                               f"{elsewhere.kube_system_uid}, this one {standin.kube_system_uid}"):
            add("second", "--kubeconfig", path, "--same-cluster-as", "other")

    add("second", "--kubeconfig", path, "--same-cluster-as", "first")

    add("second", "--kubeconfig", path, "--scheduler", "kai")  # an update keeps the split
    second = Backend.objects.get(name="second")
    assert second.cluster_uid == standin.kube_system_uid and second.same_cluster_as == "first"
    assert second.scheduler == "kai"
    rows = {row["name"]: row for row in json.loads(commands.run("backend", "list", "--format", "json"))}
    assert rows["second"]["same_cluster_as"] == "first" and rows["second"]["cluster_uid"] == standin.kube_system_uid


def test_a_cluster_that_does_not_answer_is_added_with_a_warning(tmp_path, defaults):
    port = free_port()
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "gone", "user": {}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone"}}]}))

    printed = add("later", "--kubeconfig", str(path))

    assert "Could not read the cluster's identity (the uid of kube-system): getting namespace kube-system:" in printed
    assert "checked when `backend add later` runs again and it answers" in printed
    assert Backend.objects.get(name="later").cluster_uid == ""


def test_each_simulated_cluster_has_a_stable_kube_system_uid_of_its_own(tmp_path, defaults, settings):
    settings.OSMO_SIMULATED_STATE_DIR = tmp_path / "state"
    add("sim-a", "--simulated")
    add("sim-b", "--simulated")

    a, b = (Backend.objects.get(name=name).cluster_uid for name in ("sim-a", "sim-b"))
    assert a and b and a != b
    assert SimulatedCluster("sim-a", tmp_path / "elsewhere").namespace_uid("kube-system") == a


def test_two_backends_splitting_one_cluster_each_keep_their_own_objects_and_a_second_round_writes_nothing(
        standin, kube, world, tmp_path):
    path = standin.kubeconfig(tmp_path / "kubeconfig")
    add("first", "--kubeconfig", path, "--scheduler", "kai")
    add("second", "--kubeconfig", path, "--scheduler", "kueue", "--same-cluster-as", "first")
    first, second = Backend.objects.get(name="first"), Backend.objects.get(name="second")
    commands.configure("POOL", "training", backend="first")
    commands.configure("POOL", SHARED, backend="second")
    # Ours from before the backend label: one that `first` wants (adopted), one nobody wants (left alone).
    standin.add_object(KAI_QUEUE, {"metadata": {"name": "training.research.vision", "labels": MANAGED},
                                   "spec": {"resources": {"gpu": {"quota": 1, "limit": -1, "overQuotaWeight": 2}}}})
    standin.add_object(KAI_QUEUE, {"metadata": {"name": "gone.research", "labels": MANAGED}, "spec": {}})

    one, two = run(first, kube), run(second, kube)

    assert one.deleted == [] and two.deleted == [] and one.refused == [] and two.refused == []
    assert one.adopted == ["Queue/training.research.vision"] and two.adopted == []
    owners = {queue["metadata"]["name"]: queue["metadata"]["labels"].get(f"{PREFIX}backend")
              for queue in standin.objects(KAI_QUEUE)}
    assert owners.pop("gone.research") is None  # whose it was, nobody can tell: left alone
    assert owners and all(owner == ("first" if name.startswith("training.") else "second")
                          for name, owner in owners.items())
    assert standin.object(KAI_QUEUE, "training.research.vision")["spec"]["resources"]["gpu"]["quota"] == 4

    standin.clear_requests()
    again = [run(first, kube), run(second, kube), run(first, kube)]

    assert [result.writes for result in again] == [0, 0, 0]
    assert [r for r in standin.requests if r.method in WRITES] == []
    selectors = {r.query.get("labelSelector") for r in standin.requests if r.path.endswith("/queues")}
    assert f"{PREFIX}managed-by=osmo-pools,{PREFIX}backend=first" in selectors  # each lists only its own
    assert f"{PREFIX}managed-by=osmo-pools,{PREFIX}backend=second" in selectors


def test_a_second_kueue_backend_on_one_cluster_is_refused_naming_the_first_at_every_door(
        standin, tmp_path, defaults, admin_client):
    """Issue 39: a second Kueue backend split from the first was accepted, then every reconcile re-tried the creates
    of the Cohorts, ClusterQueues and LocalQueues the first one had written (409). KAI backends split cleanly."""
    path = standin.kubeconfig(tmp_path / "kubeconfig")
    add("first", "--kubeconfig", path, "--scheduler", "kueue")
    words = ("Backend first already runs Kueue on this cluster; a second Kueue backend would write the same "
             "Cohorts, ClusterQueues and LocalQueues (one per department and project, cluster-wide) and find them "
             "taken. Put this backend's pools on backend first, or choose another scheduler for this one.")

    with pytest.raises(CommandError) as refused:
        add("second", "--kubeconfig", path, "--scheduler", "kueue", "--same-cluster-as", "first")

    assert str(refused.value) == f"backend second: {words}"
    assert not Backend.objects.filter(name="second").exists()
    add("second", "--kubeconfig", path, "--scheduler", "kai", "--same-cluster-as", "first")
    add("third", "--kubeconfig", path, "--same-cluster-as", "second")  # split from the split: the same cluster
    with pytest.raises(CommandError, match=r"^backend third: Backend first already runs Kueue on this cluster"):
        add("third", "--kubeconfig", path, "--scheduler", "kueue")
    assert Backend.objects.get(name="third").scheduler == "default"

    third = Backend.objects.get(name="third")
    form = admin_client.get(f"/admin/pools/backend/{third.pk}/change/")
    assert form.status_code == 200
    data = {"name": "third", "description": "", "kind": "kubernetes", "kubeconfig_path": path, "kube_context": "",
            "scheduler": "kueue", "node_condition_rules": "{}", "sync_log_entries-TOTAL_FORMS": "0",
            "sync_log_entries-INITIAL_FORMS": "0"}
    page = admin_client.post(f"/admin/pools/backend/{third.pk}/change/", data).content.decode()
    assert "Backend first already runs Kueue on this cluster" in page
    assert Backend.objects.get(name="third").scheduler == "default"
    add("first", "--kubeconfig", path, "--scheduler", "kueue")  # the first one, updated: itself is no second


def test_a_second_kai_backend_on_one_cluster_is_refused_naming_the_first(standin, tmp_path, defaults):
    """Issue 39, point 2: one backend per engine and cluster. KAI's Queue names would not collide, but the
    cluster's one kai-scheduler divides all its GPUs among both backends' top-level Queues."""
    path = standin.kubeconfig(tmp_path / "kubeconfig")
    add("first", "--kubeconfig", path, "--scheduler", "kai")
    add("plain", "--kubeconfig", path, "--same-cluster-as", "first")  # the default scheduler may share it

    with pytest.raises(CommandError) as refused:
        add("second", "--kubeconfig", path, "--scheduler", "kai", "--same-cluster-as", "first")
    with pytest.raises(CommandError, match=r"^backend plain: Backend first already runs KAI on this cluster"):
        add("plain", "--kubeconfig", path, "--scheduler", "kai")

    assert str(refused.value) == (
        "backend second: Backend first already runs KAI on this cluster; the cluster's one kai-scheduler would "
        "divide all its GPUs between the Queues of both backends, so neither backend's quotas would hold. Put this "
        "backend's pools on backend first, or choose another scheduler for this one.")
    assert not Backend.objects.filter(name="second").exists()
    assert Backend.objects.get(name="plain").scheduler == "default"
    add("first", "--kubeconfig", path, "--scheduler", "kai")  # the first one, updated: itself is no second
