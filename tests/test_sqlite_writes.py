"""The embedded demo's database is a SQLite file that the site, the Celery worker and CLI commands write at once.

The suite's own database is PostgreSQL, so these tests run the site in child processes against a SQLite file,
configured exactly as `make demo` configures it (`osmo_site.settings`, DEBUG=1, DATABASE_URL=sqlite:///...).
`tests/sqlite_driver.py` runs the multi-threaded scenarios; CLI commands run as `manage.py` processes. A lock
"held by another process" is a real SQLite write lock taken here with `BEGIN IMMEDIATE`.
"""

import json
import os
import platform
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.conf import settings

from pools.cluster.simulated import SimulatedCluster
from tests.waiting import until

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
    # The writer committed before the workers started and went on committing while they ran (every 100 ms; how
    # many times depends on the machine's speed, so only "more than before" is asserted).
    assert result["writer_commits_before_workers"] >= 1 and result["journal_mode"] == "wal"
    assert result["writer_commits"] > result["writer_commits_before_workers"]
    assert query(site, "SELECT count(*) FROM auth_user WHERE username LIKE 'stress-user-%'") == [(50,)]
    assert query(site, "SELECT count(*) FROM pools_configrevision WHERE name = 'dev' AND description = 'stress'") \
        == [(50,)]
    assert query(site, "SELECT count(*) FROM pools_node WHERE labels LIKE '%runwhere.ai/stress%'") == [(12,)]


# ---- the sync ----------------------------------------------------------------------------------------------

def test_a_sync_write_that_finds_the_database_locked_is_tried_again(site):
    result = driver("sync-writes", site, OSMO_SQLITE_BUSY_TIMEOUT_MS=SHORT_BUSY_TIMEOUT_MS)
    assert result["timeout"] == 0.1
    assert result["released_at_retry"]  # each lock was held until the write met it and said it would try again
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
    lines: list[str] = []

    def read() -> None:
        for line in process.stderr:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)

    def said(text: str) -> bool:
        if text in "".join(lines):
            return True
        assert process.poll() is None, "".join(lines)[-3000:]
        return False

    try:
        assert process.stdout.readline().startswith("Watching default")
        reader.start()
        until(lambda: query(site, "SELECT sync_lease_owner FROM pools_backend WHERE name = 'default'")[0][0],
              "the sync to hold its lease")
        with write_lock(site):
            # Held until the round has failed and could not release its lease either (tries of about 2 s each):
            # the next round must still be able to take the lease.
            until(lambda: said("could not release the sync lease (database is locked)"),
                  "the sync to give up releasing its lease")
        node = query(site, "SELECT name FROM pools_node ORDER BY name LIMIT 1")[0][0]
        simulated(site).patch_node_labels(node, {"runwhere.ai/after-lock": "seen"})
        until(lambda: process.poll() is None and node_labels(site, node).get("runwhere.ai/after-lock") == "seen",
              "the sync to follow the cluster again", detail=lambda: "".join(lines)[-3000:])
    finally:
        process.terminate()
        process.wait(timeout=30)
        reader.join(30)
    stderr = "".join(lines)
    assert "Traceback" not in stderr, stderr
    assert "error: default: database is locked, even after retries; starting the next round" in stderr
    assert "could not release the sync lease (database is locked)" in stderr


def test_sync_once_against_a_database_locked_throughout_ends_in_one_line(site):
    with write_lock(site):
        done = manage(site, "sync", "default", "--once", LOG_LEVEL="ERROR")
    assert done.returncode == 1
    assert assert_one_line(done.stderr) == ("CommandError: database error: database is locked; another process held "
                                            "it too long, try again")


# ---- commands that changed the cluster and could not record it ------------------------------------------------

def test_label_node_that_could_not_record_the_change_says_so_in_one_line_and_the_next_sync_records_it(site):
    node = query(site, "SELECT name FROM pools_node ORDER BY name LIMIT 1")[0][0]
    with write_lock(site):
        done = manage(site, "label", "node", node, "runwhere.ai/held=yes")
    assert done.returncode == 1
    assert assert_one_line(done.stderr) == (f"CommandError: node/{node}: the cluster was changed but not recorded "
                                            "here (database is locked); the next sync will pick it up")
    assert cluster_labels(site, node)["runwhere.ai/held"] == "yes"
    assert "runwhere.ai/held" not in node_labels(site, node)
    assert manage(site, "sync", "default", "--once").returncode == 0
    assert node_labels(site, node)["runwhere.ai/held"] == "yes"


def test_create_f_checks_before_it_patches_and_delete_f_that_could_not_record_the_change_says_so(site, tmp_path):
    nodes = [row[0] for row in query(site, "SELECT name FROM pools_node ORDER BY name LIMIT 2")]
    path = tmp_path / "pool.yaml"
    path.write_text("kind: pool\nversion: v0.1\npool:\n  name: held-pool\nnodes:\n"
                    + "".join(f"  {name}:\n    gpu-type: held\n" for name in nodes))
    # create -f runs the whole write path in a rolled-back transaction first: a locked database stops it
    # before the cluster is touched. (Its "changed but not recorded" paths: tests/test_not_recorded.py.)
    with write_lock(site):
        refused = manage(site, "create", "-f", str(path))
    assert refused.returncode == 1
    assert assert_one_line(refused.stderr) == ("CommandError: database error: database is locked; another process "
                                               "held it too long, try again")
    assert all("runwhere.ai/pool" not in cluster_labels(site, name) for name in nodes)

    created = manage(site, "create", "-f", str(path))
    assert created.returncode == 0 and "pool/held-pool created" in created.stdout, created.stderr
    with write_lock(site):
        deleted = manage(site, "delete", "-f", str(path))
    assert deleted.returncode == 1
    assert assert_one_line(deleted.stderr) == (
        "CommandError: pool/held-pool: the cluster was changed (2 nodes unlabeled) but not recorded here (database "
        "is locked); the next sync will pick up the labels; run delete again to finish")
    assert all("runwhere.ai/pool" not in cluster_labels(site, name) for name in nodes)
    assert query(site, "SELECT count(*) FROM pools_pool WHERE name = 'held-pool'") == [(1,)]


def test_a_config_write_against_a_locked_database_ends_in_one_line(site, tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"dev": {"name": "dev", "description": "locked", "backend": "default"}}))
    with write_lock(site):
        done = manage(site, "config", "update", "pool", "--file", str(path))
    assert done.returncode == 1
    assert assert_one_line(done.stderr) == ("CommandError: database error: database is locked; another process held "
                                            "it too long, try again")


# ---- output cut short ----------------------------------------------------------------------------------------

def test_commands_whose_reader_has_gone_end_quietly(site):
    """Like `manage.py describe pool training | head -1` when head has already exited: each command's stdout
    is a pipe whose read end is closed."""
    commands = [["describe", "pool", "training"], ["resource", "list"], ["config", "history"], ["get", "pools"]]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        processes = [subprocess.Popen([sys.executable, "manage.py", *args], cwd=ROOT, env=site_env(site),
                                      stdout=write_end, stderr=subprocess.PIPE, text=True) for args in commands]
    finally:
        os.close(write_end)
    for args, process in zip(commands, processes, strict=True):
        _, stderr = process.communicate(timeout=60)
        # Nothing on stderr and exit 0: the reader took what it wanted, so `set -o pipefail` scripts pass.
        assert (args, stderr, process.returncode) == (args, "", 0)


# ---- any other end -------------------------------------------------------------------------------------------

def test_an_unexpected_error_and_ctrl_c_end_in_one_line(site, tmp_path):
    refused = manage(site, "config", "history", "--limit", "-1")
    assert refused.returncode == 1
    assert assert_one_line(refused.stderr) == ("CommandError: --limit must be a whole number of revisions from 1 to "
                                               "1,000,000 (not -1)")
    # Beyond SQLite's integers: refused in our words before the database says "datatype mismatch" in its own.
    huge = manage(site, "config", "history", "--limit", str(10 ** 30))
    assert huge.returncode == 1
    assert assert_one_line(huge.stderr) == ("CommandError: --limit must be a whole number of revisions from 1 to "
                                            f"1,000,000 (not {10 ** 30})")

    fifo = tmp_path / "pool.json"
    os.mkfifo(fifo)
    # Ctrl-C reaches a command in the terminal's foreground, where SIGINT is at its default: a test run from a
    # shell's background job (CI's may be) inherits SIGINT ignored, which the command would inherit too.
    process = subprocess.Popen([sys.executable, "manage.py", "config", "update", "pool", "--file", str(fifo)],
                               cwd=ROOT, env=site_env(site), stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def open_to_write() -> tuple[int] | None:  # a writer can open the FIFO once the command has opened it to read
        assert process.poll() is None, "the command ended before reading its file"
        try:
            return (os.open(fifo, os.O_WRONLY | os.O_NONBLOCK),)
        except OSError:
            return None

    (writer,) = until(open_to_write, "the command to open its file to read")
    try:
        # Interrupted once it waits for the document: blocked in read(2), not still opening the file.
        read = {"x86_64": "0", "aarch64": "63"}[platform.machine()]
        until(lambda: Path(f"/proc/{process.pid}/syscall").read_text().split()[0] == read,
              "the command to wait in read(2) for its document")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        os.close(writer)
    assert process.returncode == 130
    assert assert_one_line(stderr) == "CommandError: interrupted"
