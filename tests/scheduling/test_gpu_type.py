"""A GPU type asked for is honoured (issue 39 point 6): gpuctl's `resources.gpu-type` (or `gpuType`) and the API's
`gpu_type` send the workload only to nodes of that type (their nvidia.com/gpu.product or its model word, or the
gpuctl pool file's `<prefix>gpu-type` label), in admission's plan and in the Job's node affinity, and a type no
node of the candidate pools has is a 400 naming the field. Against the stand-in API server through the real client:
backend added and synced with `backend add`, the pool through the configuration import, the label through
`label node`."""

import pytest
from django.core.management import CommandError

from pools.config import writes
from pools.fleet.sync import BackendSync, cluster_for
from pools.models import Backend, ConfigKind
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.kube_affinity import nodes_for
from tests.kube_objects import make_node, make_pod, operator_pods
from tests.support.commands import run

pytestmark = pytest.mark.django_db
PRODUCT = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}


@pytest.fixture
def mixed(standin, tmp_path, defaults, staff):
    """Pool `mixed` (one platform, no selector) on backend `gpu-cluster`: h100-1 (8 H100s, 2 used), a100-1 (8 A100s,
    6 used: the fullest node, where bin-packing puts one GPU), l40s-1 (4 L40S, labelled gpu-type `fast`)."""
    standin.add_nodes([make_node("h100-1", gpus=8), make_node("a100-1", gpus=8, product="NVIDIA-A100-SXM4-80GB"),
                       make_node("l40s-1", gpus=4, product="NVIDIA-L40S")])
    standin.add_pods([make_pod("other-h", "h100-1", gpus=2), make_pod("other-a", "a100-1", gpus=6),
                      *(pod for node in ("h100-1", "a100-1", "l40s-1") for pod in operator_pods(node))])
    run("backend", "add", "gpu-cluster", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    backend = Backend.objects.get(name="gpu-cluster")
    writes.import_document(ConfigKind.POOL, {"pools": {"mixed": {
        "backend": "gpu-cluster", "description": "H100, A100 and L40S nodes in one platform",
        "common_pod_template": ["default_user"], "common_default_variables": {"USER_STORAGE": "1Gi"},
        "default_platform": "any", "platforms": {"any": {}}}}},
        author="tests")
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    run("label", "node", "l40s-1", "runwhere.ai/gpu-type=fast")
    return backend


JOB = """kind: training
version: v0.1
job: {name: on-h100, priority: low}
environment: {image: nvcr.io/nvidia/pytorch:24.05-py3, command: [python, train.py]}
resources: {pool: mixed, gpu: 1, gpu-type: H100, cpu: 1, memory: 1Gi}
"""


def test_a_gpuctl_gpu_type_places_the_job_on_nodes_of_that_type_only(mixed, standin, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    assert run("create", "-f", str(path), "--as-user", "ops").startswith("job/on-h100 created")
    workload = Workload.objects.get(name="on-h100")
    assert workload.request["gpu_type"] == "H100"
    run_cycle()
    workload.refresh_from_db()
    assert workload.status == Status.ADMITTED, workload.reasons
    assert workload.placement == {"h100-1": 1}  # not the fuller a100-1
    assert dispatch(workload.pk) == "created"
    (job,) = standin.jobs()
    spec = job["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [PRODUCT],
                      "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["h100-1"]}]}]
    assert nodes_for(spec, [standin.node(name) for name in standin.node_names()]) == ["h100-1"]


def test_the_type_is_matched_by_product_model_word_or_label_in_any_case_and_required_in_the_template(mixed, api):
    for asked, requirement, allowed in (
            ("h100", PRODUCT, ["h100-1"]),
            ("NVIDIA-A100-SXM4-80GB", {**PRODUCT, "values": ["NVIDIA-A100-SXM4-80GB"]}, ["a100-1"]),
            ("FAST", {"key": "runwhere.ai/gpu-type", "operator": "In", "values": ["fast"]}, ["l40s-1"])):
        answer = api.post("/api/workloads/?dry_run=1", {
            "name": "typed", "image": "busybox", "pools": ["mixed"], "priority": "low", "gpu_type": asked,
            "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}}, format="json")
        assert answer.status_code == 200, answer.json()
        (candidate,) = answer.json()["candidates"]
        spec = candidate["pod_template"]["spec"]
        assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchExpressions": [requirement]}]}, asked
        assert list(answer.json()["admission"]["placement"]) == allowed, asked


def test_a_gpu_type_no_node_has_is_a_400_naming_the_field_at_every_door(mixed, api, standin, tmp_path):
    answer = api.post("/api/workloads/", {
        "name": "typed", "image": "busybox", "pools": ["mixed"], "priority": "low", "gpu_type": "B200",
        "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}}, format="json")
    assert answer.status_code == 400
    body = answer.json()
    assert body["field"] == "gpu_type", body
    assert "No node of platform mixed/any has GPU type B200 (gpu_type); its nodes have: A100, H100, L40S, fast" \
        in body["detail"]
    path = tmp_path / "job.yaml"
    path.write_text(JOB.replace("gpu-type: H100", "gpuType: B200"))
    with pytest.raises(CommandError, match=r"has GPU type B200 \(resources\.gpu-type\)"):
        run("create", "-f", str(path), "--as-user", "ops")
    bad = api.post("/api/workloads/", {"name": "typed", "image": "busybox", "gpu_type": "H100 80GB"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "gpu_type"
    assert not Workload.objects.exists() and standin.jobs() == []
