"""Runs the demo's concurrent writers against a SQLite *file* database, in its own process.

The test settings use PostgreSQL, so `tests/test_sqlite_concurrency.py` starts this script with
DJANGO_SETTINGS_MODULE=osmo_site.settings, DEBUG=1, DATABASE_URL=sqlite:///<tmp>/x.sqlite3 and
OSMO_DATA_DIR=<tmp>, exactly as `make demo` configures the site. Modes:

- `setup`: migrate, `config init`, the demo pools and one sync of the simulated cluster, a superuser.
- `stress`: a writer thread commits a sync-like read-then-write every 100 ms while, from several threads,
  50 admin "Add user" saves, 50 `PUT /api/configs/pool/` writes and 50 `label node` runs go through.
- `sync-writes`: another connection holds the write lock while the sync writes.
- `burst`: a burst of watch events from the stand-in API server, written in batches.
- `api-not-recorded`: the label API while the database stays locked.

Each mode prints one JSON object on its last line of stdout.
"""

import json
import os
import sqlite3
import sys
import threading
import time
import traceback
from io import StringIO

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo_site.settings")
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import override_settings, setup_test_environment  # noqa: E402
from django.utils import timezone  # noqa: E402

ADMIN = "stress-admin"
OPERATIONS = 50
THREADS_PER_KIND = 3
WRITER_PERIOD = 0.1


def database_file() -> str:
    return settings.DATABASES["default"]["NAME"]


def setup() -> dict:
    from pools.config.defaults import init_demo
    from pools.fleet.sync import BackendSync, cluster_for
    from pools.models import Backend

    call_command("migrate", verbosity=0)
    call_command("config", "init", stdout=StringIO())
    init_demo()
    backend = Backend.objects.get(name="default")
    BackendSync(backend, cluster_for(backend)).run(seconds=0)
    get_user_model().objects.create_superuser(ADMIN, password="stress-pw-123")
    return {"nodes": backend.nodes.count()}


# ---- stress ---------------------------------------------------------------------------------------------

class Outcome:
    def __init__(self):
        self.lock = threading.Lock()
        self.failures: list[str] = []
        self.done: dict[str, int] = {"admin": 0, "api": 0, "label": 0}

    def record(self, kind: str, error: str | None) -> None:
        with self.lock:
            if error:
                self.failures.append(f"{kind}: {error}")
            else:
                self.done[kind] += 1


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


def writer(stop: threading.Event, outcome: Outcome, commits: list[int], committed: threading.Event) -> None:
    """Like a sync batch: read some rows, then write them, in one transaction, every 100 ms. `committed` is set at
    its first commit (or when it ends without one)."""
    from pools.models import Backend, Node

    backend = Backend.objects.get(name="default")
    ids = list(Node.objects.filter(backend=backend).values_list("id", flat=True))
    step = 0
    try:
        while not stop.is_set():
            started = time.monotonic()
            chunk = ids[(step * 10) % len(ids):][:10]
            step += 1
            try:
                with transaction.atomic():
                    rows = list(Node.objects.filter(id__in=chunk).values_list("id", "gpu_used"))
                    now = timezone.now()
                    # By hand: writes as frequent as a sync's; what is tested is SQLite's locking, not the sync.
                    Node.objects.filter(id__in=[row[0] for row in rows]).update(last_seen=now)
                    Backend.objects.filter(pk=backend.pk).update(last_sync_at=now)
                commits[0] += 1
                committed.set()
            except Exception as exc:
                outcome.record("writer", _error(exc))
            stop.wait(max(0.0, WRITER_PERIOD - (time.monotonic() - started)))
    finally:
        committed.set()
        connection.close()


def run_kind(kind: str, indexes: list[int], outcome: Outcome, admin, pool_doc: dict, nodes: list[str]) -> None:
    client = Client()
    try:
        client.force_login(admin)
    except Exception as exc:
        outcome.record(kind, f"login: {_error(exc)}")
        connection.close()
        return
    try:
        for i in indexes:
            try:
                error = OPERATIONS_BY_KIND[kind](client, i, pool_doc, nodes)
            except Exception as exc:
                error = _error(exc)
            outcome.record(kind, error)
    finally:
        connection.close()


def admin_save(client: Client, i: int, pool_doc: dict, nodes: list[str]) -> str | None:
    answer = client.post("/admin/auth/user/add/", {
        "username": f"stress-user-{i}", "usable_password": "true",
        "password1": "Stress-pw-1234", "password2": "Stress-pw-1234", "_save": "Save",
    })
    if answer.status_code != 302:
        return f"HTTP {answer.status_code}"
    return None


def api_write(client: Client, i: int, pool_doc: dict, nodes: list[str]) -> str | None:
    body = {"pools": {"dev": {**pool_doc, "description": f"Stress revision {i}"}}}
    answer = client.put("/api/configs/pool/?description=stress", data=json.dumps(body),
                        content_type="application/json")
    if answer.status_code != 200:
        return f"HTTP {answer.status_code}: {answer.content[:200]!r}"
    return None


def label_run(client: Client, i: int, pool_doc: dict, nodes: list[str]) -> str | None:
    call_command("label", "node", nodes[i % len(nodes)], f"runwhere.ai/stress=v{i}", "--overwrite",
                 stdout=StringIO())
    return None


OPERATIONS_BY_KIND = {"admin": admin_save, "api": api_write, "label": label_run}


def stress() -> dict:
    from pools.config import writes as configs
    from pools.models import ConfigKind, Node

    setup_test_environment(debug=False)
    admin = get_user_model().objects.get(username=ADMIN)
    pool_doc = configs.export(ConfigKind.POOL, "dev")["pools"]["dev"]
    nodes = list(Node.objects.order_by("name").values_list("name", flat=True)[:THREADS_PER_KIND * 4])
    connection.close()
    outcome = Outcome()
    stop = threading.Event()
    commits = [0]
    started = time.monotonic()
    committed = threading.Event()
    writer_thread = threading.Thread(target=writer, args=(stop, outcome, commits, committed))
    writer_thread.start()
    # The writer's first commit lands before any worker starts, so that every worker meets a writer that is
    # already committing (the count of its commits then depends on how long the workers take, not on luck).
    committed.wait(120)  # a ceiling against a hang only: the test fails on writer_commits_before_workers == 0
    commits_before = commits[0]
    workers = []
    # PBKDF2 with a million rounds would make the admin saves measure the CPU, not the database.
    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        for kind in OPERATIONS_BY_KIND:
            for t in range(THREADS_PER_KIND):
                indexes = list(range(t, OPERATIONS, THREADS_PER_KIND))
                # Each label thread has its own nodes, so two runs never race on one node's labels.
                own = nodes[t::THREADS_PER_KIND]
                workers.append(threading.Thread(target=run_kind, args=(kind, indexes, outcome, admin, pool_doc,
                                                                        own)))
        for thread in workers:
            thread.start()
        for thread in workers:
            thread.join()
    stop.set()
    writer_thread.join()
    return {"failures": outcome.failures, "done": outcome.done, "writer_commits": commits[0],
            "writer_commits_before_workers": commits_before,
            "seconds": round(time.monotonic() - started, 1),
            "journal_mode": sqlite3.connect(database_file()).execute("PRAGMA journal_mode").fetchone()[0]}


# ---- a lock held by another connection -----------------------------------------------------------------

class WriteLock:
    """Another connection's transaction holding SQLite's write lock from `take()` until `release()` (which returns
    once it has committed): held until what the test waits for has happened, not for a guessed number of seconds."""

    def __init__(self):
        self.held, self._release, self.released = threading.Event(), threading.Event(), threading.Event()

    def take(self) -> "WriteLock":
        def hold() -> None:
            other = sqlite3.connect(database_file(), isolation_level=None)
            other.execute("BEGIN IMMEDIATE")
            self.held.set()
            self._release.wait(120)  # a ceiling against a hang only
            other.execute("COMMIT")
            other.close()
            self.released.set()

        threading.Thread(target=hold, daemon=True).start()
        self.held.wait(120)
        return self

    def release(self) -> None:
        self._release.set()
        self.released.wait(120)


def sync_writes() -> dict:
    """Run with OSMO_SQLITE_BUSY_TIMEOUT_MS=100, so that a held lock is met quickly. A lock that a write must
    outlast by trying again is released at the write's first "trying again" (its retry then finds the database
    free); the one that must outlast every try is released once the task has returned."""
    import logging

    from pools.cluster import WatchEvent
    from pools.fleet.sync import BackendSync, cluster_for
    from pools.models import Backend, Node
    from pools.tasks import sync_backend

    warnings: list[str] = []
    release_at_retry: list[WriteLock] = []

    class Catch(logging.Handler):
        def emit(self, record):
            message = record.getMessage()
            warnings.append(message)
            if "database is locked; trying again" in message:  # logged just before the pause between tries
                while release_at_retry:
                    release_at_retry.pop().release()

    logging.getLogger("pools").addHandler(Catch(level=logging.WARNING))
    backend = Backend.objects.get(name="default")
    cluster = cluster_for(backend)
    result: dict = {"timeout": settings.DATABASES["default"]["OPTIONS"]["timeout"]}

    class LockedWhileListing(BackendSync):
        """The lease is taken; then another writer holds the database while this sync lists."""

        def full_sync(self):
            release_at_retry.append(WriteLock().take())
            super().full_sync()

    try:
        stats = LockedWhileListing(backend, cluster).run(seconds=0)
        result["full_sync"] = {"ok": True, "errors": stats.errors}
    except Exception as exc:
        result["full_sync"] = {"ok": False, "error": _error(exc)}

    # One batch of watch events (a node's labels changed) applied while the lock is held.
    node = cluster.list_nodes(limit=1).items[0]
    node["metadata"]["labels"]["runwhere.ai/retried"] = "yes"
    sync = BackendSync(backend, cluster)
    release_at_retry.append(WriteLock().take())
    try:
        sync.apply([WatchEvent("MODIFIED", node)], [])
        stored = Node.objects.get(backend=backend, name=node["metadata"]["name"]).labels
        result["batch"] = {"ok": stored.get("runwhere.ai/retried") == "yes", "nodes_written":
                           sync.stats.nodes_written, "batches": sync.stats.batches, "events": sync.stats.events}
    except Exception as exc:
        result["batch"] = {"ok": False, "error": _error(exc)}
    result["released_at_retry"] = not release_at_retry  # both locks were met, and outlasted by a later try

    # A lock that outlasts every try (held until the task has returned): the Celery task reports a failed round
    # instead of raising.
    lock = WriteLock().take()
    try:
        result["task"] = sync_backend(backend.pk, seconds=0)
    except Exception as exc:
        result["task"] = {"outcome": "raised", "error": _error(exc)}
    finally:
        lock.release()
    result["warnings"] = warnings
    return result


def burst() -> dict:
    """1,200 node changes arrive at once through the real client (the stand-in API server of the tests)."""
    import tempfile

    from pools.fleet.sync import BackendSync, cluster_for
    from pools.models import Backend, Node
    from tests.kube_objects import make_node
    from tests.kube_standin import KubeStandin
    from tests.support.syncing import watch_round
    from tests.waiting import until

    sizes: list[int] = []

    class Recording(BackendSync):
        def apply(self, node_events, pod_events, *more):
            sizes.append(len(node_events) + len(pod_events) + sum(len(events) for events in more))
            super().apply(node_events, pod_events, *more)

    with KubeStandin(crds=()) as standin, tempfile.TemporaryDirectory() as tmp:  # nodes only
        names = [f"burst-{i:03d}" for i in range(400)]
        standin.add_nodes(make_node(name, gpus=8) for name in names)
        call_command("backend", "add", "burst", "--kubeconfig", standin.kubeconfig(f"{tmp}/kubeconfig"),
                     stdout=StringIO())
        backend = Backend.objects.get(name="burst")
        BackendSync(backend, cluster_for(backend)).run(seconds=0)
        for round_ in range(3):
            for name in names:
                standin.modify_node(name, {"metadata": {"labels": {"runwhere.ai/burst": f"r{round_}"}}})
        watch_round(backend, standin, lambda sync: until(lambda: sync.stats.events >= 3 * len(names),
                                                         "the sync to take every event of the burst"),
                    sync_class=Recording)
    stored = Node.objects.filter(backend=backend, labels__icontains='"runwhere.ai/burst": "r2"').count()
    return {"sizes": sizes, "nodes": len(names), "stored": stored}


def api_not_recorded() -> dict:
    """The label API while another connection holds the write lock for longer than every try."""
    from pools.models import Node

    setup_test_environment(debug=False)
    client = Client()
    client.force_login(get_user_model().objects.get(username=ADMIN))
    name = Node.objects.order_by("name").values_list("name", flat=True)[0]
    lock = WriteLock().take()  # held until the answer, so longer than every try
    try:
        answer = client.post(f"/api/nodes/{name}/labels", {"labels": {"runwhere.ai/api": "unrecorded"}},
                             content_type="application/json")
    finally:
        lock.release()
    return {"node": name, "status": answer.status_code, "body": answer.json()}


def main() -> None:
    mode = sys.argv[1]
    try:
        result = {"setup": setup, "stress": stress, "sync-writes": sync_writes, "burst": burst,
                  "api-not-recorded": api_not_recorded}[mode]()
    except Exception:
        traceback.print_exc()
        sys.exit(2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
