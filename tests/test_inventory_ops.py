"""gpuctl-style operations (labels, pool YAML) and the inventory read API and CLI, against the stand-in
API standin through the real client."""

import json
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from pools.models import AuditEvent, Node, Pool
from tests.support.commands import run

pytestmark = pytest.mark.django_db

SEED_003_TRAINING = """\
kind: pool
version: v0.1
pool:
  name: training-pool
  description: "Dedicated pool for training jobs"
nodes:
  node-1:              # Node hostname (matches kubectl get nodes output)
    gpu-type: A100-100G
  node-2:
    gpu-type: A100-100G
"""

SEED_003_COMPUTE = """\
kind: pool
version: v0.1
pool:
  name: compute-pool
  description: "CPU compute services (no GPU nodes)"
nodes:
  cpu-node-1:
    gpu-type: ""
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# ---- labels ----------------------------------------------------------------------------------------------

def test_label_node_writes_the_cluster_then_the_database(gpu_backend, standin):
    run("label", "node", "node-3", "runwhere.ai/gpu-type=L40S")
    assert standin.node("node-3")["metadata"]["labels"]["runwhere.ai/gpu-type"] == "L40S"
    assert Node.objects.get(name="node-3").labels["runwhere.ai/gpu-type"] == "L40S"
    assert "runwhere.ai/gpu-type  L40S" in run("get", "labels", "node-3", "--key", "runwhere.ai/gpu-type")


def test_changing_a_label_needs_overwrite_and_removing_uses_a_trailing_dash(gpu_backend, standin):
    run("label", "node", "node-3", "runwhere.ai/pool=training-pool")
    with pytest.raises(CommandError, match=r"already has runwhere\.ai/pool=training-pool; pass overwrite"):
        run("label", "node", "node-3", "runwhere.ai/pool=inference-pool")
    run("label", "node", "node-3", "runwhere.ai/pool=inference-pool", "--overwrite")
    assert Node.objects.get(name="node-3").labels["runwhere.ai/pool"] == "inference-pool"
    run("label", "node", "node-3", "runwhere.ai/pool-")
    assert "runwhere.ai/pool" not in standin.node("node-3")["metadata"]["labels"]
    assert "runwhere.ai/pool" not in Node.objects.get(name="node-3").labels


def test_unmanaged_keys_and_bad_values_are_refused_before_touching_the_cluster(gpu_backend, standin):
    standin.clear_requests()
    with pytest.raises(CommandError, match="not managed here"):
        run("label", "node", "node-3", "kubernetes.io/hostname=x")
    with pytest.raises(CommandError, match="not a valid Kubernetes label value"):
        run("label", "node", "node-3", "runwhere.ai/pool=has space")
    with pytest.raises(CommandError, match="node 'nope' is not known"):
        run("label", "node", "nope", "runwhere.ai/pool=a")
    assert standin.requests_to("/api/v1/nodes/node-3", method="PATCH") == []


def test_the_label_api_sets_removes_and_refuses_like_the_cli(gpu_backend, api):
    url = "/api/nodes/node-3/labels"
    answer = api.post(url, {"labels": {"runwhere.ai/pool": "a"}}, format="json")
    assert answer.status_code == 200 and answer.json()["labels"]["runwhere.ai/pool"] == "a"
    refused = api.post(url, {"labels": {"runwhere.ai/pool": "b"}}, format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "overwrite"
    assert api.post(url, {"labels": {"runwhere.ai/pool": "b"}, "overwrite": True}, format="json").status_code == 200
    assert api.post(url, {"labels": {"runwhere.ai/pool": None}}, format="json").json()["labels"].get(
        "runwhere.ai/pool") is None
    assert api.post(url, {"labels": {"other/key": "x"}}, format="json").status_code == 400
    assert api.post(url, {"labels": "x"}, format="json").status_code == 400
    assert api.post("/api/nodes/nope/labels", {"labels": {"runwhere.ai/a": "b"}}, format="json").status_code == 404
    # Three label writes, three audit rows (the refusals left none), each saying what changed.
    audited = list(AuditEvent.objects.filter(kind="node", action="label").order_by("id").values_list("actor",
                                                                                                    "summary"))
    assert audited == [("ops", "runwhere.ai/pool: (none) → a"), ("ops", "runwhere.ai/pool: a → b"),
                       ("ops", "runwhere.ai/pool: b → (removed)")]


def test_a_cluster_that_refuses_the_patch_answers_a_gateway_error_and_changes_nothing(gpu_backend, standin, api):
    standin.fail_next(5, status=503, path_prefix="/api/v1/nodes/node-3")
    answer = api.post("/api/nodes/node-3/labels", {"labels": {"runwhere.ai/pool": "a"}}, format="json")
    assert answer.status_code == 503 and "detail" in answer.json()
    assert "runwhere.ai/pool" not in Node.objects.get(name="node-3").labels


# ---- gpuctl pool files --------------------------------------------------------------------------------------

def test_create_f_makes_a_label_bound_pool_from_seed_003(gpu_backend, standin, tmp_path):
    output = run("create", "-f", write(tmp_path, "training-pool.yaml", SEED_003_TRAINING))
    assert "pool/training-pool created (2 nodes labeled)" in output
    pool = Pool.objects.get(name="training-pool")
    assert pool.node_selector == {"runwhere.ai/pool": "training-pool"}
    assert pool.description == "Dedicated pool for training jobs" and pool.backend.name == "gpu-cluster"
    for name in ("node-1", "node-2"):
        labels = standin.node(name)["metadata"]["labels"]
        assert labels["runwhere.ai/pool"] == "training-pool" and labels["runwhere.ai/gpu-type"] == "A100-100G"
        assert Node.objects.get(name=name).pool_names == ["training-pool"]
    assert Node.objects.get(name="node-3").pool_names == ["default"]

    listing = run("pool", "list")
    assert listing.splitlines()[0].split() == ["POOL", "NAME", "STATUS", "GPU", "TOTAL", "GPU", "USED", "GPU",
                                               "FREE", "FREE", "NOT", "READY", "NODE", "COUNT"]
    assert ["training-pool", "ONLINE", "16", "6", "10", "0", "2"] in [line.split() for line in listing.splitlines()]
    # The default pool holds nodes of every backend; it is ONLINE while those backends sync.
    assert ["default", "ONLINE", "4", "0", "4", "0", "2"] in [line.split() for line in listing.splitlines()]


def test_a_cpu_pool_with_an_empty_gpu_type_labels_only_the_pool(gpu_backend, standin, tmp_path):
    run("create", "-f", write(tmp_path, "compute.yaml", SEED_003_COMPUTE))
    labels = standin.node("cpu-node-1")["metadata"]["labels"]
    assert labels["runwhere.ai/pool"] == "compute-pool" and "runwhere.ai/gpu-type" not in labels


def test_create_refuses_unknown_nodes_and_malformed_files_without_writing(gpu_backend, standin, tmp_path):
    standin.clear_requests()
    bad = SEED_003_TRAINING.replace("node-2", "node-9")
    with pytest.raises(CommandError, match="node 'node-9' is not known"):
        run("create", "-f", write(tmp_path, "bad.yaml", bad))
    with pytest.raises(CommandError, match="kind must be 'pool'"):
        run("create", "-f", write(tmp_path, "kind.yaml", SEED_003_TRAINING.replace("kind: pool", "kind: job")))
    with pytest.raises(CommandError, match="not valid YAML at line"):
        run("create", "-f", write(tmp_path, "broken.yaml", "kind: pool\n  version: [\n"))
    assert not Pool.objects.filter(name="training-pool").exists()
    assert standin.requests_to("/api/v1/nodes/node-1", method="PATCH") == []


def test_create_refuses_to_steal_a_node_from_another_pool_without_overwrite(gpu_backend, tmp_path):
    run("create", "-f", write(tmp_path, "t.yaml", SEED_003_TRAINING))
    other = SEED_003_TRAINING.replace("training-pool", "inference-pool")
    with pytest.raises(CommandError, match="already in another pool"):
        run("create", "-f", write(tmp_path, "i.yaml", other))
    run("create", "-f", write(tmp_path, "i.yaml", other), "--overwrite")
    assert Node.objects.get(name="node-1").pool_names == ["inference-pool"]


def test_delete_pool_removes_labels_and_warns_about_running_pods(gpu_backend, standin, tmp_path):
    path = write(tmp_path, "t.yaml", SEED_003_TRAINING)
    run("create", "-f", path)
    err = StringIO()
    call_command("delete", "-f", path, stdout=StringIO(), stderr=err)
    assert "default/train" in err.getvalue()  # left running, with a warning
    assert not Pool.objects.filter(name="training-pool").exists()
    assert "runwhere.ai/pool" not in standin.node("node-1")["metadata"]["labels"]
    assert Node.objects.get(name="node-1").pool_names == ["default"]
    assert standin.pod("train")["status"]["phase"] == "Running"


def test_delete_pool_by_name_and_the_default_pool_is_protected(gpu_backend, tmp_path):
    run("create", "-f", write(tmp_path, "c.yaml", SEED_003_COMPUTE))
    run("delete", "pool", "compute-pool")
    assert not Pool.objects.filter(name="compute-pool").exists()
    with pytest.raises(CommandError, match="default pool cannot be deleted"):
        run("delete", "pool", "default")


# ---- read API and CLI ---------------------------------------------------------------------------------------

def test_the_pool_api_sums_its_nodes(gpu_backend, api, tmp_path):
    run("create", "-f", write(tmp_path, "t.yaml", SEED_003_TRAINING))
    rows = {row["name"]: row for row in api.get("/api/pools/").json()}
    training = rows["training-pool"]
    assert (training["node_count"], training["gpu_total"], training["gpu_used"], training["gpu_free"]) == (2, 16, 6, 10)
    operators = 4 * 0.01  # two 10m operator pods per node
    assert training["cpu_total"] == 256 and training["cpu_used"] == 8 + operators and training["status"] == "ONLINE"
    assert training["memory_used"] == 16 * 1024**3 + 4 * 64 * 1024**2
    assert rows["default"]["node_count"] == 2

    detail = api.get("/api/pools/training-pool/").json()
    assert [node["node"] for node in detail["nodes"]] == ["node-1", "node-2"]
    assert detail["platforms"] == []
    assert api.get("/api/pools/nope/").status_code == 404


def test_the_resources_api_filters_by_pool_and_status(gpu_backend, api, tmp_path):
    run("create", "-f", write(tmp_path, "t.yaml", SEED_003_TRAINING))
    rows = api.get("/api/resources/", {"pool": "training-pool"}).json()
    assert [row["node"] for row in rows] == ["node-1", "node-2"]
    row = rows[0]
    assert set(row) == {"node", "backend", "pools", "platforms", "resource_type", "node_type", "gpu_product",
                        "gpu_total", "gpu_used", "gpu_free", "gpu_unhealthy", "cpu_total", "cpu_used", "memory_total",
                        "memory_used", "storage_total", "status", "reasons", "schedulable", "taints", "last_seen"}
    assert (row["gpu_used"], row["cpu_used"], row["memory_total"]) == (6, 8.02, 2 * 1024**4)
    assert api.get("/api/resources/", {"status": "Not ready"}).json() == []
    assert len(api.get("/api/resources/", {"status": "Ready"}).json()) == 4

    node = api.get("/api/nodes/node-1/").json()
    assert node["labels"]["runwhere.ai/pool"] == "training-pool"
    assert {c["type"] for c in node["conditions"]} >= {"Ready", "DiskPressure"}
    assert api.get("/api/nodes/nope/").status_code == 404


def test_the_cli_json_rows_equal_the_api_rows(gpu_backend, api, tmp_path):
    run("create", "-f", write(tmp_path, "t.yaml", SEED_003_TRAINING))
    assert json.loads(run("pool", "list", "--format", "json")) == api.get("/api/pools/").json()
    assert json.loads(run("resource", "list", "--pool", "training-pool", "--format", "json")) == api.get(
        "/api/resources/", {"pool": "training-pool"}).json()
    assert json.loads(run("describe", "pool", "training-pool", "--format", "json")) == api.get(
        "/api/pools/training-pool/").json()


def test_resource_type_is_osmos_sharing_and_node_type_says_gpu_or_cpu(gpu_backend, api, tmp_path):
    run("create", "-f", write(tmp_path, "t.yaml", SEED_003_TRAINING))
    Node.objects.filter(name="node-2").update(sharing=Node.Sharing.SHARED)  # by hand: only the word is read here

    rows = {row["node"]: row for row in api.get("/api/resources/").json()}
    cli = {row["node"]: row for row in json.loads(run("resource", "list", "--format", "json"))}

    assert {name: (row["resource_type"], row["node_type"]) for name, row in rows.items()} == {
        "node-1": ("RESERVED", "GPU"), "node-2": ("SHARED", "GPU"), "node-3": ("UNUSED", "GPU"),
        "cpu-node-1": ("UNUSED", "CPU")}
    assert cli == rows
    assert api.get("/api/nodes/node-2/").json()["resource_type"] == "SHARED"


def test_resource_list_prints_osmo_columns_with_a_total_row(gpu_backend):
    lines = run("resource", "list").splitlines()
    assert lines[0].split() == ["Node", "Pool", "Platform", "Type", "Storage", "CPU", "Memory", "GPU", "Status",
                                "Reason"]
    assert {line.split()[0]: line.split()[3] for line in lines[1:-1]} == {
        "cpu-node-1": "UNUSED", "node-1": "UNUSED", "node-2": "UNUSED", "node-3": "UNUSED"}
    assert lines[-1].split()[0] == "Total" and lines[-1].split()[-1] == "6/20"
    assert {line.split()[0]: line.split()[-2:] for line in lines[1:-1]} == {
        "cpu-node-1": ["Ready", "-"], "node-1": ["Ready", "-"], "node-2": ["Ready", "-"], "node-3": ["Ready", "-"]}
    assert "describe" not in run("describe", "pool", "default")  # plain text, no traceback
    assert "node-3" in run("describe", "pool", "default")


def test_the_inventory_api_is_bounded_in_queries(gpu_backend, api, django_assert_max_num_queries, tmp_path):
    run("create", "-f", write(tmp_path, "t.yaml", SEED_003_TRAINING))
    with django_assert_max_num_queries(6):
        pools = api.get("/api/pools/")
    with django_assert_max_num_queries(6):
        resources = api.get("/api/resources/", {"pool": "training-pool"})
    # The bound counts for full answers, not for errors that stopped early.
    assert pools.status_code == 200 and sorted(row["name"] for row in pools.json()) == ["default", "training-pool"]
    assert resources.status_code == 200 and [row["node"] for row in resources.json()] == ["node-1", "node-2"]


def test_the_openapi_schema_documents_units(api):
    text = api.get("/api/schema/").content.decode()
    assert "/api/resources/" in text and "bytes" in text and "CPU in cores" in text


def test_sync_once_as_a_real_process_exits_zero_and_reports(gpu_backend, standin, tmp_path, settings):
    """`manage.py sync NAME --once` in its own process, against a throwaway SQLite database."""
    env = {"DEBUG": "1", "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3", "OSMO_DATA_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=settings.BASE_DIR)
    kubeconfig = standin.kubeconfig(tmp_path / "kc")
    subprocess.run([*manage, "backend", "add", "c1", "--kubeconfig", kubeconfig], env=env, check=True,
                   cwd=settings.BASE_DIR, capture_output=True)
    done = subprocess.run([*manage, "sync", "c1", "--once"], env=env, cwd=settings.BASE_DIR, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr
    assert "c1: 4 nodes" in done.stdout
    standin.fail_next(20, status=500)
    failed = subprocess.run([*manage, "sync", "c1", "--once"], env=env, cwd=settings.BASE_DIR, capture_output=True,
                            text=True)
    assert failed.returncode == 1 and "500" in failed.stderr
