"""Cluster sync end to end: the real kubernetes client over HTTP against the stand-in API server, into
the database; then the figures, statuses and memberships the product shows."""


import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from pools.config import writes
from pools.fleet.sync import BackendSync, Lease, SyncBusy, cluster_for, mark_stale_backends
from pools.inventory.nodes import label_text
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pod, SyncLog
from tests.kube_objects import make_node, make_pod, operator_pods
from tests.support.syncing import watch_round
from tests.waiting import until

pytestmark = pytest.mark.django_db


def small_cluster(standin):
    standin.add_nodes([
        make_node("gpu-a", gpus=8),
        make_node("gpu-b", gpus=8, unhealthy_gpus=1),
        make_node("cpu-a", gpus=0),
    ])
    standin.add_pods([
        *operator_pods("gpu-a"), *operator_pods("gpu-b"),
        make_pod("train-1", "gpu-a", gpus=4, cpu="16", memory="64Gi"),
        make_pod("train-2", "gpu-a", gpus=2, cpu="8", memory="32Gi", phase="Pending"),
        make_pod("done", "gpu-a", gpus=2, phase="Succeeded"),
        make_pod("failed", "gpu-b", gpus=8, phase="Failed"),
        make_pod("waiting", None, gpus=8),
        make_pod("etl", "cpu-a", cpu="4", memory="8Gi"),
    ])


def sync_once(backend):
    return BackendSync(backend, cluster_for(backend)).run(seconds=0)


def test_sync_once_gives_the_figures_kubectl_describe_node_computes(standin, backend):
    small_cluster(standin)
    call_command("sync", "prod", "--once")

    a = Node.objects.get(name="gpu-a")
    assert (a.gpu_total, a.gpu_allocatable, a.gpu_used, a.gpu_free, a.gpu_unhealthy) == (8, 8, 6, 2, 0)
    assert a.cpu_requested == 16000 + 8000 + 20  # the operator pods' 10m each count too
    assert a.memory_requested == (64 + 32) * 1024**3 + 2 * 64 * 1024**2
    assert a.status == "Ready" and a.reasons == []
    assert a.gpu_product == "NVIDIA-H100-80GB-HBM3" and a.gpu_memory_mib == 81559
    b = Node.objects.get(name="gpu-b")
    assert (b.gpu_total, b.gpu_allocatable, b.gpu_used, b.gpu_free, b.gpu_unhealthy) == (8, 7, 0, 7, 1)
    cpu = Node.objects.get(name="cpu-a")
    assert (cpu.gpu_total, cpu.cpu_requested, cpu.status) == (0, 4000, "Ready")
    # Only bound, unfinished pods are kept: 4 operator pods, train-1, train-2, etl.
    assert Pod.objects.filter(backend=backend).count() == 7
    backend.refresh_from_db()
    assert backend.last_sync_at and backend.nodes_resource_version and not backend.sync_error


def test_every_node_lands_in_the_default_pool_until_a_pool_selects_it(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    assert set(Node.objects.values_list("sharing", flat=True)) == {"UNUSED"}
    assert NodeMembership.objects.filter(pool__name="default").count() == 3
    # The default pool's platform (no selector, no taint to tolerate) places work on all of them.
    assert list(NodeMembership.objects.values_list("platforms", flat=True)) == [["default"]] * 3
    assert set(map(tuple, Node.objects.values_list("platform_names", flat=True))) == {("default/default",)}

    standin.modify_node("gpu-a", {"metadata": {"labels": {"runwhere.ai/pool": "training"}}})
    sync_once(backend)
    a = Node.objects.get(name="gpu-a")
    assert "runwhere.ai/pool=training" in a.label_text.split(", ") and a.label_text == label_text(a.labels)
    writes.import_document(ConfigKind.POOL, {"pools": {"training": {
        "name": "training", "backend": "prod", "node_selector": {"runwhere.ai/pool": "training"},
        "common_pod_template": ["default_user"], "platforms": {"h100": {
            "override_pod_template": []}}}}}, description="test")

    a = Node.objects.get(name="gpu-a")
    assert (a.pool_names, a.platform_names, a.sharing) == (["training"], ["training/h100"], "RESERVED")
    b = Node.objects.get(name="gpu-b")
    assert (b.pool_names, b.platform_names) == (["default"], ["default/default"])
    writes.delete(ConfigKind.POOL, "training")
    assert Node.objects.get(name="gpu-a").pool_names == ["default"]


def test_a_node_missing_from_a_complete_list_is_removed(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    standin.delete_node("cpu-a")
    sync_once(backend)
    assert sorted(Node.objects.values_list("name", flat=True)) == ["gpu-a", "gpu-b"]


def test_a_failed_list_deletes_nothing_and_is_shown_on_the_backend(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    standin.delete_node("cpu-a")
    standin.fail_next(10, status=500, path_prefix="/api/v1/pods")
    with pytest.raises(CommandError) as raised:
        call_command("sync", "prod", "--once")
    assert str(raised.value).startswith("cluster error: listing pods: HTTP 500")
    assert Node.objects.filter(name="cpu-a").exists()
    backend.refresh_from_db()
    assert "500" in backend.sync_error and backend.sync_failing_since is not None
    assert SyncLog.objects.filter(backend=backend, message__contains="500").exists()


def test_a_heartbeat_only_change_writes_nothing(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    before = dict(Node.objects.values_list("name", "updated_at"))

    def beat(node):
        node["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = "1999999999"
        for condition in node["status"]["conditions"]:
            condition["lastHeartbeatTime"] = "2030-01-01T00:00:00Z"
        return node

    standin.modify_node("gpu-a", beat)
    sync_once(backend)
    assert dict(Node.objects.values_list("name", "updated_at")) == before


def test_one_modified_event_updates_only_that_node(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    before = dict(Node.objects.values_list("name", "updated_at"))

    def cordon(sync):
        standin.modify_node("gpu-b", {"spec": {"unschedulable": True}})
        until(lambda: sync.stats.events >= 1, "the sync to take the cordon's event")

    stats = watch_round(backend, standin, cordon)
    assert stats.events >= 1 and stats.relists == 0

    b = Node.objects.get(name="gpu-b")
    assert b.status == "Cordoned" and b.unschedulable
    after = dict(Node.objects.values_list("name", "updated_at"))
    assert [name for name in after if after[name] != before[name]] == ["gpu-b"]


def test_pod_events_move_the_gpu_figures(standin, backend):
    small_cluster(standin)
    sync_once(backend)

    def churn(sync):
        standin.add_pod(make_pod("train-3", "gpu-b", gpus=3))
        standin.modify_pod("train-1", lambda pod: {**pod, "status": {**pod["status"], "phase": "Succeeded"}})
        until(lambda: sync.stats.events >= 2, "the sync to take both pods' events")

    watch_round(backend, standin, churn)
    assert Node.objects.get(name="gpu-a").gpu_used == 2
    assert Node.objects.get(name="gpu-b").gpu_used == 3


def test_a_watch_that_expires_lists_again(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    standin.add_node(make_node("gpu-c", gpus=4))
    standin.compact()  # the stored resourceVersion is now too old: 410
    stats = watch_round(backend, standin, lambda sync: until(lambda: sync.stats.relists, "the sync to list again"))
    assert stats.relists >= 1
    assert Node.objects.filter(name="gpu-c").exists()


def test_status_lists_every_reason_from_operator_pods_and_conditions(standin, backend):
    standin.add_nodes([make_node("sick", gpus=8, conditions={"DiskPressure": "True", "MemoryPressure": "True"},
                                unschedulable=True)])
    standin.add_pods(operator_pods("sick", toolkit=False))
    sync_once(backend)
    sick = Node.objects.get(name="sick")
    assert sick.status == "Not ready (Disk pressure)"
    assert sick.reasons == ["Disk pressure", "Memory pressure", "Scheduling disabled",
                            "Missing NVIDIA Container Toolkit"]
    assert sick.components["container-toolkit"] == "missing"


def test_a_second_sync_of_the_same_backend_is_refused_while_the_lease_is_held(standin, backend):
    lease = Lease(backend)
    assert lease.acquire()
    with pytest.raises(SyncBusy):
        sync_once(backend)
    lease.release()
    sync_once(backend)


def test_an_expired_lease_is_taken_over(standin, backend):
    small_cluster(standin)
    # By hand: the lease of a worker that died holding it, which no process of this test can be.
    Backend.objects.filter(pk=backend.pk).update(
        sync_lease_owner="dead-worker", sync_lease_expires_at=timezone.now() - timezone.timedelta(seconds=1))
    stats = sync_once(backend)
    assert stats.errors == [] and stats.relists == 1 and Node.objects.count() == 3
    backend.refresh_from_db()
    # Released by its new owner: only the sync that took the lease over could clear the dead worker's name.
    assert backend.sync_lease_owner == "" and backend.sync_lease_expires_at is None
    assert backend.last_sync_at is not None and backend.sync_error == ""


def test_a_silent_backend_shows_unknown_nodes_and_offline_pools_until_the_next_good_sync(standin, backend, settings):
    small_cluster(standin)
    sync_once(backend)
    from pools.fleet.usage import pool_rows

    # By hand: the last sync an hour ago, a time no door dates back.
    Backend.objects.filter(pk=backend.pk).update(last_sync_at=timezone.now() - timezone.timedelta(hours=1))
    assert mark_stale_backends() == ["prod"]
    assert set(Node.objects.values_list("status", flat=True)) == {"Unknown"}
    assert Node.objects.get(name="gpu-a").reasons[0].startswith("Backend prod not synced since")
    default = next(row for row in pool_rows() if row["name"] == "default")
    assert default["status"] in ("ONLINE", "OFFLINE")  # default's backend is the demo one
    watch_round(backend, standin)  # a round that watched, not a list
    assert set(Node.objects.values_list("status", flat=True)) == {"Ready"}


def test_sync_watches_continuously_without_relisting_between_rounds(standin, backend):
    small_cluster(standin)
    sync_once(backend)
    standin.clear_requests()
    for _ in range(2):
        watch_round(backend, standin)
    # Each round reads the server's current resourceVersion with a list of one item (tests/faults/), no more.
    lists = [r for r in standin.requests_to("/api/v1/nodes", watch=False) if r.query.get("limit") != "1"]
    assert lists == []
    assert len(standin.requests_to("/api/v1/nodes", watch=True)) >= 2


def test_the_sync_command_without_once_keeps_watching_until_interrupted(standin, backend, monkeypatch):
    small_cluster(standin)
    from pools.management.commands import sync as sync_command

    monkeypatch.setattr(sync_command, "ROUND_SECONDS", 0.5)
    rounds = []
    original = BackendSync.run

    def counting(self, **kwargs):
        rounds.append(kwargs)
        if len(rounds) == 3:
            raise KeyboardInterrupt
        return original(self, **kwargs)

    monkeypatch.setattr(BackendSync, "run", counting)
    call_command("sync", "prod")
    # Counted, not timed: every round is bounded by ROUND_SECONDS, and the third began after two had ended.
    assert rounds == [{"seconds": 0.5}] * 3
    assert Node.objects.count() == 3


def test_a_large_first_sync_writes_the_same_rows_as_a_small_one(standin, backend):
    """Hundreds of new rows go through COPY on PostgreSQL; the rows must equal what INSERT writes."""
    standin.add_nodes([make_node(f"n{i:03}", gpus=8 if i % 2 else 0, labels={"rack": f"r{i % 7}"})
                       for i in range(520)])
    standin.add_pods([make_pod(f"p{i:03}", f"n{(2 * i + 1) % 520:03}", gpus=1, labels={"runwhere.ai/pool": "x"})
                      for i in range(600)])
    sync_once(backend)
    assert Node.objects.count() == 520 and Pod.objects.count() == 600
    pod = Pod.objects.get(name="p007")
    assert (pod.node_name, pod.gpu, pod.cpu, pod.memory, pod.pool, pod.phase) == ("n015", 1, 1000, 1024**3, "x",
                                                                                   "Running")
    node = Node.objects.get(name="n015")
    assert node.labels["rack"] == "r1" and node.pool_names == ["default"] and node.last_seen is not None
    assert "rack=r1" in node.label_text.split(", ") and node.label_text == label_text(node.labels)  # COPY wrote it
    assert (node.gpu_used, node.gpu_total) == (3, 8)  # pods 7, 267 and 527 land on n015
    assert {condition["type"] for condition in node.conditions} >= {"Ready", "DiskPressure"}
    # A second sync over the same cluster finds nothing to write.
    stats = sync_once(backend)
    assert (stats.nodes_written, stats.pods_written) == (0, 0)
