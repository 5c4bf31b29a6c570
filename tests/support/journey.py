"""The doors a journey builds its state through (tests/usage/test_usage_journey.py, tests/test_figures_journey.py),
as a plugin of the whole suite (tests/conftest.py's pytest_plugins):
configuration through the CLI, nodes and pods through the stand-in API server and the sync, workloads through the
API, OSMO's workflow path and the form, admission and dispatch as the workers run them. The kubelet's and the Job
controller's part (pods bound and run, Jobs completed) is written to the stand-in, as they would write it.

Users are made with Django's own `create_user` (the admin's door; no CLI makes accounts)."""

import json
from datetime import datetime, timedelta

import pytest
from django.test import Client
from rest_framework.test import APIClient

from pools.fleet.sync import BackendSync
from pools.models import Backend
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.kube_objects import make_node, make_pod, operator_pods, timestamp
from tests.scheduling.conftest import seed_pool
from tests.support.commands import run

POOL = "training"
H100 = "NVIDIA-H100-80GB-HBM3"


def config(kind: str, document: dict, name: str | None = None) -> None:
    run("config", "update", kind, *([name] if name else []), "-f", "-", stdin=json.dumps(document))


@pytest.fixture
def doors(defaults, django_user_model, standin, kube, tmp_path):
    """A `training` pool of two 8-GPU H100 nodes read from the stand-in by the sync; department `research` with
    `vision` (4 GPUs deserved in training; member `researcher`) and `nlp` (none deserved; members `researcher`
    and `other`)."""
    run("backend", "add", "default", "--kubeconfig", standin.kubeconfig(tmp_path / "backend-kubeconfig"))
    config("POD_TEMPLATE", {"h100": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": H100}}}})
    config("POOL", {"pools": {POOL: {**seed_pool(), "name": POOL, "backend": "default", "default_platform": "h100",
                                     "common_pod_template": ["default_user"], "max_exec_timeout": "1d",
                                     "platforms": {"h100": {"override_pod_template": ["h100"]}}}}})
    config("ROLE", {"name": "trainers", "policies": [{"actions": [
        {"base": "http", "path": f"/api/pool/{POOL}*", "method": "*"}]}]})
    config("DEPARTMENT", {"research": {"name": "research"}})
    for name, deserved, users in (("vision", 4, ["researcher"]), ("nlp", 0, ["researcher", "other"])):
        config("PROJECT", {name: {"name": name, "department": "research", "members": {"users": users, "roles": []},
                                  "default_node_pools": [POOL],
                                  "resources": [{"node_pool": POOL, "gpu": {"deserved": deserved, "limit": 16,
                                                                            "over_quota_weight": "Medium"}}]}})
    users = {name: django_user_model.objects.create_user(name, password=f"pw-{name}-123")
             for name in ("researcher", "other")}
    for name in users:
        run("user", "add-role", name, "trainers")
    for index in range(2):
        standin.add_node(make_node(f"h100-{index:03d}", gpus=8, product=H100))
        standin.add_pods(operator_pods(f"h100-{index:03d}"))
    sync(kube)
    apis = {}
    for name, user in users.items():
        apis[name] = APIClient()
        apis[name].force_authenticate(user)
    browser = Client()
    browser.force_login(users["other"])
    return {"api": apis, "browser": browser, "standin": standin, "kube": kube}


def sync(kube) -> None:
    """One sync round of the backend, a full list (as a worker's round starts)."""
    BackendSync(Backend.objects.get(name="default"), kube).run(seconds=0)


def admit_and_dispatch(kube) -> list[Workload]:
    run_cycle()
    admitted = list(Workload.objects.filter(status=Status.ADMITTED))
    for workload in admitted:
        assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    return [Workload.objects.get(pk=workload.pk) for workload in admitted]


def kubelet_pods(standin, workload: Workload) -> list[dict]:
    """The Job controller's pods of `workload`, bound where admission placed them (one replica per placed slot),
    still ContainerCreating: the times are written by `run_pod`."""
    job = standin.job(workload.job_name, namespace=workload.namespace)
    template = job["spec"]["template"]
    nodes = [node for node, count in sorted(workload.placement.items()) for _ in range(count)]
    pods = []
    for index, node in enumerate(nodes):
        limits = template["spec"]["containers"][0]["resources"]["limits"]
        pod = make_pod(f"{workload.job_name}-{index}-x{index}", node, namespace=workload.namespace,
                       gpus=int(limits.get("nvidia.com/gpu", 0)), phase="Pending",
                       labels={**template["metadata"]["labels"], "batch.kubernetes.io/job-name": workload.job_name},
                       annotations={**template["metadata"].get("annotations", {}),
                                    "batch.kubernetes.io/job-completion-index": str(index)})
        pod["spec"]["nodeName"] = node
        pods.append(pod)
    return pods


def run_pod(standin, pod: dict, start: datetime, end: datetime | None, *, add: bool) -> None:
    """What the kubelet writes: the container running from `start`, or ended at `end` (exit 0)."""
    container = {"name": "main", "restartCount": 0, "image": "", "imageID": ""}
    if end is None:
        state, phase = {"running": {"startedAt": timestamp(start)}}, "Running"
    else:
        state, phase = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": timestamp(start),
                                       "finishedAt": timestamp(end)}}, "Succeeded"
    pod["status"] = {"phase": phase, "startTime": timestamp(start - timedelta(seconds=3)),
                     "containerStatuses": [{**container, "state": state, "ready": end is None}]}
    if add:
        standin.add_pod(pod)
    else:
        standin.modify_pod(pod["metadata"]["name"], lambda old: pod, namespace=pod["metadata"]["namespace"])


def complete_job(standin, workload: Workload, pods: int) -> None:
    def change(job):
        job["status"] = {"succeeded": pods, "conditions": [{"type": "Complete", "status": "True",
                                                            "reason": "CompletionsReached"}]}
        return job
    standin.modify_job(workload.job_name, change, namespace=workload.namespace)


def osmo_file(name: str, gpus: int) -> str:
    return (f"workflow:\n  name: {name}\n  resources:\n    default: {{cpu: 2, gpu: {gpus}, memory: 8Gi}}\n"
            f"  tasks:\n  - name: main\n    image: ubuntu:24.04\n    command: [bash, -c, 'echo hi']\n")


FORM = {"mode": "fields", "pool_1": POOL, "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": "python train.py",
        "replicas": "1", "cpu": "4", "memory": "16Gi", "priority": "low"}
