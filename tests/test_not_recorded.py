"""A cluster change that the database then fails to record is reported as such, in one line (CLI) or as a
503 whose detail says so (API). The database failure is real: when the stand-in API server receives the
PATCH, a second PostgreSQL connection locks the table the write needs, and this connection's lock_timeout
makes the write fail."""

from contextlib import contextmanager
from io import StringIO

import psycopg
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from pools.fleet.sync import BackendSync, cluster_for
from pools.models import Backend, Node, Pool
from tests.kube_objects import make_node
from tests.kube_standin import KubeStandin
from tests.support.commands import run
from tests.test_inventory_ops import SEED_003_TRAINING

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


class LockingStandin(KubeStandin):
    """Runs `on_patch` when a PATCH arrives, before it is answered."""

    on_patch = None

    def _take_fault(self, method, path, watch):
        if method == "PATCH" and self.on_patch is not None:
            self.on_patch()
        return super()._take_fault(method, path, watch)


@pytest.fixture
def standin():
    server = LockingStandin()
    yield server
    server.close()
    assert not server.server_errors, server.server_errors[0]


@pytest.fixture
def locking_backend(standin, tmp_path, defaults):
    """Backend `gpu-cluster` on the locking stand-in, with nodes node-1 to node-3, synced once."""
    standin.add_nodes([make_node("node-1", gpus=8), make_node("node-2", gpus=8), make_node("node-3", gpus=4)])
    call_command("backend", "add", "gpu-cluster", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"),
                 stdout=StringIO())
    backend = Backend.objects.get(name="gpu-cluster")
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    return backend


@contextmanager
def locked_on_patch(standin, table: str):
    """From the first PATCH on, another connection holds `table` (reads allowed, writes wait)."""
    params = connection.get_connection_params()
    other = psycopg.connect(**{key: params[key] for key in ("dbname", "user", "password", "host", "port")
                               if params.get(key) is not None})

    def lock():
        if not other.info.transaction_status:  # idle: not locked yet
            other.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")

    standin.on_patch = lock
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '300ms'")
    try:
        yield
    finally:
        standin.on_patch = None
        other.rollback()
        other.close()
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")


def test_label_node_says_the_cluster_was_changed_but_not_recorded(locking_backend, standin):
    with locked_on_patch(standin, "pools_node"), pytest.raises(CommandError) as caught:
        run("label", "node", "node-3", "runwhere.ai/gpu-type=L40S")
    message = str(caught.value)
    assert message.startswith("node/node-3: the cluster was changed but not recorded here (")
    assert message.endswith("; the next sync will pick it up") and "\n" not in message
    assert standin.node("node-3")["metadata"]["labels"]["runwhere.ai/gpu-type"] == "L40S"
    assert "runwhere.ai/gpu-type" not in Node.objects.get(name="node-3").labels
    BackendSync(locking_backend, cluster_for(locking_backend)).run(seconds=0)
    assert Node.objects.get(name="node-3").labels["runwhere.ai/gpu-type"] == "L40S"


def test_the_label_api_answers_503_saying_the_cluster_was_changed_but_not_recorded(locking_backend, standin, api):
    with locked_on_patch(standin, "pools_node"):
        answer = api.post("/api/nodes/node-3/labels", {"labels": {"runwhere.ai/pool": "a"}}, format="json")
    assert answer.status_code == 503
    assert answer.json()["detail"].startswith("node/node-3: the cluster was changed but not recorded here")
    assert standin.node("node-3")["metadata"]["labels"]["runwhere.ai/pool"] == "a"


def test_create_f_whose_pool_is_not_recorded_says_so_and_a_second_run_records_it(locking_backend, standin, tmp_path):
    path = tmp_path / "training.yaml"
    path.write_text(SEED_003_TRAINING)
    # The labels are recorded; the pool's revision is not.
    with locked_on_patch(standin, "pools_configrevision"), pytest.raises(CommandError) as caught:
        run("create", "-f", str(path))
    message = str(caught.value)
    assert message.startswith("pool/training-pool: the cluster was changed (2 nodes labeled) but the pool was not "
                              "recorded here (")
    assert message.endswith("the next sync will pick up the labels; run create -f again to record the pool")
    assert standin.node("node-1")["metadata"]["labels"]["runwhere.ai/pool"] == "training-pool"
    assert not Pool.objects.filter(name="training-pool").exists()
    assert "pool/training-pool created" in run("create", "-f", str(path))
    assert Node.objects.get(name="node-1").pool_names == ["training-pool"]


def test_create_f_whose_labels_are_not_recorded_says_so(locking_backend, standin, tmp_path):
    path = tmp_path / "training.yaml"
    path.write_text(SEED_003_TRAINING)
    with locked_on_patch(standin, "pools_node"), pytest.raises(CommandError) as caught:
        run("create", "-f", str(path))
    assert str(caught.value).startswith("pool/training-pool: the cluster was changed (2 nodes labeled) but not "
                                        "recorded here (")
    assert standin.node("node-2")["metadata"]["labels"]["runwhere.ai/pool"] == "training-pool"
    assert not Pool.objects.filter(name="training-pool").exists()


def test_delete_whose_deletion_is_not_recorded_says_so(locking_backend, standin, tmp_path):
    path = tmp_path / "training.yaml"
    path.write_text(SEED_003_TRAINING)
    run("create", "-f", str(path))
    with locked_on_patch(standin, "pools_configrevision"), pytest.raises(CommandError) as caught:
        run("delete", "-f", str(path))
    assert str(caught.value).startswith("pool/training-pool: the cluster was changed (2 nodes unlabeled) but the "
                                        "deletion was not recorded here (")
    assert "runwhere.ai/pool" not in standin.node("node-1")["metadata"]["labels"]
    assert Pool.objects.filter(name="training-pool").exists()
    assert "pool/training-pool deleted" in run("delete", "-f", str(path))
