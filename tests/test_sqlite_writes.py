"""The embedded demo's database is a SQLite file that the site, the Celery worker and CLI commands write at once.

The suite's own database is PostgreSQL, so these tests run the site in child processes against a SQLite file,
configured exactly as `make demo` configures it (`osmo_site.settings`, DEBUG=1, DATABASE_URL=sqlite:///...).
`tests/sqlite_driver.py` runs the multi-threaded scenarios; CLI commands run as `manage.py` processes. A lock
"held by another process" is a real SQLite write lock taken here with `BEGIN IMMEDIATE`.
"""

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings

from pools.cluster.simulated import SimulatedCluster

ROOT = Path(settings.BASE_DIR)
# Child processes wait this long for a lock, so that a lock held here is met quickly.
SHORT_BUSY_TIMEOUT_MS = "100"


def site_env(data: Path, **extra: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", str(data)),
           "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "DEBUG": "1", "LOG_LEVEL": "WARNING",
           "DATABASE_URL": f"sqlite:///{data}/x.sqlite3", "OSMO_DATA_DIR": str(data)}
    return {**env, **extra}


def driver(mode: str, data: Path, **extra: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.sqlite_driver", mode], cwd=ROOT, env=site_env(data, **extra),
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def manage(data: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    env = site_env(data, OSMO_SQLITE_BUSY_TIMEOUT_MS=SHORT_BUSY_TIMEOUT_MS, **extra)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)


@contextmanager
def write_lock(data: Path):
    """Another process's transaction holding SQLite's write lock (readers still read: the file is in WAL)."""
    other = sqlite3.connect(data / "x.sqlite3", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def query(data: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(data / "x.sqlite3") as db:
        return db.execute(sql, params).fetchall()


def node_labels(data: Path, name: str) -> dict[str, str]:
    return json.loads(query(data, "SELECT labels FROM pools_node WHERE name = ?", name)[0][0])


def simulated(data: Path) -> SimulatedCluster:
    return SimulatedCluster("default", data / "simulated")


def cluster_labels(data: Path, name: str) -> dict[str, str]:
    nodes = {node["metadata"]["name"]: node for node in simulated(data).list_nodes(limit=500).items}
    return nodes[name]["metadata"]["labels"]


def assert_one_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    """Migrated, `config init`, the demo pools, one sync of the 250-node simulated cluster, a superuser."""
    data = tmp_path_factory.mktemp("sqlite-site")
    assert driver("setup", data) == {"nodes": 250}
    return data


@pytest.fixture
def site(prepared, tmp_path) -> Path:
    data = tmp_path / "site"
    shutil.copytree(prepared, data)
    return data


# ---- concurrent writers -------------------------------------------------------------------------------------

def test_admin_saves_api_writes_and_label_runs_all_succeed_beside_a_writer_committing_every_100_ms(site):
    result = driver("stress", site)
    assert result["failures"] == []
    assert result["done"] == {"admin": 50, "api": 50, "label": 50}
    assert result["writer_commits"] >= 10 and result["journal_mode"] == "wal"
    assert query(site, "SELECT count(*) FROM auth_user WHERE username LIKE 'stress-user-%'") == [(50,)]
    assert query(site, "SELECT count(*) FROM pools_configrevision WHERE name = 'dev' AND description = 'stress'") \
        == [(50,)]
    assert query(site, "SELECT count(*) FROM pools_node WHERE labels LIKE '%runwhere.ai/stress%'") == [(12,)]


# ---- the sync ----------------------------------------------------------------------------------------------

def test_a_sync_write_that_finds_the_database_locked_is_tried_again(site):
    result = driver("sync-writes", site, OSMO_SQLITE_BUSY_TIMEOUT_MS=SHORT_BUSY_TIMEOUT_MS)
    assert result["timeout"] == 0.1
    assert result["full_sync"] == {"ok": True, "errors": []}
    # Counted once, though written on a later try.
    assert result["batch"] == {"ok": True, "nodes_written": 1, "batches": 1, "events": 1}
    assert any(w.startswith("backend default: full sync: database is locked; trying again") for w in result["warnings"])
    assert any(w.startswith("backend default: batch of 1 events: database is locked; trying again")
               for w in result["warnings"])
    # A lock that outlasts every try ends the Celery task's round quietly; the next round resumes.
    assert result["task"] == {"outcome": "failed", "error": "database is locked"}


def test_a_burst_of_watch_events_is_written_in_batches_of_at_most_500(site):
    result = driver("burst", site)
    assert sum(result["sizes"]) >= 1200 and max(result["sizes"]) <= 500
    assert result["stored"] == result["nodes"] == 400


def test_a_watching_sync_outlives_a_lock_that_outlasts_its_retries(site):
    process = subprocess.Popen([sys.executable, "manage.py", "sync", "default"], cwd=ROOT, text=True,
                               env=site_env(site, OSMO_SQLITE_BUSY_TIMEOUT_MS=SHORT_BUSY_TIMEOUT_MS,
                                            PYTHONUNBUFFERED="1"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout.readline().startswith("Watching default")
        time.sleep(3)  # following the watches, holding its lease
        with write_lock(site):
            # The sync renews its lease every 0.2 s; renewing, then releasing the lease take about 2 s of tries
            # each, so both fail: the next round must still be able to take the lease.
            time.sleep(6)
        node = query(site, "SELECT name FROM pools_node ORDER BY name LIMIT 1")[0][0]
        simulated(site).patch_node_labels(node, {"runwhere.ai/after-lock": "seen"})
        deadline = time.monotonic() + 30
        while node_labels(site, node).get("runwhere.ai/after-lock") != "seen":
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "the sync stopped following the cluster"
            time.sleep(0.3)
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr
    assert "error: default: database is locked, even after retries; starting the next round" in stderr
    assert "could not release the sync lease (database is locked)" in stderr
