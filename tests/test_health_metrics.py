"""/healthz, /readyz and /metrics (osmo_site.health, scheduling.run.metrics)."""

import contextlib
import datetime as dt
import math
import socket

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from pools.fleet import usage
from pools.models import Backend, Node, Pool, Project
from scheduling.models import AdmissionState, Status, Workload
from tests.scheduling.conftest import (
    SHARED,
    add_nodes,
)
from tests.support.ports import free_port

TOKEN = "scrape-token-for-tests"
FAMILIES = {
    "osmo_backend_sync_age_seconds", "osmo_backend_sync_error", "osmo_nodes", "osmo_pool_nodes",
    "osmo_pool_gpu_capacity", "osmo_pool_gpu_used", "osmo_pool_gpu_free", "osmo_pool_workloads",
    "osmo_admission_last_cycle_duration_seconds", "osmo_admission_last_cycle_age_seconds",
    "osmo_dispatch_errors_last_hour", "osmo_backend_engine_refused_objects",
}


# ---- /healthz --------------------------------------------------------------------------------------------------

def test_healthz_answers_without_the_database(client):
    """No django_db mark: any query would fail the test."""
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert client.post("/healthz").status_code == 405


# ---- /readyz ---------------------------------------------------------------------------------------------------

@pytest.fixture
def sqlite_broker(settings, tmp_path):
    """The demo's broker (osmo_site/sqlite_broker.py) on a file of this test's."""
    settings.CELERY_BROKER_URL = f"sqlite:///{tmp_path / 'broker.sqlite3'}"
    return tmp_path


@pytest.mark.django_db
def test_readyz_answers_when_the_database_and_the_sqlite_broker_do(client, sqlite_broker):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok"}}


@pytest.mark.redis
@pytest.mark.django_db
def test_readyz_answers_when_the_database_and_redis_do(client, settings):
    settings.CELERY_BROKER_URL = settings.TEST_REDIS_URL
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["checks"] == {"database": "ok", "broker": "ok"}


@pytest.mark.django_db
def test_readyz_names_the_broker_when_nothing_listens(client, settings):
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.OSMO_READY_TIMEOUT = 1
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "failed": ["broker"],
                               "checks": {"database": "ok", "broker": "failed"}}


@pytest.mark.django_db
def test_readyz_names_the_broker_when_it_does_not_answer_after_one_attempt(client, settings):
    """A broker that accepts connections and never answers: the check gives up after its timeout, having
    connected once (the kernel accepts each connection into the listener's queue, counted after the answer)."""
    with socket.create_server(("127.0.0.1", 0), backlog=16) as listener:
        settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{listener.getsockname()[1]}/0"
        settings.OSMO_READY_TIMEOUT = 1
        response = client.get("/readyz")
        listener.setblocking(False)
        accepted = []
        with contextlib.suppress(BlockingIOError):
            while True:
                accepted.append(listener.accept()[0])
        for peer in accepted:
            peer.close()
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "failed": ["broker"],
                               "checks": {"database": "ok", "broker": "failed"}}
    assert len(accepted) == 1  # one attempt, no retries


@pytest.mark.django_db
def test_readyz_names_the_sqlite_broker_when_its_file_cannot_be_opened(client, sqlite_broker, settings):
    settings.CELERY_BROKER_URL = f"sqlite:///{sqlite_broker / 'gone' / 'broker.sqlite3'}"
    response = client.get("/readyz")
    assert response.status_code == 503 and response.json()["failed"] == ["broker"]


@pytest.mark.django_db
def test_readyz_names_the_database_when_it_does_not_answer(client, sqlite_broker, monkeypatch, tmp_path):
    """A real failure: the check connects afresh, here to a port nothing listens on (PostgreSQL) or to a file in
    a folder that does not exist (SQLite)."""
    if connection.vendor == "postgresql":
        monkeypatch.setitem(connection.settings_dict, "HOST", "127.0.0.1")
        monkeypatch.setitem(connection.settings_dict, "PORT", str(free_port()))
    else:
        monkeypatch.setitem(connection.settings_dict, "NAME", str(tmp_path / "missing" / "osmo.sqlite3"))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "failed": ["database"],
                               "checks": {"database": "failed", "broker": "ok"}}
    monkeypatch.undo()
    assert client.get("/readyz").status_code == 200  # the check's own connection; the site's is untouched


# ---- /metrics: who may read them -------------------------------------------------------------------------------

@pytest.mark.django_db
def test_metrics_are_off_until_a_token_or_addresses_are_configured(client, settings):
    settings.OSMO_METRICS_TOKEN = ""
    settings.OSMO_METRICS_ALLOWED_ADDRESSES = []
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 404


@pytest.mark.django_db
def test_metrics_need_the_token(client, settings):
    settings.OSMO_METRICS_TOKEN = TOKEN
    settings.OSMO_METRICS_ALLOWED_ADDRESSES = []
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong-token").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Basic {TOKEN}").status_code == 403
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    assert client.post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 405


@pytest.mark.django_db
def test_metrics_from_an_allowed_address(client, settings):
    settings.OSMO_METRICS_TOKEN = ""
    settings.OSMO_METRICS_ALLOWED_ADDRESSES = ["10.0.0.0/8", "192.0.2.7"]
    assert client.get("/metrics").status_code == 403  # the test client's 127.0.0.1
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.8").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="192.0.2.7").status_code == 200
    settings.OSMO_METRICS_TOKEN = TOKEN  # either one lets a scrape through
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong-token").status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer wrong").status_code == 200


# ---- /metrics: what they say -----------------------------------------------------------------------------------

def scrape(client) -> dict:
    """{family: {frozenset of labels: value}}."""
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    return {family.name: {frozenset(sample.labels.items()): sample.value for sample in family.samples}
            for family in text_string_to_metric_families(response.content.decode())}


def workload(status: str, pools: list[str], *, pool: str | None = None, finished_ago: dt.timedelta | None = None,
             project: str = "vision") -> Workload:
    # By hand: a workload in `status`, finished `finished_ago`, which no door dates back.
    now = timezone.now()
    return Workload.objects.create(
        name="metrics-probe", project=Project.objects.get(name=project), request={"name": "metrics-probe"},
        pools=pools, gpu=1, templates={name: {"platform": "", "pod_template": {}} for name in pools}, status=status,
        pool=Pool.objects.get(name=pool) if pool else None, submitted_at=now - dt.timedelta(hours=3),
        finished_at=now - finished_ago if finished_ago else None)


@pytest.fixture
def metrics_rows(world, settings):
    settings.OSMO_METRICS_TOKEN = TOKEN
    # By hand, as the figures' sources left them: a sync's error, a world node (an add_nodes row, no cluster) gone
    # not ready, and the admission cycle's last run 30 s ago.
    Backend.objects.create(name="broken", sync_error="connection refused")
    Node.objects.filter(name="training-h100-000").update(status="Not ready (Disk pressure)", gpu_used=3, gpu_free=5)
    for _ in range(2):
        workload(Status.PENDING, ["training", SHARED])
    workload(Status.PENDING, ["training"], project="nlp")
    workload(Status.ADMITTED, ["training"], pool="training")
    workload(Status.RUNNING, ["training", SHARED], pool=SHARED)
    workload(Status.FAILED_BACKEND_ERROR, ["training"], pool="training", finished_ago=dt.timedelta(minutes=10))
    workload(Status.FAILED_BACKEND_ERROR, ["training"], pool="training", finished_ago=dt.timedelta(hours=2))
    workload(Status.COMPLETED, ["training"], pool="training", finished_ago=dt.timedelta(minutes=5))
    AdmissionState.objects.create(pk=1, last_cycle_at=timezone.now() - dt.timedelta(seconds=30),
                                  last_cycle={"considered": 3, "admitted": 1, "seconds": 0.25})


def labels(**values) -> frozenset:
    return frozenset(values.items())


def test_metrics_show_every_family_with_the_rows_values(client, metrics_rows):
    metrics = scrape(client)
    assert metrics.keys() >= FAMILIES

    # Backends: the world's syncs now; "broken" never synced and fails.
    assert 0 <= metrics["osmo_backend_sync_age_seconds"][labels(backend="default")] < 60
    assert metrics["osmo_backend_sync_age_seconds"][labels(backend="broken")] == math.inf
    assert metrics["osmo_backend_sync_error"] == {labels(backend="default"): 0, labels(backend="broken"): 1}

    # Nodes: the world's six, one of them now not ready.
    assert metrics["osmo_nodes"] == {labels(backend="default", status="Ready"): 5,
                                     labels(backend="default", status="Not ready (Disk pressure)"): 1}

    # GPUs per pool, as `pool list` counts them.
    assert metrics["osmo_pool_gpu_capacity"][labels(pool="training")] == 16
    assert metrics["osmo_pool_gpu_used"][labels(pool="training")] == 3
    # Free means usable: the not-ready node's 5 free GPUs are not among the free (8 on the Ready node).
    assert metrics["osmo_pool_gpu_free"][labels(pool="training")] == 8
    assert metrics["osmo_pool_gpu_capacity"][labels(pool=SHARED)] == 16
    for row in usage.pool_rows():
        assert metrics["osmo_pool_nodes"][labels(pool=row["name"])] == row["node_count"]
        for family, column in (("capacity", "gpu_total"), ("used", "gpu_used"), ("free", "gpu_free")):
            assert metrics[f"osmo_pool_gpu_{family}"][labels(pool=row["name"])] == row[column], (family, row)

    # Workloads: a pending one counts in each of its candidate pools.
    workloads = metrics["osmo_pool_workloads"]
    assert workloads[labels(pool="training", status="PENDING")] == 3
    assert workloads[labels(pool=SHARED, status="PENDING")] == 2
    assert workloads[labels(pool="training", status="ADMITTED")] == 1
    assert workloads[labels(pool=SHARED, status="RUNNING")] == 1
    assert workloads[labels(pool=SHARED, status="ADMITTED")] == 0
    assert workloads[labels(pool="default", status="PENDING")] == 0

    # The last admission cycle.
    assert metrics["osmo_admission_last_cycle_duration_seconds"][labels()] == 0.25
    assert 30 <= metrics["osmo_admission_last_cycle_age_seconds"][labels()] < 90

    # Dispatch errors: the one within the hour.
    assert metrics["osmo_dispatch_errors_last_hour"][labels(pool="training")] == 1
    assert metrics["osmo_dispatch_errors_last_hour"][labels(pool=SHARED)] == 0


@pytest.mark.django_db
def test_metrics_before_any_sync_or_cycle(client, settings, defaults):
    settings.OSMO_METRICS_TOKEN = TOKEN
    metrics = scrape(client)
    assert metrics.keys() >= FAMILIES
    assert metrics["osmo_admission_last_cycle_duration_seconds"] == {}
    assert metrics["osmo_nodes"] == {}


def test_metrics_take_a_constant_number_of_queries(client, metrics_rows, django_assert_max_num_queries):
    with django_assert_max_num_queries(8):
        scrape(client)
    with CaptureQueriesContext(connection) as before:
        scrape(client)

    # More of everything: backends, pools with nodes, workloads in every state.
    for index in range(3):  # by hand: synced backends with no cluster behind them
        Backend.objects.create(name=f"more-{index}", last_sync_at=timezone.now())
    add_nodes(SHARED, "l40s_platform", 5, gpus=4, product="NVIDIA-L40S", prefix="more-l40s")
    for status in (Status.PENDING, Status.ADMITTED, Status.SCHEDULING, Status.PREEMPTING, Status.RUNNING):
        for pools in (["training"], [SHARED], [SHARED, "training"]):
            workload(status, pools, pool=None if status == Status.PENDING else pools[0])
    workload(Status.FAILED_BACKEND_ERROR, [SHARED], pool=SHARED, finished_ago=dt.timedelta(minutes=1))

    with CaptureQueriesContext(connection) as after:
        metrics = scrape(client)
    assert len(after) == len(before) <= 8, [query["sql"] for query in after.captured_queries]
    assert metrics["osmo_dispatch_errors_last_hour"][labels(pool=SHARED)] == 1
