"""`manage.py serve` as an operator runs it (docs/operations/index.md): gunicorn with the documented
configuration, a Celery worker and beat, against the PostgreSQL and Redis of the environment; pooled database
connections under a burst; JSON logs with request ids; a clean stop on SIGTERM."""

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from pools.access.tokens import create_token
from tests.processes import descendants, running
from tests.support.children import database_url
from tests.support.ports import free_port
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.redis]
ROOT = Path(__file__).resolve().parent.parent


def serve_env(tmp_path, **extra) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST", "DJANGO"))}
    env.update(DJANGO_SETTINGS_MODULE="osmo_site.settings", OSMO_ENV_FILE="", OSMO_DATA_DIR=str(tmp_path / "data"),
               DEBUG="0", SECRET_KEY="serve-test-" + "k" * 50, ALLOWED_HOSTS="127.0.0.1",
               SESSION_COOKIE_SECURE="0", CSRF_COOKIE_SECURE="0", SECURE_SSL_REDIRECT="0",
               DATABASE_URL=database_url(), CELERY_BROKER_URL=redis_db(11),
               LOG_FORMAT="json", WEB_CONCURRENCY="1", OSMO_ADMISSION_INTERVAL="1")
    env.update(extra)
    return env


def redis_db(number: int) -> str:
    """The test Redis, database `number` (so no other test's worker takes these messages), shifted by the xdist
    worker's number as TEST_REDIS_URL is (osmo_site/settings_test.py)."""
    parts = urlsplit(settings.TEST_REDIS_URL)
    return urlunsplit((parts.scheme, parts.netloc, f"/{(number + settings.XDIST_WORKER) % 16}", "", ""))


def get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def wait_for(predicate, what: str, limit: float = 60.0, process=None):
    def ready():
        if process is not None and process.poll() is not None:
            raise AssertionError(f"serve exited with {process.returncode} while waiting for {what}")
        try:
            return predicate()
        except OSError:  # not listening yet
            return False

    until(ready, what, seconds=limit, every=0.2)


class Served:
    def __init__(self, tmp_path, args: list[str], **env):
        self.port = free_port()
        self.path = tmp_path / "serve.log"
        self.log = self.path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{self.port}", *args],
            cwd=ROOT, env=serve_env(tmp_path, **env), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines()

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.lines() if line.startswith("{")]

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=60)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
            self.log.close()


@contextlib.contextmanager
def role_limited_to(connections: int):
    """A login role of this test's own that PostgreSQL lets hold at most `connections` at once (CONNECTION LIMIT:
    one more is refused, "too many connections for role"), with the rights the site needs on the test database;
    yields its DATABASE_URL."""
    db = connection.settings_dict
    role = f"{db['NAME']}_limited"[:63]
    with connection.cursor() as cursor:
        cursor.execute(f'DROP ROLE IF EXISTS "{role}"')
        cursor.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'limited' CONNECTION LIMIT {connections}")
        for grant in ("ALL ON SCHEMA public", "ALL ON ALL TABLES IN SCHEMA public",
                      "ALL ON ALL SEQUENCES IN SCHEMA public"):
            cursor.execute(f'GRANT {grant} TO "{role}"')
    try:
        yield f"postgres://{role}:limited@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP OWNED BY "{role}"')
            cursor.execute(f'DROP ROLE "{role}"')


def role_connections(probe, database_url: str) -> int:
    return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                         [urlsplit(database_url).username]).fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_burst_queues_in_the_pool_and_every_line_carries_its_request_id(tmp_path):
    user = get_user_model().objects.create_user("burst", is_staff=True, is_superuser=True)
    secret = create_token(user, "burst", timezone.now() + dt.timedelta(days=1))[1]
    # Eight threads, a pool of two, as a role that PostgreSQL refuses a third connection: without the pool each
    # busy thread would hold a connection of its own, and the requests that found none refused would answer 500.
    with role_limited_to(2) as limited, psycopg.connect(database_url(), autocommit=True) as probe:
        served = Served(tmp_path, ["--no-worker", "--no-beat"], WEB_THREADS="8", OSMO_DB_POOL_MAX="2",
                        DATABASE_URL=limited)
        try:
            wait_for(lambda: get(f"{served.url}/readyz")[0] == 200, "/readyz to answer 200", process=served.process)
            headers = {"Authorization": f"Bearer {secret}"}
            with ThreadPoolExecutor(32) as pool:
                statuses = list(pool.map(lambda _: get(f"{served.url}/api/resources/", headers)[0], range(200)))
            assert statuses == [200] * 200, served.lines()[-20:]
            # Nor did the pool try a third (it would log PostgreSQL's refusal and carry on with two).
            assert not [line for line in served.lines() if "too many connections" in line]
            assert 1 <= role_connections(probe, limited) <= 2  # the pool keeps what it opened

            status, answered, _ = get(f"{served.url}/healthz", {"X-Request-ID": "trace-42"})
            assert status == 200 and answered["X-Request-ID"] == "trace-42"
            wait_for(lambda: any(line.get("request_id") == "trace-42" for line in served.json_lines()),
                     "the access line")
            access = [line for line in served.json_lines() if line["logger"] == "osmo.access"]
            assert {"method": "GET", "path": "/healthz", "status": 200, "request_id": "trace-42"}.items() <= next(
                line for line in access if line["request_id"] == "trace-42").items()
            resources = [line for line in access if line["path"] == "/api/resources/"]
            assert len(resources) == 200 and len({line["request_id"] for line in resources}) == 200
            assert all(line["user"] == "burst" and line["status"] == 200 for line in resources)
        finally:
            status = served.stop()
    assert status == 0
    assert not [line for line in served.lines() if line and not line.startswith("{") and "Serving:" not in line]


@pytest.mark.django_db(transaction=True)
def test_serve_runs_web_worker_and_beat_and_stops_them_all(tmp_path):
    served = Served(tmp_path, [])
    try:
        wait_for(lambda: get(f"{served.url}/readyz")[0] == 200, "/readyz to answer 200", process=served.process)
        # Beat sends the admission cycle every second; the worker runs it, its lines carrying the task's id.
        wait_for(lambda: any(str(line.get("request_id", "")).startswith("task:") for line in served.json_lines()),
                 "a task's log line from the worker")
        children = [line for line in served.lines() if line.startswith("Serving:")]
        assert children and all(f"{name} (pid" in children[0] for name in (
            "web", "worker-sync", "worker-admission", "worker-lifecycle", "beat"))
        below = descendants(served.process.pid)  # gunicorn's and Celery's own workers too
    finally:
        status = served.stop()
    assert status == 0
    pids = [int(part.split(")")[0]) for part in children[0].split("pid ")[1:]]
    assert len(pids) == 5 and set(pids) < below
    assert not [pid for pid in below if running(pid)]


def test_serve_with_nothing_to_run_is_one_line(tmp_path):
    result = subprocess.run([sys.executable, "manage.py", "serve", "--no-web", "--no-worker", "--no-beat"],
                            cwd=ROOT, env=serve_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip() == "CommandError: nothing to run: --no-web, --no-worker and --no-beat leave no process"


@pytest.mark.django_db(transaction=True)
def test_serve_stopped_by_sighup_as_a_closed_terminal_leaves_no_process(tmp_path):
    served = Served(tmp_path, ["--no-worker", "--no-beat"])
    try:
        wait_for(lambda: get(f"{served.url}/readyz")[0] == 200, "/readyz to answer 200", process=served.process)
        below = descendants(served.process.pid)  # gunicorn's master and its worker
        served.process.send_signal(signal.SIGHUP)
    finally:
        status = served.stop()
    assert status == 0
    assert len(below) >= 2 and not [pid for pid in below if running(pid)]
