"""The journey against a real control plane (kube-apiserver, kube-scheduler, kube-controller-manager, etcd and the
fake kubelet of the realkube kit, REALKUBE_KIT; `make test-real`, outside CI): the product through deploy/base's
ServiceAccount (REAL_KUBECONFIG), the cluster's admin kubeconfig (REAL_ADMIN_KUBECONFIG) only to look. Collected
only when REAL_KUBECONFIG is set (tests/conftest.py's collect_ignore), never skipped.

Sync equal to the nodes the API server lists; a submission through each door (API, OSMO's workflow path, a gpuctl
job file, the CLI, the web form) to COMPLETED; a 2 x 8-GPU gang landing on the two nodes admission planned; its
logs through the API; an OSMO group with files and a credential, a notebook and an inference with its
link; KAI's Queues and Topology and Kueue's ResourceFlavor, ClusterQueues and LocalQueues written
by two engine backends sharing the cluster and accepted; a kube-apiserver killed while a Job is being dispatched
and started again, the workload still COMPLETED. Figures are printed (`-s`)."""

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.test import Client, override_settings

from pools.cluster import ClusterError
from pools.cluster.kinds import (
    CONFIG_MAP,
    DEPLOYMENT,
    INGRESS,
    KAI_QUEUE,
    KAI_TOPOLOGY,
    KUEUE_CLUSTER_QUEUE,
    KUEUE_LOCAL_QUEUE,
    KUEUE_RESOURCE_FLAVOR,
    SECRET,
    SERVICE,
    STATEFULSET,
)
from pools.cluster.kube import KubeCluster
from pools.config import writes
from pools.fleet.sync import BackendSync, cluster_for
from pools.models import Backend, ConfigKind, Node
from pools.schedulers.reconcile import run as reconcile
from scheduling.models import Status, Workload
from scheduling.run import follow
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from scheduling.run.stopping import stop
from tests import waiting
from tests.support.commands import run

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
KUBECONFIG = os.environ.get("REAL_KUBECONFIG", "")
REALKUBE_DIR = Path(os.environ.get("REALKUBE_DIR") or Path.home() / ".realkube")
ADMIN = os.environ.get("REAL_ADMIN_KUBECONFIG") or str(REALKUBE_DIR / "kubeconfigs" / "admin.kubeconfig")
# The kit's scripts (start.sh starts kube-apiserver again after the restart step): named by the environment, since
# nothing outside the repository is read by default.
KIT = Path(os.environ.get("REALKUBE_KIT") or "realkube-kit-not-set")
assert (KIT / "start.sh").exists(), "set REALKUBE_KIT to the realkube kit (docs/development/real-cluster.md)"
H100 = "NVIDIA-H100-80GB-HBM3"
CEILING = 120  # seconds a journey step may take: only against a hang (the fake kubelet runs pods in seconds)
ENDED = {Status.COMPLETED, Status.FAILED, Status.FAILED_BACKEND_ERROR, Status.FAILED_CANCELED}


def log(text: str) -> None:
    print(f"[real] {text}", flush=True)


def pool(backend: str, **fields) -> dict:
    return {"backend": backend, "description": "real control plane", "common_pod_template": ["default_user"],
            "common_resource_validations": [], "common_default_variables": {"USER_STORAGE": "1Gi"},
            "default_platform": "h100", "platforms": {"h100": {"override_pod_template": ["real_h100"]}}, **fields}


@pytest.fixture
def real(defaults, staff):
    assert KUBECONFIG and Path(KUBECONFIG).is_file(), "REAL_KUBECONFIG names no file"
    gpu_operator()
    run("backend", "add", "real", "--kubeconfig", KUBECONFIG)
    writes.import_document(ConfigKind.POD_TEMPLATE, {"real_h100": {"spec": {"nodeSelector": {
        "nvidia.com/gpu.product": H100}}}}, author="journey")
    writes.import_document(ConfigKind.POOL, {"pools": {"real": pool("real")}}, author="journey")
    writes.import_document(ConfigKind.DEPARTMENT, {"research": {"name": "research"}}, author="journey")
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["ops"]}, "default_node_pools": ["real"],
        "resources": [{"node_pool": "real", "gpu": {"deserved": 32}}]}}, author="journey")
    backend = Backend.objects.get(name="real")
    sync(backend)
    return backend


def kubectl(*args: str, stdin: str = "") -> str:
    return subprocess.run([str(REALKUBE_DIR / "bin" / "kubectl"), "--kubeconfig", ADMIN, *args], input=stdin,
                          capture_output=True, text=True, check=True, timeout=60).stdout


def gpu_operator() -> None:
    """What the GPU operator runs on every GPU node and a node's status looks for (the container toolkit and the
    DCGM exporter): bare pods, which the fake kubelet keeps Running. The kit has no operator of its own."""
    nodes = json.loads(kubectl("get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "json"))["items"]
    pods = [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{app}-{node['metadata']['name']}", "namespace": "gpu-operator",
                          "labels": {"app": app}},
             "spec": {"nodeName": node["metadata"]["name"], "containers": [{"name": "main", "image": "busybox"}],
                      "tolerations": [{"operator": "Exists"}]}}
            for node in nodes for app in ("nvidia-container-toolkit-daemonset", "nvidia-dcgm-exporter")]
    kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operator"}}, *pods]}))


def sync(backend: Backend) -> None:
    BackendSync(backend, cluster_for(backend)).run(seconds=0)


def drive(backend: Backend, ids: list[str], *, until: set[str] = ENDED) -> dict[str, str]:
    """What the workers and beat would do, round after round (one a second: the real kubelet's pace), until every
    workload of `ids` is in `until`."""
    def round_done() -> dict[str, str] | None:
        run_cycle()
        for pk in Workload.objects.filter(pk__in=ids, status=Status.ADMITTED).values_list("pk", flat=True):
            dispatch(pk)
        for pk in ids:
            stop(pk)  # a cancel asked for ("skipped" when none is)
        sync(backend)
        follow.observe()
        statuses = dict(Workload.objects.filter(pk__in=ids).values_list("name", "status"))
        return statuses if all(status in until for status in statuses.values()) else None

    return waiting.until(round_done, f"{ids} to reach {sorted(until)}", seconds=CEILING, every=1, detail=lambda: list(
        Workload.objects.filter(pk__in=ids).exclude(status__in=until).values_list("name", "status", "reasons")))


def body(name: str, **fields) -> dict:
    return {"name": name, "project": "vision", "pools": ["real"], "image": "busybox",
            "command": ["echo", f"hello from {name}"], "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"},
            **fields}


def test_the_journey_on_a_real_control_plane(real, api, staff, tmp_path):
    admin = KubeCluster.from_kubeconfig(ADMIN)
    assert api.patch("/api/profile/", {"default_project": "vision"}, format="json").status_code == 200
    started = time.monotonic()

    # 1. Sync: one row per node the API server lists, with its allocatable GPUs.
    listed = {item["metadata"]["name"]: item for item in admin.list_nodes(limit=500).items}
    rows = {node.name: node for node in Node.objects.filter(backend=real)}
    assert set(rows) == set(listed)
    for name, item in listed.items():
        assert rows[name].gpu_allocatable == int(item["status"]["allocatable"].get("nvidia.com/gpu", 0)), name
    log(f"sync: {len(rows)} nodes, {sum(r.gpu_allocatable for r in rows.values())} GPUs allocatable; "
        f"{sorted((r.name, r.status, r.platform_names) for r in rows.values())}")

    # 2. A submission through each door, each to COMPLETED.
    ids = [api.post("/api/workloads/", body("door-api"), format="json").json()["id"]]
    answer = api.post("/api/pool/real/workflow", {"file": (
        "workflow:\n  name: door-osmo\n  project: vision\n  resources:\n"
        "    default: {cpu: 1, gpu: 1, memory: 1Gi, storage: 1Gi}\n"
        "  tasks:\n  - name: hello\n    image: busybox\n    command: [echo, hello from osmo]\n")}, format="json")
    assert answer.status_code == 200, answer.json()
    ids += [str(pk) for pk in Workload.objects.filter(workflow=answer.json()["name"]).values_list("pk", flat=True)]
    job = tmp_path / "job.yaml"
    job.write_text("kind: training\nversion: v0.1\njob: {name: door-gpuctl}\nenvironment: {image: busybox, "
                   "command: [echo, hello from gpuctl]}\nresources: {pool: real, gpu: 1, gpu-type: H100, cpu: 1, "
                   "memory: 1Gi}\n")
    run("create", "-f", str(job), "--as-user", "ops")
    request = tmp_path / "request.yaml"
    request.write_text("name: door-cli\nproject: vision\npools: [real]\nimage: busybox\ncommand: [echo, hello]\n"
                       "resources: {gpu: 1, cpu: '1', memory: 1Gi}\n")
    run("workload", "submit", "-f", str(request), "--as-user", "ops")
    browser = Client()
    browser.force_login(staff)
    page = browser.post("/workloads/new/", {"mode": "fields", "project": "vision", "pool_1": "real",
                                            "name": "door-web", "image": "busybox", "command": "echo hello",
                                            "replicas": "1", "gpu": "1", "cpu": "1", "memory": "1Gi",
                                            "priority": "normal"})
    assert page.status_code in (200, 302), page.content[:2000]
    ids += [str(pk) for pk in Workload.objects.filter(name__in=["door-gpuctl", "door-cli", "door-web"])
            .values_list("pk", flat=True)]
    assert len(ids) == 5, list(Workload.objects.values_list("name", flat=True))
    begun = time.monotonic()
    statuses = drive(real, ids)
    assert set(statuses.values()) == {Status.COMPLETED}, statuses
    log(f"doors: {sorted(statuses)} COMPLETED in {time.monotonic() - begun:.1f} s")
    gpuctl = Workload.objects.get(name="door-gpuctl")
    assert {pod.get("node") for pod in gpuctl_pods(gpuctl)} <= {n for n, r in rows.items() if r.gpu_product == H100}

    # 3. A 2 x 8-GPU gang over two nodes lands on the nodes admission planned; its logs through the API.
    gang = api.post("/api/workloads/", body("gang", replicas=2, command=["echo", "gang says hi"],
                                            resources={"gpu": 8, "cpu": "1", "memory": "1Gi"}),
                    format="json").json()["id"]
    run_cycle()
    planned = Workload.objects.get(pk=gang).placement
    assert len(planned) == 2 and set(planned.values()) == {1}, planned
    begun = time.monotonic()
    assert drive(real, [gang]) == {"gang": Status.COMPLETED}
    landed = {pod.get("node") for pod in gpuctl_pods(Workload.objects.get(pk=gang))}
    assert landed == set(planned), (landed, planned)
    log(f"gang: planned {sorted(planned)}, landed {sorted(landed)}, COMPLETED in {time.monotonic() - begun:.1f} s")
    logs = api.get(f"/api/workloads/{gang}/logs/")
    assert logs.status_code == 200 and "gang says hi" in logs.content.decode(), logs.content[:2000]

    # 4. The objects of OSMO's groups and of the long-running kinds, accepted by the API server: a group of differing
    # tasks with files and a credential (one indexed Job whose lead decides its end, its headless Service, its
    # files' ConfigMap and its Secret), a notebook (a StatefulSet and its headless Service) and an inference with a
    # link (a Deployment, its Service and an Ingress).
    assert api.post("/api/credentials/registry-token", {"generic_credential": {"credential": {"token": "t0k"}}},
                    format="json").status_code in (200, 201)
    task = ("    - name: {name}\n{lead}      image: busybox\n      command: [sh, /tmp/{name}.sh]\n"
            "      files:\n      - path: /tmp/{name}.sh\n        contents: 'echo {name} reaches {{{{host:master}}}}'\n"
            "      credentials:\n        registry-token:\n          TOKEN: token\n")
    group = api.post("/api/pool/real/workflow", {"file": (
        "workflow:\n  name: real-group\n  project: vision\n  resources:\n"
        "    default: {cpu: 1, gpu: 1, memory: 1Gi, storage: 1Gi}\n  groups:\n  - name: pair\n    tasks:\n"
        + task.format(name="master", lead="      lead: true\n") + task.format(name="worker", lead=""))},
        format="json")
    assert group.status_code == 200, group.json()
    pair = Workload.objects.get(workflow=group.json()["name"])
    notebook = api.post("/api/workloads/", body("explore", kind="notebook"), format="json").json()["id"]
    serving = api.post("/api/workloads/", body("serve", kind="inference", replicas=2), format="json").json()["id"]
    with override_settings(OSMO_LINK_TEMPLATES={"pool/real": {"host": "{name}-{id}.nb.example.org"}}):
        assert drive(real, [str(pair.pk)]) == {"pair": Status.COMPLETED}
        running = drive(real, [notebook, serving], until={Status.RUNNING})
    assert set(running.values()) == {Status.RUNNING}, running
    pair.refresh_from_db()
    on_server = {kind.kind: {item["metadata"]["name"]: item for item in admin.list_objects(
        kind, namespace=pair.namespace, limit=500).items} for kind in (SERVICE, CONFIG_MAP, SECRET, STATEFULSET,
                                                                       DEPLOYMENT, INGRESS)}
    for kind, name in (("Service", pair.job_name), ("ConfigMap", pair.job_name), ("Secret", f"{pair.job_name}-data")):
        owners = on_server[kind][name]["metadata"]["ownerReferences"]
        assert [(o["kind"], o["name"]) for o in owners] == [("Job", pair.job_name)], (kind, owners)
    assert on_server["Service"][pair.job_name]["spec"]["clusterIP"] == "None"
    assert "t0k" not in json.dumps(admin.get_job(pair.namespace, pair.job_name))  # the value only in the Secret
    explore, serve = Workload.objects.get(pk=notebook), Workload.objects.get(pk=serving)
    assert explore.job_name in on_server["StatefulSet"] and serve.job_name in on_server["Deployment"], on_server
    assert {i["spec"]["rules"][0]["host"] for i in on_server["Ingress"].values()} >= {
        f"serve-{serving[:8]}.nb.example.org"}, on_server["Ingress"]
    log(f"osmo group and kinds: {sorted((k, sorted(v)) for k, v in on_server.items())}")
    for pk in (notebook, serving):
        assert api.post(f"/api/workloads/{pk}/cancel/").status_code in (200, 202)
    assert set(drive(real, [notebook, serving]).values()) == {Status.FAILED_CANCELED}

    # 5. Both engines' objects, written by engine backends sharing the cluster, accepted by the API server.
    run("backend", "add", "kai", "--kubeconfig", KUBECONFIG, "--scheduler", "kai", "--same-cluster-as", "real")
    run("backend", "add", "kq", "--kubeconfig", KUBECONFIG, "--scheduler", "kueue", "--same-cluster-as", "real")
    writes.import_document(ConfigKind.POOL, {"pools": {
        "kai-pool": pool("kai", topology_keys=[{"key": "zone", "label": "topology.kubernetes.io/zone"},
                                               {"key": "rack", "label": "example.com/rack"}]),
        "kueue-pool": pool("kq")}}, author="journey")
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["ops"]}, "default_node_pools": ["real"],
        "resources": [{"node_pool": name, "gpu": {"deserved": 8}} for name in ("real", "kai-pool", "kueue-pool")]}},
        author="journey")
    for name in ("kai", "kq"):
        backend = Backend.objects.get(name=name)
        results = [reconcile(backend, cluster_for(backend)) for _ in range(3)]
        assert all(result is not None and result.refused == [] for result in results), [
            r.refused if r else Backend.objects.get(pk=backend.pk).engine_error for r in results]
        assert results[-1].writes == 0, results[-1].summary()  # stable
        log(f"{name}: {results[0].summary()}")
    for kind in (KAI_QUEUE, KAI_TOPOLOGY, KUEUE_RESOURCE_FLAVOR, KUEUE_CLUSTER_QUEUE, KUEUE_LOCAL_QUEUE):
        found = admin.list_objects(kind, limit=500).items
        assert found, f"no {kind.kind} on the server"
        log(f"{kind.kind}: {sorted(item['metadata']['name'] for item in found)[:6]}")
    sync(real)
    assert Node.objects.count() == len(listed)  # three backends, one row per node

    # 6. kube-apiserver killed while a Job is being dispatched, then started again: the workload completes.
    restart = api.post("/api/workloads/", body("across-restart"), format="json").json()["id"]
    run_cycle()
    assert Workload.objects.get(pk=restart).status == Status.ADMITTED
    pid = int((REALKUBE_DIR / "run" / "kube-apiserver.pid").read_text().split()[0])
    os.kill(pid, 9)
    killed = time.monotonic()
    outcome: list = []

    dispatch_begun = threading.Event()

    def dispatching() -> None:
        from django.db import connection
        dispatch_begun.set()
        try:
            outcome.append(dispatch(restart))
        except ClusterError as exc:  # the tries ran out: the sweep sends it again
            outcome.append(exc)
        finally:
            connection.close()

    worker = threading.Thread(target=dispatching)
    worker.start()
    assert dispatch_begun.wait(CEILING), "the dispatch did not begin"  # begun while the server is down
    subprocess.run([str(KIT / "start.sh")], check=True, env={**os.environ, "REALKUBE_DIR": str(REALKUBE_DIR)},
                   stdout=subprocess.DEVNULL, timeout=CEILING)
    log(f"restart: kube-apiserver answering again {time.monotonic() - killed:.1f} s after it was killed")
    worker.join(CEILING)
    log(f"restart: dispatch during the outage answered {outcome}")
    events = list(Workload.objects.get(pk=restart).events.values_list("reason", "message"))
    assert drive(real, [restart]) == {"across-restart": Status.COMPLETED}, events
    log(f"restart: events {list(Workload.objects.get(pk=restart).events.values_list('reason', 'message'))}")
    log(f"journey: {time.monotonic() - started:.1f} s")
    admin.close()


def gpuctl_pods(workload: Workload) -> list[dict]:
    """The pods of the workload's Job as the sync keeps them (node, phase)."""
    from pools.models import ManagedJob

    row = ManagedJob.objects.filter(workload=str(workload.pk), name=workload.job_name).first()
    return list((row.pods or {}).values()) if row else []
