"""The Job of one attempt (scheduling/specs/jobs.py, pure): its name, gang shape, labels, timeouts and priority
class, accepted by the simulated cluster and the stand-in through the real client."""

import pytest

from scheduling.specs.jobs import Attempt, job_manifest, job_name, owned_by

PREFIX = "runwhere.ai/"
TEMPLATE = {"spec": {"containers": [{"name": "user", "image": "busybox", "resources": {
    "limits": {"nvidia.com/gpu": 1}}}], "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "restartPolicy": "OnFailure"}}


def attempt(**fields) -> Attempt:
    values = {"workload_id": "6a66cab3-5edd-4b38-aaad-ae34d3b034a3", "attempt": 1, "project": "vision",
              "namespace": "vision", "pool": "training", "platform": "h100", "priority": "low", "replicas": 4,
              "pod_template": TEMPLATE, "exec_timeout_seconds": 4 * 3600}
    return Attempt(**{**values, **fields})


def test_the_name_is_fixed_by_the_workload_and_the_attempt():
    assert job_name("6a66cab3-5edd-4b38-aaad-ae34d3b034a3", 1) == "wl-6a66cab35edd-1"
    assert job_name("6a66cab3-5edd-4b38-aaad-ae34d3b034a3", 2) == "wl-6a66cab35edd-2"


def test_the_job_is_one_gang_with_our_labels_timeouts_and_priority_class():
    job = job_manifest(attempt(), prefix=PREFIX, ttl_seconds=86400, priority_classes={"low": "osmo-preemptible"})
    spec = job["spec"]
    assert (spec["parallelism"], spec["completions"], spec["completionMode"]) == (4, 4, "Indexed")
    assert (spec["backoffLimit"], spec["ttlSecondsAfterFinished"], spec["activeDeadlineSeconds"]) == (0, 86400, 14400)
    pod = spec["template"]
    assert pod["spec"]["restartPolicy"] == "Never" and pod["spec"]["priorityClassName"] == "osmo-preemptible"
    assert pod["spec"]["nodeSelector"] == TEMPLATE["spec"]["nodeSelector"]
    for labels in (job["metadata"]["labels"], pod["metadata"]["labels"]):
        assert labels == {"runwhere.ai/managed-by": "osmo-pools", "runwhere.ai/workload": attempt().workload_id,
                          "runwhere.ai/project": "vision", "runwhere.ai/pool": "training",
                          "runwhere.ai/platform": "h100", "runwhere.ai/priority": "low", "runwhere.ai/attempt": "1"}
    assert TEMPLATE["spec"]["restartPolicy"] == "OnFailure"  # the stored template is not changed
    plain = job_manifest(attempt(exec_timeout_seconds=None, priority="normal"), prefix=PREFIX, ttl_seconds=60)
    assert "activeDeadlineSeconds" not in plain["spec"]
    assert "priorityClassName" not in plain["spec"]["template"]["spec"]


def test_a_job_read_back_is_ours_only_when_its_labels_name_this_workload():
    job = job_manifest(attempt(), prefix=PREFIX, ttl_seconds=60)
    assert owned_by(job, attempt().workload_id, PREFIX)
    assert not owned_by(job, "another", PREFIX)
    assert not owned_by({"metadata": {"labels": {"runwhere.ai/workload": attempt().workload_id}}},
                        attempt().workload_id, PREFIX)


@pytest.fixture
def simulated_cluster(tmp_path):
    from pools.cluster.simulated import SimulatedCluster

    return SimulatedCluster("default", tmp_path, sleep=lambda seconds: None)


def test_the_simulated_cluster_and_the_stand_in_accept_it_and_select_it_by_workload(simulated_cluster, kube):
    job = job_manifest(attempt(replicas=1), prefix=PREFIX, ttl_seconds=60)
    for cluster in (simulated_cluster, kube):
        created = cluster.create_job("vision", job)
        assert created["metadata"]["name"] == "wl-6a66cab35edd-1"
        selected = cluster.list_jobs(f"runwhere.ai/workload={attempt().workload_id}").items
        assert [j["metadata"]["name"] for j in selected] == ["wl-6a66cab35edd-1"]
