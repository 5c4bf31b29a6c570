"""GPUs only through the quota (issue 25 point 5): a user's env may not set NVIDIA_* or CUDA_VISIBLE_DEVICES,
and every container of a pod that asks for no GPU gets NVIDIA_VISIBLE_DEVICES=void, so an image's own `all`
does not expose the node's GPUs."""

import pytest

from scheduling.models import Workload
from scheduling.specs import podenv
from tests.scheduling.conftest import SHARED, body

pytestmark = pytest.mark.django_db


def containers(workload: Workload, pool: str) -> list[dict]:
    spec = workload.templates[pool]["pod_template"]["spec"]
    return [*(spec.get("initContainers") or []), *spec["containers"]]


@pytest.mark.parametrize("key", ["NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "nvidia_visible_devices",
                                 "CUDA_VISIBLE_DEVICES"])
def test_a_user_env_may_not_reach_gpus_and_the_400_names_the_key(researcher_api, key):
    response = researcher_api.post("/api/workloads/", body(env={key: "all"}, resources={"gpu": 0}), format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == f"env.{key}" and key in response.json()["detail"]
    assert not Workload.objects.exists()


def test_an_osmo_task_environment_may_not_reach_gpus(researcher_api):
    flow = ("workflow:\n  name: sneaky\n  resources:\n    default: {cpu: 1, gpu: 0, memory: 1Gi}\n  tasks:\n"
            "  - name: t\n    image: ubuntu:24.04\n    environment:\n      NVIDIA_VISIBLE_DEVICES: all\n")
    response = researcher_api.post(f"/api/pool/{SHARED}/workflow?priority=LOW", {"file": flow}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == "workflow.tasks[0].environment.NVIDIA_VISIBLE_DEVICES"


def test_a_pod_without_gpus_gets_void_in_every_container(researcher_api):
    created = researcher_api.post("/api/workloads/", body(resources={"gpu": 0, "cpu": "1", "memory": "1Gi"},
                                                          priority="low"), format="json")
    assert created.status_code == 201, created.json()
    workload = Workload.objects.get(pk=created.json()["id"])
    for container in containers(workload, "training"):
        env = [e for e in container.get("env") or [] if e["name"] == "NVIDIA_VISIBLE_DEVICES"]
        assert env == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}], container["name"]


def test_a_pod_with_gpus_is_left_to_the_device_plugin(researcher_api):
    created = researcher_api.post("/api/workloads/", body(), format="json")
    assert created.status_code == 201, created.json()
    workload = Workload.objects.get(pk=created.json()["id"])
    assert workload.gpu == 1
    for container in containers(workload, "training"):
        assert "NVIDIA_VISIBLE_DEVICES" not in {e["name"] for e in container.get("env") or []}


@pytest.mark.parametrize(("spec", "asks"), [
    ({"containers": [{"name": "u", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}, True),
    ({"containers": [{"name": "u", "resources": {"requests": {"nvidia.com/gpu": 2}}}]}, True),
    ({"initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}], "containers": [{}]}, True),
    ({"containers": [{"name": "u", "resources": {"limits": {"nvidia.com/gpu": "0"}}}]}, False),
    ({"containers": [{"name": "u", "resources": {"limits": {"nvidia.com/gpu": 0}}}]}, False),
    ({"containers": [{"name": "u"}]}, False)])
def test_void_is_set_exactly_when_no_container_asks_for_a_gpu(spec, asks):
    podenv.void_gpus(spec)
    voided = [e for c in spec["containers"] for e in c.get("env") or [] if e == {"name": "NVIDIA_VISIBLE_DEVICES",
                                                                                "value": "void"}]
    assert bool(voided) is not asks


def test_void_replaces_a_template_value_rather_than_adding_a_second_entry():
    spec = {"containers": [{"name": "sidecar", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}
    podenv.void_gpus(spec)
    assert spec["containers"][0]["env"] == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]


def test_the_job_on_the_api_server_carries_void_and_the_secret_reference(standin, kube, researcher_api):
    from scheduling.run.cycle import run_cycle
    from scheduling.run.dispatch import dispatch

    created = researcher_api.post("/api/workloads/", body(
        resources={"gpu": 0, "cpu": "1", "memory": "1Gi"}, priority="low",
        env_from_secret={"HF_TOKEN": "hf-creds/token"}), format="json")
    assert created.status_code == 201, created.json()
    run_cycle()
    assert dispatch(created.json()["id"], clusters=lambda backend: kube) == "created"

    (job,) = standin.jobs()
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in container["env"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-creds", "key": "token"}}} in container["env"]
