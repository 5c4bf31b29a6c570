"""Data between tasks and out of the workflow (issue 41 point 4), against a real S3-compatible server the test starts
(moto's server mode): a serial workflow through the OSMO path on the stand-in API server, whose pods carry the copy
steps in order (an init container downloading, a native sidecar uploading, the task's command wrapped to wait for
it). The stand-in runs no container, so the test runs the pods' own commands, as the pod spec has them, as processes
here (the data directory /osmo/data mapped to a temporary one): the task writes `{{output}}`, the sidecar uploads it
to the pool's data store and to the `outputs` URL, and the next task's init container downloads it, a URL and a
dataset into `{{input:N}}`, whose bytes are checked."""

import base64
import json
import os
import subprocess
import sys

import boto3
import pytest
import requests
from moto.server import ThreadedMotoServer

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from scheduling.specs import osmo_tokens
from tests.support.commands import run
from tests.support.lifecycle import job_status, observe, pod
from tests.waiting import until

pytestmark = pytest.mark.django_db

PAYLOAD = bytes(range(256)) * 64  # what task1 writes: every byte value
SERIAL = """
workflow:
  name: pass-data
  resources:
    default: {cpu: 1, gpu: 1, memory: 1Gi}
  tasks:
  - name: task1
    image: ubuntu:24.04
    command: [sh, -c]
    args: ["head -c 16384 /osmo/data/seed.bin > /osmo/data/output/result.bin && echo done > /osmo/data/output/note.txt"]
    outputs:
    - url: s3://exports/run-1
      regex: \\.bin$
  - name: task2
    image: ubuntu:24.04
    command: [sh, -c, "cat /osmo/data/input/0/result.bin > /dev/null"]
    inputs:
    - task: task1
    - url: s3://raw-data/train
    - dataset: {name: imagenet-mini}
"""


@pytest.fixture
def s3():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    requests.post(f"{endpoint}/moto-api/reset", timeout=30)  # moto's buckets live in the process: start empty
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="store-id",
                          aws_secret_access_key="store-secret")
    for bucket in ("osmo-data", "exports", "raw-data"):
        client.create_bucket(Bucket=bucket)
    client.put_object(Bucket="raw-data", Key="train/part-0.csv", Body=b"a,b\n1,2\n")
    client.put_object(Bucket="osmo-data", Key="team/datasets/imagenet-mini/labels.txt", Body=b"cat\ndog\n")
    yield endpoint, client
    requests.post(f"{endpoint}/moto-api/reset", timeout=30)
    server.stop()


@pytest.fixture
def store(world, s3, tmp_path):
    key = tmp_path / "store-key"
    key.write_text("store-secret")
    run("storage", "set", "training", "--endpoint", s3[0], "--bucket", "osmo-data", "--prefix", "team",
        "--access-key-id", "store-id", "--access-key-file", str(key))


def _env(container: dict, secret: dict, root: str) -> dict:
    """The container's environment as the kubelet makes it: its values, and its Secret keys decoded."""
    env = {}
    for item in container.get("env") or []:
        if "valueFrom" in item:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"]
            env[item["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
        else:
            env[item["name"]] = item["value"].replace(osmo_tokens.DATA_DIR, root)
    return env


def _command(container: dict, root: str) -> list[str]:
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    return [sys.executable if word == "python3" else word.replace(osmo_tokens.DATA_DIR, root) for word in words]


def _spec(standin, workload: Workload) -> tuple[dict, dict]:
    job = standin.job(workload.job_name, namespace=workload.namespace)
    secret = next(s for s in standin.core_objects("secrets")
                  if s["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"])
    return job["spec"]["template"]["spec"], secret


def _dispatched(kube, group: str) -> Workload:
    workload = Workload.objects.get(group=group)
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    return Workload.objects.select_related("pool").get(pk=workload.pk)


def _complete(standin, kube, workload: Workload) -> Workload:
    pod(standin, workload, 0, "Succeeded", exit_code=0)
    job_status(standin, workload, "Complete", "CompletionsReached")
    return observe(kube, workload)


def test_output_goes_to_the_store_and_the_outputs_url_and_arrives_at_the_next_tasks_inputs(
        standin, kube, researcher_api, store, s3, tmp_path):
    _, client = s3
    response = researcher_api.post("/api/pool/training/workflow?project=vision", {"file": SERIAL}, format="json")
    assert response.status_code == 200, response.json()
    run_cycle()
    first = _dispatched(kube, "task1-group")
    spec, secret = _spec(standin, first)
    assert [(c["name"], c.get("restartPolicy")) for c in spec["initContainers"]] == [("osmo-upload", "Always")]
    user = spec["containers"][0]
    assert user["command"][:2] == ["/bin/sh", "-c"] and user["args"] == []
    assert {"name": "osmo-data", "mountPath": "/osmo/data"} in user["volumeMounts"]
    assert "store-secret" not in json.dumps(spec)  # keys come from the Secret, never the pod spec

    # The pod, played by processes: the task (wrapped) and the upload sidecar, sharing /osmo/data.
    root = tmp_path / "pod1"
    (root / "output").mkdir(parents=True)
    (root / "seed.bin").write_bytes(PAYLOAD)
    sidecar = subprocess.Popen(_command(spec["initContainers"][0], str(root)),
                               env=_env(spec["initContainers"][0], secret, str(root)))
    try:
        task = subprocess.run(_command(user, str(root)), capture_output=True, text=True, timeout=120)
        assert task.returncode == 0, task.stderr
        assert (root / ".uploaded").read_text() == "0"
    finally:
        sidecar.terminate()  # as the kubelet stops a native sidecar once the task has ended
        sidecar.wait(timeout=60)
    exported = client.list_objects_v2(Bucket="exports", Prefix="run-1/")["Contents"]
    assert [o["Key"] for o in exported] == ["run-1/result.bin"]  # the outputs regex keeps .bin only
    assert client.get_object(Bucket="exports", Key="run-1/result.bin")["Body"].read() == PAYLOAD[:16384]

    assert _complete(standin, kube, first).status == Status.COMPLETED
    run_cycle()
    second = _dispatched(kube, "task2-group")
    spec, secret = _spec(standin, second)
    assert [(c["name"], c.get("restartPolicy")) for c in spec["initContainers"]] == [
        ("osmo-download", None), ("osmo-upload", "Always")]  # inputs before the task starts, its output after

    root = tmp_path / "pod2"
    root.mkdir()
    download = spec["initContainers"][0]
    step = subprocess.run(_command(download, str(root)), env=_env(download, secret, str(root)), capture_output=True,
                          text=True, timeout=120)
    assert step.returncode == 0, step.stderr
    assert (root / "input" / "0" / "result.bin").read_bytes() == PAYLOAD[:16384]  # {{input:0}}: task1's output
    assert (root / "input" / "0" / "note.txt").read_text() == "done\n"
    assert (root / "input" / "1" / "part-0.csv").read_bytes() == b"a,b\n1,2\n"  # {{input:1}}: the URL
    assert (root / "input" / "2" / "labels.txt").read_bytes() == b"cat\ndog\n"  # {{input:2}}: the dataset


def test_a_failed_task_uploads_nothing_and_keeps_its_exit_code(standin, kube, researcher_api, store, s3, tmp_path):
    _, client = s3
    text = SERIAL.replace('args: ["head', 'args: ["exit 7; head')
    assert researcher_api.post("/api/pool/training/workflow?project=vision", {"file": text},
                               format="json").status_code == 200
    run_cycle()
    spec, secret = _spec(standin, _dispatched(kube, "task1-group"))
    root = tmp_path / "pod"
    (root / "output").mkdir(parents=True)
    sidecar = subprocess.Popen(_command(spec["initContainers"][0], str(root)),
                               env=_env(spec["initContainers"][0], secret, str(root)))
    try:
        task = subprocess.run(_command(spec["containers"][0], str(root)), capture_output=True, timeout=120)
        assert task.returncode == 7
        until(lambda: (root / ".uploaded").exists(), "the sidecar's answer")
    finally:
        sidecar.terminate()
        sidecar.wait(timeout=60)
    assert client.list_objects_v2(Bucket="exports").get("KeyCount") == 0


def test_inputs_and_outputs_need_a_data_store_in_the_pool(researcher_api, world):
    response = researcher_api.post("/api/pool/training/workflow?project=vision", {"file": SERIAL}, format="json")
    assert response.status_code == 400
    assert "has no data store" in response.json()["detail"] and not Workload.objects.exists()


LEAD_SAVES = """
workflow:
  name: lead-saves
  resources:
    default: {cpu: 1, gpu: 1, memory: 1Gi}
  groups:
  - name: pair
    tasks:
    - name: master
      lead: true
      image: ubuntu:24.04
      command: [sh, -c, "echo weights > {{output}}/model.txt"]
      outputs:
      - url: s3://exports/model
    - name: worker
      image: ubuntu:24.04
      command: [sh, -c, "echo shard > {{output}}/shard.txt"]
"""


def test_in_a_group_each_task_uploads_its_own_outputs(standin, kube, researcher_api, store, s3, tmp_path):
    """OSMO's multi-node files give the lead the outputs and the workers none (torchrun_multinode, deepspeed,
    wandb): one Job's pods share one upload step, which uploads a task's outputs from that task's replica only."""
    _, client = s3
    answer = researcher_api.post("/api/pool/training/workflow?project=vision", {"file": LEAD_SAVES}, format="json")
    assert answer.status_code == 200, answer.json()
    workload = Workload.objects.get(group="pair")
    assert workload.request["outputs"] == [{"url": "s3://exports/model", "dataset": "", "regex": "",
                                            "replicas": [0]}]
    run_cycle()
    spec, secret = _spec(standin, _dispatched(kube, "pair"))
    upload, user = spec["initContainers"][0], spec["containers"][0]
    for index in (1, 0):  # the worker, then the lead
        root = tmp_path / f"pod{index}"
        (root / "output").mkdir(parents=True)
        replica = {"JOB_COMPLETION_INDEX": str(index)}  # as the Job controller sets it in every container
        sidecar = subprocess.Popen(_command(upload, str(root)), env={**_env(upload, secret, str(root)), **replica})
        try:
            task = subprocess.run(_command(user, str(root)), env={"PATH": os.environ["PATH"], **replica},
                                  capture_output=True, text=True, timeout=120)
            assert task.returncode == 0, task.stderr
            until(lambda root=root: (root / ".uploaded").exists(), "the sidecar's answer")
        finally:
            sidecar.terminate()
            sidecar.wait(timeout=60)
        exported = [o["Key"] for o in client.list_objects_v2(Bucket="exports").get("Contents", [])]
        assert exported == ([] if index == 1 else ["model/model.txt"]), exported  # the worker exports nothing
    stored = sorted(o["Key"] for o in client.list_objects_v2(Bucket="osmo-data", Prefix="team/researcher/")["Contents"])
    assert stored == ["team/researcher/lead-saves-1/pair/model.txt", "team/researcher/lead-saves-1/pair/shard.txt"]
