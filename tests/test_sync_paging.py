"""A full list folded page by page, and a burst of watch events written in bulk (issue 15: the memory of a full sync,
the burst of 1,000 node events): the stored rows must be exactly what the cluster says, whatever the paging."""

from collections import Counter

import pytest
from django.core.management import call_command

from pools.cluster import Expired, ListPage
from pools.cluster.reflector import fold_pages
from pools.fleet.sync import POD_COLUMNS, BackendSync, _pod_from_row, cluster_for
from pools.inventory.pods import counts_on_node, pod_facts
from pools.inventory.status import usage_from_pods
from pools.models import Backend, Node, NodeMembership, Pod
from tests.kube_objects import make_node, make_pod
from tests.kube_standin import HANG

pytestmark = pytest.mark.django_db

POOL_LABEL = "runwhere.ai/pool"
# Node columns the sync derives from the cluster (not ids, backend or times).
NODE_SKIP = {"id", "backend_id", "last_seen", "updated_at"}


# ---- fold_pages (pure) -----------------------------------------------------------------------------------------

def test_fold_pages_starts_the_fold_again_when_a_continue_token_expires():
    calls = []

    def list_page(*, limit, continue_token=None):
        calls.append(continue_token)
        if continue_token is None:
            return ListPage([1, 2], str(100 + len(calls)), "page-2")
        if len(calls) == 2:
            raise Expired("continue token expired", 410)
        return ListPage([3], "999", None)

    folded, version = fold_pages(list_page, list, lambda into, page: into.extend(page.items), limit=2)
    # The first attempt's page is not in the result twice; the version is the second list's first page's.
    assert folded == [1, 2, 3] and version == "103"
    assert calls == [None, "page-2", None, "page-2"]


def test_fold_pages_passes_each_page_once_and_holds_none():
    pages = [ListPage([f"i{n}" for n in range(k * 3, k * 3 + 3)], "7", f"t{k + 1}" if k < 3 else None)
             for k in range(4)]
    seen = []

    def add(count, page):
        seen.append(page.items)
        count["items"] += len(page.items)

    def list_page(*, limit, continue_token=None):
        return pages[int(continue_token[1:]) if continue_token else 0]

    counted, version = fold_pages(list_page, Counter, add, limit=3)
    assert counted == {"items": 12} and version == "7" and len(seen) == 4


# ---- a paged full list, end to end ---------------------------------------------------------------------------

class OnePage:
    """The real cluster, but every list in a single page: the reference the paged sync must equal."""

    def __init__(self, cluster):
        self.cluster = cluster

    def list_nodes(self, *, limit=500, continue_token=None):
        return self.cluster.list_nodes(limit=100_000)

    def list_pods(self, *, limit=500, continue_token=None):
        return self.cluster.list_pods(limit=100_000)

    def __getattr__(self, name):
        return getattr(self.cluster, name)


def many_pods(standin, nodes: int = 40, per_node: int = 33) -> None:
    standin.add_nodes([make_node(f"n{i:02}", gpus=8 if i % 4 else 0,
                                 labels={POOL_LABEL: "training"} if i % 3 == 0 else {}) for i in range(nodes)])
    pods = []
    for i in range(nodes):
        node = f"n{i:02}"
        pods.append(make_pod(f"dcgm-{node}", node, namespace="gpu-operator", cpu="10m", memory="64Mi",
                             labels={"app": "nvidia-dcgm-exporter"}))
        for j in range(per_node - 1):
            kind = j % 6
            if kind == 0:
                pods.append(make_pod(f"done-{node}-{j}", node, gpus=2, phase="Succeeded"))
            elif kind == 1:
                pods.append(make_pod(f"wait-{node}-{j}", None, gpus=1))
            else:
                pods.append(make_pod(f"run-{node}-{j}", node, gpus=1 if kind == 2 and i % 4 else 0,
                                     cpu=f"{100 * (j + 1)}m", memory=f"{j + 1}Gi",
                                     labels={POOL_LABEL: "training"} if kind == 3 else {}))
    standin.add_pods(pods)


def stored(backend) -> dict:
    nodes = {row["name"]: {k: v for k, v in row.items() if k not in NODE_SKIP}
             for row in Node.objects.filter(backend=backend).values()}
    pods = set(Pod.objects.filter(backend=backend).values_list("uid", *POD_COLUMNS))
    memberships = set(NodeMembership.objects.filter(node__backend=backend).values_list("node__name", "pool__name"))
    return {"nodes": nodes, "pods": pods, "memberships": memberships}


def expected_pods(standin, kube) -> set[tuple]:
    """The Pod rows by the rule, from every pod of the stand-in in one page."""
    rows = set()
    for item in kube.list_pods(limit=100_000).items:
        pod = pod_facts(item, pool_label=POOL_LABEL)
        if counts_on_node(pod):
            rows.add((pod.uid, pod.namespace, pod.name, pod.node_name, pod.phase, pod.gpu, pod.cpu_m, pod.memory,
                      pod.component, pod.pool, pod.preemptible))
    return rows


@pytest.fixture
def two_backends(standin, tmp_path, defaults):
    """`paged` on the stand-in, and `whole`, the reference, on a second API server that serves the same objects
    under a kube-system of its own: to the product another cluster (two backends registered as one cluster share one
    set of node and pod rows), so that each stores what its own list says. Both only list."""
    from tests.kube_standin import KubeStandin

    mirror = KubeStandin()
    mirror._collections = standin._collections  # the same nodes, pods, Jobs and Events
    call_command("backend", "add", "paged", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    call_command("backend", "add", "whole", "--kubeconfig", mirror.kubeconfig(tmp_path / "mirror-kubeconfig"))
    yield Backend.objects.get(name="paged"), Backend.objects.get(name="whole")
    mirror.close()


def sync_both(standin, paged, whole):
    standin.clear_requests()
    paged_stats = BackendSync(paged, cluster_for(paged)).run(seconds=0)
    pod_lists = len(standin.requests_to("/api/v1/pods", watch=False))
    whole_stats = BackendSync(whole, OnePage(cluster_for(whole))).run(seconds=0)
    return paged_stats, whole_stats, pod_lists


def test_a_full_list_over_many_pages_stores_what_one_page_would_and_deletes_what_it_did_not_name(standin,
                                                                                                  two_backends):
    paged, whole = two_backends
    many_pods(standin)  # 40 nodes, 1,320 pods: three pages of 500
    kube = cluster_for(paged)
    paged_stats, whole_stats, pod_lists = sync_both(standin, paged, whole)
    assert pod_lists == 3
    first = stored(paged)
    assert first == stored(whole)
    # Per node: the dcgm pod and 20 running ones count; 6 finished and 6 unbound do not.
    assert first["pods"] == expected_pods(standin, kube) and len(first["pods"]) == 40 * 21
    assert paged_stats.pods_written == whole_stats.pods_written == 40 * 21
    n01 = first["nodes"]["n01"]
    # n01: 5 running pods ask for one GPU (j = 2, 8, 14, 20, 26).
    assert (n01["gpu_used"], n01["gpu_free"]) == (5, 3)
    assert n01["cpu_requested"] == 10 + sum(100 * (j + 1) for j in range(32) if j % 6 > 1)
    assert len(first["nodes"]) == 40

    # Pods deleted on every page, pods finished, pods added, two nodes gone with their pods.
    for i in range(0, 40, 3):
        standin.delete_pod(f"run-n{i:02}-4")
    for i in range(1, 40, 4):
        standin.modify_pod(f"run-n{i:02}-5", lambda pod: {**pod, "status": {**pod["status"], "phase": "Failed"}})
    standin.add_pods([make_pod(f"new-{i}", f"n{i:02}", gpus=1, cpu="3", labels={POOL_LABEL: "inference"})
                      for i in range(5, 25)])
    for name in ("n07", "n30"):
        standin.delete_node(name)
        for item in kube.list_pods(limit=100_000).items:
            if item["spec"].get("nodeName") == name:
                standin.delete_pod(item["metadata"]["name"], namespace=item["metadata"]["namespace"])
    paged_stats, whole_stats, pod_lists = sync_both(standin, paged, whole)
    assert pod_lists == 3
    second = stored(paged)
    assert second == stored(whole)
    assert second["pods"] == expected_pods(standin, kube)
    assert "n07" not in second["nodes"] and "n30" not in second["nodes"] and len(second["nodes"]) == 38
    assert not Pod.objects.filter(backend=paged, node_name__in=["n07", "n30"]).exists()
    assert not NodeMembership.objects.filter(node__backend=paged, node__name__in=["n07", "n30"]).exists()
    gone = len(first["pods"] - second["pods"])
    # 14 deleted, 10 failed, n07's 21 and n30's other 20 (its run-n30-4 is among the 14).
    assert paged_stats.pods_deleted == whole_stats.pods_deleted == gone == 14 + 10 + 21 + 20
    assert paged_stats.pods_written == 20 - 1  # new-7 landed on n07, deleted with it
    assert second["nodes"]["n05"]["gpu_used"] == first["nodes"]["n05"]["gpu_used"] + 1
    assert second["nodes"]["n09"]["gpu_used"] == first["nodes"]["n09"]["gpu_used"] + 1  # new-9, run-n09-5 idle


def test_a_relist_of_unchanged_pages_writes_nothing(standin, two_backends):
    paged, _ = two_backends
    many_pods(standin, nodes=20)
    BackendSync(paged, cluster_for(paged)).run(seconds=0)
    before = dict(Node.objects.filter(backend=paged).values_list("name", "updated_at"))
    stats = BackendSync(paged, cluster_for(paged)).run(seconds=0, relist=True)
    assert (stats.nodes_written, stats.pods_written, stats.pods_deleted, stats.nodes_deleted) == (0, 0, 0, 0)
    assert dict(Node.objects.filter(backend=paged).values_list("name", "updated_at")) == before


# ---- a burst of node events, written in bulk ------------------------------------------------------------------

def node_events(kube, since: str, count: int) -> list:
    """The next `count` watch events after `since`, as the sync's watch reads them (real HTTP)."""
    events = []
    stream = kube.watch_nodes(since, timeout_seconds=HANG)
    try:
        for event in stream:
            if event.type != "BOOKMARK":
                events.append(event)
            if len(events) == count:
                break
    finally:
        stream.close()
    assert len(events) == count
    return events


def test_a_burst_of_node_events_stores_exactly_what_they_said(standin, two_backends):
    paged, reference = two_backends
    many_pods(standin, nodes=12, per_node=9)
    sync = BackendSync(paged, cluster_for(paged))
    sync.run(seconds=0)
    before = {row["name"]: row for row in Node.objects.filter(backend=paged).values()}
    kube = cluster_for(paged)
    since = standin.resource_version

    def heartbeat(node):
        node["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1999999999"
        for condition in node["status"]["conditions"]:
            condition["lastHeartbeatTime"] = "2030-01-01T00:00:00Z"
        return node

    standin.modify_node("n01", {"metadata": {"labels": {"team": "a"}}})
    standin.modify_node("n02", heartbeat)  # facts unchanged: nothing to write
    standin.modify_node("n03", {"metadata": {"labels": {"team": "b"}}})
    standin.modify_node("n01", {"metadata": {"labels": {"team": "c", POOL_LABEL: "inference"}}})  # twice: last wins
    standin.modify_node("n04", {"spec": {"unschedulable": True}})  # other fields than the labels
    standin.modify_node("n05", {"metadata": {"labels": {"team": "d"}}, "spec": {"unschedulable": True}})
    standin.delete_node("n06")
    standin.add_node(make_node("n99", gpus=4))
    events = node_events(kube, since, 8)

    sync.apply(events, [])
    after = {row["name"]: row for row in Node.objects.filter(backend=paged).values()}
    assert after["n01"]["labels"]["team"] == "c" and after["n01"]["labels"][POOL_LABEL] == "inference"
    assert "team=c" in after["n01"]["label_text"].split(", ")
    assert after["n03"]["labels"]["team"] == "b"
    assert after["n04"]["unschedulable"] and after["n04"]["status"] == "Not ready (Undrained migrated node)"
    assert after["n05"]["unschedulable"] and after["n05"]["labels"]["team"] == "d"
    assert "n06" not in after and after["n99"]["gpu_total"] == 4
    # Only what changed was written; the rest kept its row and times.
    for name in ("n02", "n00", "n07"):
        assert after[name] == before[name]
    for name in ("n01", "n03", "n04", "n05"):
        assert after[name]["updated_at"] > before[name]["updated_at"]
        assert after[name]["last_seen"] == after[name]["updated_at"]
        # Usage is kept from the stored pods, summed by the database: the same figures as the list gave.
        for field in ("gpu_used", "gpu_free", "cpu_requested", "memory_requested", "components"):
            assert after[name][field] == before[name][field], (name, field)

    # A full list of the cluster as it now is, into another backend, gives the same rows.
    BackendSync(reference, cluster_for(reference)).run(seconds=0)
    assert stored(paged) == stored(reference)
    # And a relist over the burst's rows finds nothing to write.
    stats = BackendSync(paged, cluster_for(paged)).run(seconds=0, relist=True)
    assert (stats.nodes_written, stats.nodes_deleted, stats.pods_written, stats.pods_deleted) == (0, 0, 0, 0)


def test_the_usage_a_burst_reads_back_is_usage_from_pods_over_the_stored_pods(standin, two_backends):
    paged, _ = two_backends
    many_pods(standin, nodes=8, per_node=13)
    sync = BackendSync(paged, cluster_for(paged))
    sync.run(seconds=0)
    # The burst reads the stored pods, not the cluster: change two behind the sync's back.
    Pod.objects.filter(backend=paged, name="run-n01-2").update(gpu=3, pool="inference")
    Pod.objects.filter(backend=paged, name="dcgm-n02").update(component="")
    rows = Pod.objects.filter(backend=paged).values("uid", *POD_COLUMNS)
    expected = usage_from_pods(_pod_from_row(row) for row in rows)
    names = set(Node.objects.filter(backend=paged).values_list("name", flat=True)) | {"not-a-node"}
    assert sync.recompute._stored_usage(names) == {name: expected[name] for name in names if name in expected}
    assert expected["n01"].gpu_used == 3 + 1 and expected["n01"].pod_pools == {"training", "inference"}
    assert expected["n03"].components == {"dcgm"} and expected["n02"].components == frozenset()

    kube = cluster_for(paged)
    since = standin.resource_version
    for i in range(8):
        standin.modify_node(f"n{i:02}", {"metadata": {"labels": {"burst": str(i)}}})
    sync.apply(node_events(kube, since, 8), [])
    n01 = Node.objects.get(backend=paged, name="n01")
    assert (n01.gpu_used, n01.gpu_free, n01.labels["burst"]) == (4, 4, "1")
    assert Node.objects.get(backend=paged, name="n02").components != Node.objects.get(backend=paged,
                                                                                       name="n03").components


def test_update_rows_json_writes_each_row_its_own_values_of_every_type(defaults):
    from datetime import UTC, datetime, timedelta

    from pools.models.bulk import update_rows_json

    # By hand: rows for the bulk writer under test, which the sync itself calls.
    backend = Backend.objects.create(name="rows")
    a = Node.objects.create(backend=backend, name="a", labels={"k": "v"}, gpu_used=1)
    b = Node.objects.create(backend=backend, name="b", labels={"k": "w"}, gpu_used=2)
    untouched = Node.objects.create(backend=backend, name="c", labels={"k": "x"}, gpu_used=3)
    when = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    tricky = {"q\"uote": "back\\slash", "nl": "a\nb", "uni": "Grüße ✓", "nested": {"list": [1, None, True]}}
    written = update_rows_json(Node, [
        {"id": a.id, "labels": tricky, "label_text": "x, \"y\"", "unschedulable": True, "cpu_requested": 2**40,
         "status": "Not ready (Disk pressure)", "reasons": ["Disk pressure"], "last_seen": when, "updated_at": None},
        {"id": b.id, "labels": {}, "label_text": "", "unschedulable": False, "cpu_requested": 0, "status": "Ready",
         "reasons": [], "last_seen": when + timedelta(seconds=1), "updated_at": when},
    ], ["labels", "label_text", "unschedulable", "cpu_requested", "status", "reasons", "last_seen", "updated_at"])
    assert written == 2
    a.refresh_from_db()
    b.refresh_from_db()
    untouched.refresh_from_db()
    assert (a.labels, a.label_text, a.unschedulable, a.cpu_requested, a.status, a.reasons, a.last_seen,
            a.updated_at, a.gpu_used) == (tricky, "x, \"y\"", True, 2**40, "Not ready (Disk pressure)",
                                          ["Disk pressure"], when, None, 1)
    assert (b.labels, b.unschedulable, b.status, b.last_seen, b.updated_at, b.gpu_used) == (
        {}, False, "Ready", when + timedelta(seconds=1), when, 2)
    assert (untouched.labels, untouched.gpu_used, untouched.last_seen) == ({"k": "x"}, 3, None)
    assert update_rows_json(Node, [], ["labels"]) == 0
