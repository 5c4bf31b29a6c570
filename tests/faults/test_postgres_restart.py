"""PostgreSQL restarted (a private server this module starts from the machine's PostgreSQL binaries, never the shared
one) while the sync and the admission cycle run as their own processes, as deployed, with the web server beside
them: nothing is lost or done twice, the site answers 503 on /readyz during the outage, and every process carries
on by itself once the database is back (no process is restarted by the test)."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest
from django.conf import settings

from tests.faults.conftest import busy_cluster
from tests.kube_objects import make_node
from tests.scheduling.test_faults import PREFIX
from tests.support.ports import free_port
from tests.waiting import until

pytestmark = pytest.mark.postgres

SETUP = r"""
import json, sys
from datetime import timedelta

import django

django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from pools.access.tokens import create_token
from pools.config import writes
from pools.config.defaults import init_defaults
from pools.models import Backend, ConfigKind
from tests.scheduling.conftest import A100, H100, L40S, add_nodes, project, seed_pool

kubeconfig = sys.argv[1]
init_defaults(author="tests")
# The pools' backend dispatches to the stand-in; its nodes are rows (no sync of its own in this test).
Backend.objects.filter(name="default").update(kind="kubernetes", kubeconfig_path=kubeconfig,
                                              last_sync_at=timezone.now() + timedelta(hours=1))
writes.import_document(ConfigKind.POD_TEMPLATE, {**L40S, **A100, **H100}, author="tests")
training = {**seed_pool(), "name": "training", "default_platform": "h100", "common_pod_template": ["default_user"],
            "max_exec_timeout": "1d", "platforms": {"h100": {"override_pod_template": ["h100"]}}}
writes.import_document(ConfigKind.POOL, {"pools": {"training": training}}, author="tests")
writes.import_document(ConfigKind.ROLE, {"name": "osmo-training", "policies": [{"actions": [
    {"base": "http", "path": "/api/pool/training*", "method": "post"}]}]}, author="tests")
writes.import_document(ConfigKind.DEPARTMENT, {"research": {"name": "research"}}, author="tests")
project("vision", pools={"training": {"deserved": 16, "limit": 16}}, users=["researcher"],
        default_pools=["training"])
add_nodes("training", "h100", 2, gpus=8)
researcher = get_user_model().objects.create_user("researcher", password="pw-res-123")
call_command("user", "add-role", "researcher", "osmo-training")
call_command("backend", "add", "prod", "--kubeconfig", kubeconfig)  # synced by `manage.py sync prod`
_, secret = create_token(researcher, "faults", timezone.now() + timedelta(days=1))
print(json.dumps({"token": secret}))
"""


class PrivatePostgres:
    """initdb into a directory of its own, pg_ctl start on a free port with trust authentication; as the postgres
    user when the tests run as root (initdb refuses root)."""

    def __init__(self):
        binaries = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
        assert binaries, "no PostgreSQL binaries under /usr/lib/postgresql/*/bin"
        self.bin = binaries[-1].parent
        self.dir = Path(tempfile.mkdtemp(prefix="osmo-faults-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.dir, account.pw_uid, account.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run([*self.as_user, str(self.bin / program), *args], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, (program, done.stdout[-2000:], done.stderr[-2000:])

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")

    def start(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-w", "-t", "60", "-o",
                  f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def execute(self, sql: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)

    def rows(self, sql: str, database: str) -> list[tuple]:
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql).fetchall()

    def cleanup(self) -> None:
        if self.running():
            subprocess.run([*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                            "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)


# How long a process's connection pool waits for a connection before its caller gets the error (the setting's
# default is 10 s). The processes meet the outage when a write gives up waiting: the sync's failed batch and then
# its lease release each waited the whole 10 s, 20 s of the test spent waiting for an error whose arrival is what is
# awaited. Two seconds still exceeds, by far, what opening a connection to a server that is up takes.
POOL_TIMEOUT_SECONDS = "2"


def env_for(url: str, data_dir: Path) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "DEBUG": "1",
            "OSMO_ENV_FILE": "", "OSMO_DATA_DIR": str(data_dir), "OSMO_ADMISSION_ON_COMMIT": "0",
            "CELERY_BROKER_URL": "filesystem://", "SECRET_KEY": "faults-only", "PYTHONPATH": str(settings.BASE_DIR),
            "OSMO_DB_POOL_TIMEOUT": POOL_TIMEOUT_SECONDS}


class Template:
    """The module's private server and, in it, `osmo_template`: migrated, with the world SETUP builds, its backends
    connected through `kubeconfig` (a path each test writes its own stand-in's address to before its processes
    start) and a token for the researcher, which every copy of the template shares."""

    def __init__(self, server: PrivatePostgres):
        self.server = server
        self.kubeconfig = server.dir / "kubeconfig"
        self.token = ""

    def build(self) -> None:
        from tests.kube_standin import KubeStandin

        self.server.execute("CREATE DATABASE osmo_template")
        env = env_for(self.server.url("osmo_template"), self.server.dir / "site")
        migrate = subprocess.run([sys.executable, "manage.py", "migrate", "--noinput"], cwd=settings.BASE_DIR,
                                 env=env, capture_output=True, text=True, timeout=300)
        assert migrate.returncode == 0, migrate.stderr[-3000:]
        # `backend add prod` reads the cluster's identity: a stand-in answers it while the world is built (the
        # tests' own stand-ins answer at the same kubeconfig path afterwards).
        with KubeStandin() as standin:
            kubeconfig = standin.kubeconfig(self.kubeconfig)
            done = subprocess.run([sys.executable, "-c", SETUP, kubeconfig], cwd=settings.BASE_DIR, env=env,
                                  capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        self.token = json.loads(done.stdout.strip().splitlines()[-1])["token"]


@pytest.fixture(scope="module")
def postgres():
    """One private server for the module, with a migrated template, world included, that each test copies: each
    test has a database of its own, built once (the world took a process of its own per test, 3 to 5 s)."""
    server = PrivatePostgres()
    try:
        server.init()
        server.start()
        server.template = Template(server)
        server.template.build()
        yield server
    finally:
        server.cleanup()


class Site:
    """This test's database (a copy of the template, the world in it), and the processes of the site."""

    def __init__(self, server: PrivatePostgres, name: str, directory: Path):
        self.server, self.name, self.directory = server, name, directory
        server.execute(f"CREATE DATABASE {name} TEMPLATE osmo_template")
        self.env = env_for(server.url(name), directory)
        self.token = server.template.token
        self.port = free_port()
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str, *args: str) -> None:
        log = (self.directory / f"{name}.log").open("w")
        self.processes[name] = subprocess.Popen([sys.executable, *args], cwd=settings.BASE_DIR, env=self.env,
                                                stdout=log, stderr=subprocess.STDOUT)

    def start_web(self) -> None:
        self.start("web", "-m", "gunicorn", "osmo_site.wsgi:application", "--bind", f"127.0.0.1:{self.port}",
                   "--workers", "1", "--threads", "4", "--timeout", "60")
        until(lambda: self.get("/healthz")[0] == 200, "the web server to answer", seconds=60, every=0.2)

    def log(self, name: str, since: int = 0, tail: int | None = 4000) -> str:
        """The process's log after its first `since` characters (the end of it, `tail` characters)."""
        text = (self.directory / f"{name}.log").read_text()[since:]
        return text[-tail:] if tail else text

    def log_sizes(self) -> dict[str, int]:
        return {name: len((self.directory / f"{name}.log").read_text()) for name in self.processes}

    def alive(self) -> None:
        for name, process in self.processes.items():
            assert process.poll() is None, f"{name} exited {process.returncode}: {self.log(name)}"

    def request(self, path: str, data: dict | None = None) -> tuple[int, dict | str]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=json.dumps(data).encode() if data is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        except OSError as error:
            return 0, str(error)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def get(self, path: str) -> tuple[int, dict | str]:
        return self.request(path)

    def rows(self, sql: str) -> list[tuple]:
        return self.server.rows(sql, self.name)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@pytest.fixture
def site(request, postgres, standin):
    name = f"osmo_{request.node.name[5:40]}".replace("-", "_")
    directory = Path(tempfile.mkdtemp(prefix="osmo-faults-site-"))
    standin.kubeconfig(postgres.template.kubeconfig)  # where the template's backends look for their cluster
    site = Site(postgres, name, directory)
    try:
        yield site
    finally:
        site.stop()
        for name in site.processes:  # shown when the test fails
            print(f"---- {name} ----\n{site.log(name)}")
        if not postgres.running():
            postgres.start()
        shutil.rmtree(directory, ignore_errors=True)


def readyz(site: Site) -> int:
    return site.get("/readyz")[0]


# What each process writes when it meets the database down (and carries on): pools/management/commands/sync.py and
# scheduling/management/commands/schedule.py. The web server's is /readyz answering 503.
MET_THE_OUTAGE = {"sync": "the database: ", "schedule": "Cycle failed, retrying in "}


def outage(site: Site, postgres: PrivatePostgres, while_down=None) -> None:
    """Stops PostgreSQL (as a restart does: every session ended), sees /readyz answer 503, does `while_down`, waits
    until every process has written that it met the outage, and starts it again."""
    assert readyz(site) == 200
    before = site.log_sizes()
    postgres.stop()
    until(lambda: readyz(site) == 503, "/readyz to answer 503 while the database is down", every=0.2)
    if while_down:
        while_down()
    for name, met in MET_THE_OUTAGE.items():
        if name in site.processes:
            until(lambda name=name, met=met: met in site.log(name, since=before[name], tail=None),
                  f"{name} to meet the outage (its log to say {met!r})", every=0.2,
                  detail=lambda name=name: site.log(name))
    assert readyz(site) == 503
    postgres.start()
    until(lambda: readyz(site) == 200, "/readyz to answer 200 once the database is back", every=0.2)


def node_rows(site: Site) -> dict[str, tuple]:
    rows = site.rows("SELECT n.name, n.status, n.unschedulable FROM pools_node n JOIN pools_backend b "
                     "ON b.id = n.backend_id WHERE b.name = 'prod'")
    return {name: (status, unschedulable) for name, status, unschedulable in rows}


def test_a_postgres_restart_during_a_sync_loses_no_node(site, postgres, standin):
    busy_cluster(standin, changes=0)
    site.start("sync", "manage.py", "sync", "prod")
    site.start_web()
    until(lambda: set(node_rows(site)) == {"cpu-a", "gpu-a", "gpu-b"}, "the first sync", every=0.2)

    def cluster_changes() -> None:  # while the database is down: the watch brings them, and they cannot be written
        standin.delete_node("cpu-a")
        standin.add_node(make_node("cpu-d", gpus=0))
        standin.modify_node("gpu-b", {"spec": {"unschedulable": True}})

    standin.add_node(make_node("cpu-c", gpus=0))  # just before: in flight when the database goes
    outage(site, postgres, cluster_changes)
    wanted = {"gpu-a": ("Ready", False), "gpu-b": ("Cordoned", True),
              "cpu-c": ("Ready", False), "cpu-d": ("Ready", False)}
    until(lambda: node_rows(site) == wanted, f"the sync to write what changed during the outage ({wanted})",
          every=0.3)
    site.alive()  # the sync process carried on by itself
    assert "trying again" in site.log("sync")  # it did meet the outage


def workloads(site: Site) -> dict[str, tuple]:
    rows = site.rows("SELECT id::text, name, status, job_name FROM scheduling_workload")
    return {name: (pk, status, job) for pk, name, status, job in rows}


def test_a_postgres_restart_during_an_admission_cycle_loses_no_workload_and_creates_no_second_job(
        site, postgres, standin):
    site.start_web()
    site.start("schedule", "manage.py", "schedule", "--interval", "0.5")
    names = [f"wl-{i}" for i in range(5)]
    for name in names[:2]:
        status, answer = site.request("/api/workloads/", {"name": name, "project": "vision", "image": "busybox",
                                                          "resources": {"gpu": 1}})
        assert status == 201, answer
    until(lambda: {row[1] for row in workloads(site).values()} == {"SCHEDULING"}, "the first dispatches")

    # The next dispatch is held at the API server: the admission cycle's process is in the middle of it.
    standin.hold_next(1, path_prefix="/apis/batch/v1/namespaces/", method="POST")
    for name in names[2:]:
        status, answer = site.request("/api/workloads/", {"name": name, "project": "vision", "image": "busybox",
                                                          "resources": {"gpu": 1}})
        assert status == 201, answer
    until(lambda: standin.held == 1, "the cycle's dispatch to reach the API server")
    outage(site, postgres, standin.release_holds)  # its Job is created while its row cannot be written

    until(lambda: len(workloads(site)) == 5 and {row[1] for row in workloads(site).values()} == {"SCHEDULING"},
          "every workload to be dispatched", every=0.3)
    site.alive()
    rows = workloads(site)
    assert sorted(rows) == names
    jobs: dict[str, list[str]] = {}
    for job in standin.jobs():
        jobs.setdefault(job["metadata"]["labels"][f"{PREFIX}workload"], []).append(job["metadata"]["name"])
    assert {pk: [job] for pk, _, job in rows.values()} == jobs  # one Job each, the one each row names
    # The held create was sent again once the database was back, and answered 409 (AlreadyExists), then read back.
    creates = [r for r in standin.requests if r.method == "POST" and r.path.startswith("/apis/batch/v1/")]
    assert len(creates) == len(names) + 1
