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
