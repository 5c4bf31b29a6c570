"""Pod logs through the Cluster interface: the real client against the stand-in API server (the pods/log
subresource's parameters, its 400s and 404s, a followed log streaming lines as they are appended, a follow window
that ends quietly), and the simulated cluster's plausible training output, followed on an injected clock."""

import threading

import pytest

from pools.cluster import ClusterError, LogQuery, NotFound
from tests.cluster.test_simulated import job_body, pods_of
from tests.waiting import until


def add_pod(standin, name="train-0", containers=("user",), phase="Running", namespace="team"):
    standin.add_pod({"metadata": {"name": name, "namespace": namespace},
                     "spec": {"nodeName": "gpu-1", "containers": [{"name": c, "image": "x"} for c in containers]},
                     "status": {"phase": phase, "containerStatuses": [
                         {"name": c, "state": {"running": {}}} for c in containers]}})


def test_a_log_is_read_whole_by_tail_since_and_limit_with_timestamps(standin, kube):
    add_pod(standin)
    standin.append_log("train-0", "epoch 1", namespace="team", at=1_800_000_000.25)
    standin.append_log("train-0", "epoch 2", "epoch 3", namespace="team", at=1_800_000_005.5)
    assert kube.read_pod_log("team", "train-0") == b"epoch 1\nepoch 2\nepoch 3\n"
    assert kube.read_pod_log("team", "train-0", LogQuery(tail_lines=1)) == b"epoch 3\n"
    assert kube.read_pod_log("team", "train-0", LogQuery(since_time="2027-01-15T08:00:05Z")) == \
        b"epoch 2\nepoch 3\n"
    assert kube.read_pod_log("team", "train-0", LogQuery(limit_bytes=4)) == b"epoc"
    stamped = kube.read_pod_log("team", "train-0", LogQuery(timestamps=True, tail_lines=1))
    assert stamped == b"2027-01-15T08:00:05.500000000Z epoch 3\n"
    (request,) = standin.requests_to("/api/v1/namespaces/team/pods/train-0/log")[-1:]
    assert request.query == {"timestamps": "true", "tailLines": "1"}


def test_unknown_pods_and_containers_are_refused_as_a_real_server_refuses_them(standin, kube):
    add_pod(standin, containers=("user", "sidecar"))
    with pytest.raises(NotFound, match='pods "nope" not found'):
        kube.read_pod_log("team", "nope")
    with pytest.raises(ClusterError, match="container gpu is not valid for pod train-0") as refused:
        kube.read_pod_log("team", "train-0", LogQuery(container="gpu"))
    assert refused.value.status == 400
    with pytest.raises(ClusterError, match=r"a container name must be specified for pod train-0, choose one of: "
                                           r"\[user sidecar\]"):
        kube.read_pod_log("team", "train-0")
    with pytest.raises(ClusterError, match='previous terminated container "user" in pod "train-0" not found'):
        kube.read_pod_log("team", "train-0", LogQuery(container="user", previous=True))
    standin.append_log("train-0", "first life", namespace="team", container="user")
    standin.restart_container("train-0", namespace="team", container="user")
    standin.append_log("train-0", "second life", namespace="team", container="user")
    assert kube.read_pod_log("team", "train-0", LogQuery(container="user", previous=True)) == b"first life\n"
    assert kube.read_pod_log("team", "train-0", LogQuery(container="user")) == b"second life\n"


def test_a_waiting_container_has_no_log_yet(standin, kube):
    standin.add_pod({"metadata": {"name": "p", "namespace": "team"}, "spec": {"containers": [{"name": "user"}]},
                     "status": {"phase": "Pending", "containerStatuses": [
                         {"name": "user", "state": {"waiting": {"reason": "ContainerCreating"}}}]}})
    with pytest.raises(ClusterError, match='container "user" in pod "p" is waiting to start: ContainerCreating'):
        kube.read_pod_log("team", "p")


def test_a_followed_log_streams_lines_as_they_are_appended_and_ends_with_the_container(standin, kube):
    add_pod(standin)
    standin.append_log("train-0", "before", namespace="team")
    received, done = [], threading.Event()

    def follow():
        for chunk in kube.follow_pod_log("team", "train-0", timeout_seconds=60):
            received.append(chunk)
        done.set()

    threading.Thread(target=follow, daemon=True).start()
    until(lambda: received, "the first chunk")
    assert received == [b"before\n"]
    standin.append_log("train-0", "after 1", namespace="team")
    until(lambda: len(received) == 2, "the appended line")
    standin.append_log("train-0", "after 2", "after 3", namespace="team")
    until(lambda: b"".join(received).endswith(b"after 3\n"), "the next lines")
    assert not done.is_set()
    standin.end_log("train-0", namespace="team")
    until(done.is_set, "the stream to end with the container")
    assert b"".join(received) == b"before\nafter 1\nafter 2\nafter 3\n"


def test_a_follow_window_ends_quietly_when_its_time_is_up(standin, kube):
    add_pod(standin)
    standin.append_log("train-0", "only line", namespace="team")
    chunks = list(kube.follow_pod_log("team", "train-0", timeout_seconds=0.3))
    assert chunks == [b"only line\n"]  # no error: the caller resumes with sinceTime
    until(lambda: standin.open_log_follows == 0, "the stand-in to see the client go")


def test_the_simulated_cluster_writes_training_lines_and_follows_them(cluster, clock):
    body = job_body("finetune", **{"sim.runwhere.ai/duration-seconds": "120"})
    cluster.create_job("team", body)
    (pod,) = [p for p in pods_of(cluster) if p["metadata"]["labels"].get("job-name") == "finetune"]
    name = pod["metadata"]["name"]
    with pytest.raises(ClusterError, match="is waiting to start"):
        cluster.read_pod_log("team", name)
    with pytest.raises(ClusterError, match="container gpu is not valid"):
        cluster.read_pod_log("team", name, LogQuery(container="gpu"))
    with pytest.raises(NotFound):
        cluster.read_pod_log("team", "no-such-pod")
    clock.advance(30)
    text = cluster.read_pod_log("team", name).decode()
    assert text.startswith("[main] starting on ") and "loss" in text
    assert cluster.read_pod_log("team", name, LogQuery(tail_lines=1)).decode().count("\n") == 1
    before = text.count("\n")

    def sleep(seconds):
        clock.advance(seconds)

    cluster._sleep = sleep
    followed = b"".join(cluster.follow_pod_log("team", name, timeout_seconds=20)).decode()
    assert followed.startswith(text) and followed.count("\n") > before
