"""KubeCluster through the real kubernetes client, over real HTTP, against the stand-in API server."""

import contextlib
import socket
import threading
import time

import pytest
import urllib3

from pools.cluster import ClusterError, Conflict, Expired, NotFound, Unavailable
from pools.cluster.kube import KubeCluster
from tests.kube_objects import make_node, make_pod
from tests.kube_standin import HANG


def take(events, count):
    """The first `count` events of a watch, closing the stream afterwards."""
    taken = []
    try:
        for event in events:
            taken.append(event)
            if len(taken) == count:
                break
    finally:
        events.close()
    return taken


def later(seconds, action):
    timer = threading.Timer(seconds, action)
    timer.start()
    return timer


# Lists


def test_it_lists_nodes_across_several_pages_with_continue_tokens(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i:02d}") for i in range(7))

    first = kube.list_nodes(limit=3)
    second = kube.list_nodes(limit=3, continue_token=first.continue_token)
    third = kube.list_nodes(limit=3, continue_token=second.continue_token)

    names = [node["metadata"]["name"] for page in (first, second, third) for node in page.items]
    assert names == [f"gpu-{i:02d}" for i in range(7)]
    assert first.continue_token and second.continue_token and third.continue_token is None
    assert first.resource_version == second.resource_version == third.resource_version == "7"
    continued = [r.query.get("continue") for r in standin.requests_to("/api/v1/nodes")]
    assert continued == [None, first.continue_token, second.continue_token]
    assert all(r.query["limit"] == "3" for r in standin.requests)


def test_it_decodes_objects_as_plain_json_dicts(standin, kube):
    standin.add_node(make_node("gpu-1", gpus=4, unhealthy_gpus=1))

    node = kube.list_nodes().items[0]

    assert type(node) is dict
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "3"
    assert node["metadata"]["resourceVersion"] == "1"


def test_it_lists_pods_of_every_namespace(standin, kube):
    standin.add_node(make_node("gpu-1"))
    standin.add_pod(make_pod("train-0", "gpu-1", namespace="team-a", gpus=8))
    standin.add_pod(make_pod("notebook", "gpu-1", namespace="team-b", gpus=1))

    page = kube.list_pods()

    assert sorted((p["metadata"]["namespace"], p["metadata"]["name"]) for p in page.items) == [
        ("team-a", "train-0"),
        ("team-b", "notebook"),
    ]
    assert page.continue_token is None
    assert page.resource_version == "3"
    assert standin.requests[-1].path == "/api/v1/pods"


def test_pages_come_from_one_snapshot_even_when_nodes_change_in_between(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(4))

    first = kube.list_nodes(limit=2)
    standin.delete_node("gpu-3")
    standin.add_node(make_node("gpu-9"))
    rest = kube.list_nodes(limit=2, continue_token=first.continue_token)

    assert [n["metadata"]["name"] for n in rest.items] == ["gpu-2", "gpu-3"]
    assert rest.resource_version == first.resource_version == "4"


def test_an_expired_continue_token_raises_expired(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(4))
    first = kube.list_nodes(limit=2)
    standin.compact()

    with pytest.raises(Expired) as caught:
        kube.list_nodes(limit=2, continue_token=first.continue_token)

    assert caught.value.status == 410
    assert "listing nodes: HTTP 410" in str(caught.value)
    assert "too old to display a consistent list" in str(caught.value)


# Errors


def test_a_server_error_raises_unavailable_naming_what_failed(standin, kube):
    standin.fail_next(status=500, message="etcdserver: request timed out")

    with pytest.raises(Unavailable) as caught:
        kube.list_nodes()

    assert str(caught.value) == "listing nodes: HTTP 500 etcdserver: request timed out"
    assert caught.value.status == 500
    assert kube.list_nodes().items == []


@pytest.mark.parametrize(
    ("status", "error"),
    [(503, Unavailable), (429, Unavailable), (404, NotFound), (409, Conflict), (403, ClusterError)],
)
def test_http_statuses_map_to_cluster_errors(standin, kube, status, error):
    standin.fail_next(status=status, path_prefix="/api/v1/pods")

    with pytest.raises(error) as caught:
        kube.list_pods()

    assert type(caught.value) is error
    assert caught.value.status == status
    assert str(caught.value).startswith(f"listing pods: HTTP {status} ")


def test_a_refused_connection_raises_unavailable(standin, kube, monkeypatch):
    standin.close()
    attempts = []
    connect = urllib3.util.connection.create_connection

    def counting(address, *args, **kwargs):
        attempts.append(address)
        return connect(address, *args, **kwargs)

    monkeypatch.setattr(urllib3.util.connection, "create_connection", counting)
    with pytest.raises(Unavailable) as caught:
        kube.list_nodes()

    # Counted, not timed: the first attempt and the three immediate connect retries (TRANSPORT_RETRIES), no more.
    assert len(attempts) == 4
    assert str(caught.value).startswith("listing nodes: ")


def test_a_list_that_never_answers_raises_unavailable_after_the_read_timeout(standin, tmp_path):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    config = tmp_path / "kubeconfig"
    standin.kubeconfig(config)
    config.write_text(config.read_text().replace(standin.url, f"http://127.0.0.1:{silent.getsockname()[1]}"))
    cluster = KubeCluster.from_kubeconfig(config, connect_timeout=0.5, read_timeout=0.3)
    try:
        with pytest.raises(Unavailable, match=r"^listing nodes: "):
            cluster.list_nodes()
        # One read retry is allowed (for stale keep-alive connections), no more. Counted, not timed: every
        # attempt is a connection waiting in the silent socket's accept queue.
        silent.setblocking(False)
        connections = []
        with contextlib.suppress(BlockingIOError):
            while True:
                connections.append(silent.accept()[0])
        for connection in connections:
            connection.close()
        assert len(connections) == 2
    finally:
        cluster.close()
        silent.close()


# Watches


def test_a_watch_delivers_added_modified_and_deleted_events(standin, kube):
    standin.add_node(make_node("gpu-1"))
    listed = kube.list_nodes()

    standin.add_node(make_node("gpu-2"))
    standin.modify_node("gpu-1", {"metadata": {"labels": {"pool": "training"}}})
    standin.delete_node("gpu-2")
    events = take(kube.watch_nodes(listed.resource_version, timeout_seconds=HANG), 3)

    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("ADDED", "gpu-2"),
        ("MODIFIED", "gpu-1"),
        ("DELETED", "gpu-2"),
    ]
    assert events[1].object["metadata"]["labels"]["pool"] == "training"
    assert [e.resource_version for e in events] == ["2", "3", "4"]
    watch = standin.requests_to("/api/v1/nodes", watch=True)[0]
    assert watch.query == {
        "watch": "true",
        "resourceVersion": "1",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": str(HANG),
    }


def test_a_watch_streams_changes_made_while_it_is_open(standin, kube):
    standin.add_node(make_node("gpu-1"))
    listed = kube.list_pods()
    events = kube.watch_pods(listed.resource_version, timeout_seconds=HANG)

    def schedule():
        standin.wait_for_watches()
        standin.add_pod(make_pod("train-0", "gpu-1", namespace="team-a", gpus=8))
        standin.modify_pod("train-0", {"status": {"phase": "Succeeded"}}, namespace="team-a")

    later(0, schedule)
    seen = take(events, 2)

    assert [(e.type, e.object["status"]["phase"]) for e in seen] == [("ADDED", "Running"), ("MODIFIED", "Succeeded")]
    assert seen[0].object["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_bookmarks_carry_the_current_resource_version(standin, kube):
    standin.add_node(make_node("gpu-1"))
    standin.add_pod(make_pod("p", "gpu-1"))
    standin.add_pod(make_pod("q", "gpu-1"))
    events = kube.watch_nodes("1", timeout_seconds=HANG)

    def bookmark():
        standin.wait_for_watches()
        standin.bookmark()

    later(0, bookmark)
    (event,) = take(events, 1)

    assert event.type == "BOOKMARK"
    assert event.resource_version == "3"
    assert event.object == {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": "3"}}


def test_a_watch_ends_when_the_server_ends_the_stream(standin, kube):
    standin.add_node(make_node("gpu-1"))

    started = time.monotonic()
    events = list(kube.watch_nodes("1", timeout_seconds=1))

    assert events == []
    # Open until the server's timeoutSeconds (a lower bound, which load cannot break), then ended by the
    # server: no error (a stream the client had to time out raises Unavailable) and no second request.
    assert time.monotonic() - started > 0.9
    assert len(standin.requests_to("/api/v1/nodes", watch=True)) == 1


def test_a_watch_from_a_compacted_resource_version_raises_expired(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(3))
    standin.compact()

    with pytest.raises(Expired) as caught:
        list(kube.watch_nodes("1", timeout_seconds=HANG))

    assert caught.value.status == 410
    assert str(caught.value) == "watching nodes: HTTP 410 too old resource version: 1 (3)"


def test_an_in_stream_410_error_event_raises_expired(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(3))
    standin.error_next_watch(410, after=1, message="too old resource version: 1 (3)")
    events = kube.watch_nodes("1", timeout_seconds=HANG)

    first = next(events)
    with pytest.raises(Expired) as caught:
        next(events)

    assert first.object["metadata"]["name"] == "gpu-1"
    assert caught.value.status == 410
    assert str(caught.value) == "watching nodes: watch error 410: Expired too old resource version: 1 (3)"


def test_other_in_stream_error_events_raise_cluster_errors(standin, kube):
    standin.error_next_watch(403, message="pods is forbidden")

    with pytest.raises(ClusterError) as caught:
        list(kube.watch_pods("0", timeout_seconds=HANG))

    assert type(caught.value) is ClusterError
    assert caught.value.status == 403
    assert "pods is forbidden" in str(caught.value)


def test_a_server_error_on_a_watch_raises_unavailable(standin, kube):
    standin.fail_next(status=503, path_prefix="/api/v1/nodes")

    with pytest.raises(Unavailable, match=r"^watching nodes: HTTP 503 "):
        list(kube.watch_nodes("1", timeout_seconds=HANG))


def test_a_stalled_watch_raises_unavailable_within_the_read_timeout(standin, tmp_path):
    standin.add_node(make_node("gpu-1"))
    standin.stall_next_watch()
    # A read timeout far from the watch's own, so that using the wrong one shows beyond any load.
    kube = KubeCluster.from_kubeconfig(standin.kubeconfig(tmp_path / "kubeconfig"), connect_timeout=30.0,
                                       read_timeout=10 * HANG, watch_margin=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable) as caught:
            list(kube.watch_nodes("1", timeout_seconds=1))
        elapsed = time.monotonic() - started

        # timeoutSeconds (1) plus the margin (0.5): silence beyond that is a dead stream, not a quiet one. The
        # lower bound is the exact check; the upper one only has to tell 1.5 s from the 600 s read timeout, so it
        # is generous (a loaded machine must not break it).
        assert 1.4 < elapsed < HANG
        assert str(caught.value).startswith("watching nodes: stream broken or stalled")
        assert kube.list_nodes().items[0]["metadata"]["name"] == "gpu-1"
    finally:
        kube.close()


def test_events_split_across_chunks_or_packed_into_one_are_decoded(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i:03d}") for i in range(150))

    events = take(kube.watch_nodes("0", timeout_seconds=HANG), 150)

    assert [e.object["metadata"]["name"] for e in events] == [f"gpu-{i:03d}" for i in range(150)]
    assert {e.type for e in events} == {"ADDED"}


# Writes


def test_it_merge_patches_labels_and_removes_those_set_to_none(standin, kube):
    standin.add_node(make_node("gpu-1", labels={"pool": "dev", "team": "vision"}))

    node = kube.patch_node_labels("gpu-1", {"pool": "training", "team": None, "osmo/managed": "true"})

    labels = node["metadata"]["labels"]
    assert labels["pool"] == "training"
    assert labels["osmo/managed"] == "true"
    assert "team" not in labels
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert standin.node("gpu-1")["metadata"]["labels"] == labels
    assert node["metadata"]["resourceVersion"] == "2"
    (event,) = take(kube.watch_nodes("1", timeout_seconds=HANG), 1)
    assert (event.type, event.object["metadata"]["labels"]) == ("MODIFIED", labels)


def test_patching_an_unknown_node_raises_not_found(standin, kube):
    with pytest.raises(NotFound) as caught:
        kube.patch_node_labels("ghost", {"pool": "training"})

    assert str(caught.value) == 'patching labels of node ghost: HTTP 404 nodes "ghost" not found'


def test_it_cordons_and_uncordons_a_node(standin, kube):
    standin.add_node(make_node("gpu-1"))

    cordoned = kube.set_unschedulable("gpu-1", True)
    uncordoned = kube.set_unschedulable("gpu-1", False)

    assert cordoned["spec"]["unschedulable"] is True
    assert "unschedulable" not in uncordoned["spec"]
    assert standin.node("gpu-1")["spec"] == uncordoned["spec"]
    patches = standin.requests_to("/api/v1/nodes/gpu-1", method="PATCH")
    assert len(patches) == 2


JOB_SPEC = {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}}}


def test_it_creates_gets_and_deletes_a_job(standin, kube):
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "wl-42", "labels": {"osmo/workload": "42"}},
        "spec": JOB_SPEC,
    }

    created = kube.create_job("team-a", body)
    fetched = kube.get_job("team-a", "wl-42")
    kube.delete_job("team-a", "wl-42")

    assert created["metadata"]["namespace"] == "team-a"
    assert created["metadata"]["uid"]
    assert fetched == created
    assert fetched["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox"
    (deletion,) = standin.job_deletions
    assert (deletion.namespace, deletion.name, deletion.propagation_policy) == ("team-a", "wl-42", "Background")
    assert standin.jobs() == []


def test_creating_a_job_twice_raises_conflict(standin, kube):
    body = {"metadata": {"name": "wl-42"}, "spec": JOB_SPEC}
    kube.create_job("team-a", body)

    with pytest.raises(Conflict) as caught:
        kube.create_job("team-a", body)

    assert caught.value.status == 409
    assert str(caught.value) == 'creating job team-a/wl-42: HTTP 409 jobs.batch "wl-42" already exists'


def test_a_missing_job_raises_not_found_on_get_and_delete(standin, kube):
    with pytest.raises(NotFound, match=r'^getting job team-a/nope: HTTP 404 jobs.batch "nope" not found$'):
        kube.get_job("team-a", "nope")
    with pytest.raises(NotFound, match=r"^deleting job team-a/nope: HTTP 404"):
        kube.delete_job("team-a", "nope", propagation_policy="Foreground")


def test_delete_sends_the_requested_propagation_policy(standin, kube):
    kube.create_job("team-a", {"metadata": {"name": "wl-1"}, "spec": JOB_SPEC})

    kube.delete_job("team-a", "wl-1", propagation_policy="Foreground")

    assert standin.job_deletions[0].propagation_policy == "Foreground"


def test_end_watches_ends_open_streams_normally(standin, kube):
    events = kube.watch_nodes("0", timeout_seconds=10 * HANG)
    later(0, lambda: (standin.wait_for_watches(), standin.end_watches()))

    started = time.monotonic()
    assert list(events) == []
    # Only end_watches can end the stream before its 600 s timeoutSeconds; nothing but time tells the two
    # apart, so the bound is a tenth of that, far above the few milliseconds it takes even on a loaded machine.
    assert time.monotonic() - started < HANG


def test_the_stand_in_can_send_bookmarks_periodically(tmp_path):
    from tests.kube_standin import KubeStandin

    with KubeStandin(bookmark_interval=0.1) as server:
        cluster = KubeCluster.from_kubeconfig(server.kubeconfig(tmp_path / "kubeconfig"))
        server.add_node(make_node("gpu-1"))
        try:
            kinds = [e.type for e in take(cluster.watch_nodes("1", timeout_seconds=HANG), 2)]
        finally:
            cluster.close()

    assert kinds == ["BOOKMARK", "BOOKMARK"]
