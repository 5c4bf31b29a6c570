"""`./manage.py demo`: the site, the Celery workers (sync, admission, lifecycle) and Celery beat, stopped together by
Ctrl-C.
`make demo` migrates and runs `config init` first; this loads the demo pools and reads the simulated
cluster once, so the pages have data before beat's first sync round.

Besides the `default` backend's demo (pools.config.defaults.init_demo), a second simulated backend,
`kai-cluster`, is scheduled by KAI Scheduler (init_kai_demo): its cluster is the simulated "kai" lab (12 DGX H100
nodes in 3 zones of 2 racks, pools/cluster/simulated/fleet.py), with the pool `kai-training` (topology keys zone
and rack) and a quota there for every demo department and project, some small enough that work waits in KAI's
queues with OverLimit or NonPreemptibleOverQuota. Its Queues and Topology are written once the cluster is read."""

import os
import secrets
import subprocess
import sys
import threading
import time

from celery import current_app
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import transaction

from pools.config import writes
from pools.config.defaults import demo_loaded, init_demo
from pools.config.kinds import WriteResult
from pools.fleet.sync import BackendSync, SyncBusy, cluster_for
from pools.management.cli import clear_errors
from pools.management.stopping import interrupt_on_stop_signals, stop_children
from pools.management.supervise import Supervisor
from pools.management.workers import worker_commands
from pools.models import Backend, ConfigKind, Department, Pool, Project, Quota
from pools.quotas.writes import department_docs, project_docs
from pools.schedulers import reconcile

ADMIN_USERNAME = "admin"
DEFAULT_PORT = 8000
PASSWORD_FILE = "admin-password"  # in settings.DATA_DIR
PORT_FILE = "demo-port"  # in settings.DATA_DIR, while the demo serves
READY_WAIT_S = 120  # the login is printed once every process is up, or after this long
KAI_BACKEND = "kai-cluster"
KAI_POOL = "kai-training"
KAI_POOL_DOCUMENT = {
    "description": "Gang training under KAI Scheduler: 12 DGX H100 nodes in 3 zones of 2 racks (topology-aware "
                   "placement by zone and rack)",
    "backend": KAI_BACKEND,
    "default_platform": "h100",
    "default_exec_timeout": "1d",
    "max_exec_timeout": "7d",
    "common_default_variables": {"USER_CPU": 16, "USER_GPU": 1, "USER_MEMORY": "64Gi", "USER_STORAGE": "100Gi"},
    "common_resource_validations": ["default_cpu", "default_memory", "default_storage", "default_gpu"],
    "common_pod_template": ["default_user", "shared_memory"],
    "topology_keys": [{"key": "zone", "label": "topology.kubernetes.io/zone"},
                      {"key": "rack", "label": "topology.kubernetes.io/rack"}],
    "platforms": {"h100": {"description": "DGX H100, 8 GPUs per node", "override_pod_template": ["h100"],
                           "default_variables": {"USER_MEMORY": "128Gi"}}},
}
# GPUs in kai-training (96 in all), (deserved, limit, weight): each fits one of the trickle's gangs, not two at once
# (robotics: two 16-GPU gangs go over its limit; isaac-sim: a second non-preemptible job over its quota).
KAI_QUOTAS = {
    "departments": {"research": (64, 80, "Medium"), "product": (24, 32, "Medium")},
    "projects": {"llm-research": (32, -1, "High"), "perception": (16, 24, "Medium"), "robotics": (8, 16, "Low"),
                 "serving": (16, 24, "High"), "isaac-sim": (8, 8, "Medium")},
}


SIMULATED_DCGM = "simulated://dcgm"


class Command(BaseCommand):
    help = "Serve the demo at http://127.0.0.1:8000 with the Celery workers and beat; Ctrl-C stops them all."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=None,
                            help=f"The site's port ({DEFAULT_PORT}); with --no-serve, the port the login line names "
                                 "(by default the port of the demo serving now).")
        parser.add_argument("--no-serve", action="store_true",
                            help="Only load the demo and create the admin login, print it and exit.")

    @clear_errors
    def handle(self, *args, port, no_serve, **options):
        # `make demo` stopped by `kill` (make passes SIGTERM on), a closed terminal (SIGHUP) or Ctrl-C: the same
        # clean stop, here or while the demo loads (a sync's lease released).
        with interrupt_on_stop_signals():
            try:
                password = self.ensure_admin()
                if not no_serve:
                    # The demo serves simulated DCGM figures (below): its week of history is measured the same way.
                    settings.OSMO_PROMETHEUS_URL = settings.OSMO_PROMETHEUS_URL or SIMULATED_DCGM
                self.load_demo()
                if no_serve:
                    # The port of the demo serving now (kept in .data/ while it serves), else the one asked for.
                    self.say_login(password, port or serving_port() or DEFAULT_PORT)
                else:
                    self.serve(port or DEFAULT_PORT, password)
            except KeyboardInterrupt:
                self.stdout.write("Stopped.")

    def say_login(self, password: str, port: int) -> None:
        self.stdout.write(self.style.SUCCESS(
            f"Admin login: {ADMIN_USERNAME} / {password}   (http://127.0.0.1:{port}/admin/; the password is kept in "
            f"{settings.DATA_DIR / PASSWORD_FILE})"))
        self.stdout.flush()

    def write_line(self, line: str) -> None:
        with self.output_lock:
            self.stdout.write(line)
            self.stdout.flush()

    def serve(self, port: int, password: str) -> None:
        celery = [sys.executable, "-m", "celery", "-A", "osmo_site"]
        commands = {
            "web": [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            # A worker per queue group (sync, admission, lifecycle), so a sync round never delays a cycle or a cancel.
            # Threads: a warm shutdown ends the running sync rounds at once (pools.tasks.end_sync_rounds), so Ctrl-C
            # leaves no lease behind; and each backend's sync holds one of them, so more than the two backends.
            **worker_commands("--loglevel", "INFO", pool="threads"),
            "beat": [*celery, "beat", "--loglevel", "INFO", "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        # Beat also runs the demo's trickle of workload submissions (scheduling.demo), and reads made-up DCGM figures
        # (scheduling.usage.simulated) with a short idle window so the idle list fills within minutes, unless set
        # otherwise.
        env = {"OSMO_DEMO_TRICKLE": "15", "OSMO_PROMETHEUS_URL": SIMULATED_DCGM, "OSMO_IDLE_GPU_MINUTES": "3",
               **os.environ, "PYTHONUNBUFFERED": "1"}
        self.output_lock = threading.Lock()
        supervisor = Supervisor(commands, lambda argv, **kw: subprocess.Popen(
            argv, cwd=settings.BASE_DIR, env=env, start_new_session=True, **kw), self.write_line)
        port_file = settings.DATA_DIR / PORT_FILE
        # The broker's queue declared (the demo's SQLite broker: its tables made here, before the processes that
        # share it start at once and race to make them).
        with current_app.connection_for_write() as connection:
            connection.SimpleQueue(current_app.conf.task_default_queue).close()
        try:
            supervisor.start_all()
            port_file.write_text(f"{port}\n")
            pids = ", ".join(f"{name} (pid {process.pid})" for name, process in supervisor.processes.items())
            self.write_line(f"Serving: {pids}")
            # The login last, below the banners of the site, the workers and beat (once each says it is up).
            late = supervisor.wait_up(READY_WAIT_S)
            if late:
                self.write_line(f"Not up yet after {READY_WAIT_S} s: {', '.join(late)}")
            with self.output_lock:
                self.say_login(password, port)
            # A child that exits is started again (a line says so); one that keeps exiting at once stops the demo.
            while supervisor.check():
                time.sleep(0.5)
            self.stderr.write(f"{', '.join(supervisor.given_up)} kept stopping; stopping the rest.")
        except KeyboardInterrupt:
            self.write_line("Stopping...")
            raise
        finally:
            port_file.unlink(missing_ok=True)
            # TERM to each leader lets Celery stop its own pool children (a warm shutdown).
            stop_children(supervisor.processes, 15, self.stderr.write)

    def load_demo(self) -> None:
        for result in init_demo():
            self.stdout.write(result.summary())
        kai_backend()  # read before its pool is written, so the pool's topology keys are checked against its nodes
        for backend in Backend.objects.filter(kind=Backend.Kind.SIMULATED):
            try:
                BackendSync(backend, cluster_for(backend)).run(seconds=0)
            except SyncBusy:
                continue
            self.stdout.write(f"Simulated backend {backend.name}: {backend.nodes.count()} nodes")
        for result in init_kai_demo():
            self.stdout.write(result.summary())
        for backend in Backend.objects.filter(kind=Backend.Kind.SIMULATED):
            if backend.scheduler == Backend.Scheduler.KAI:
                done = reconcile.run(backend, cluster_for(backend))
                self.stdout.write(f"KAI objects of {backend.name}: "
                                  f"{done.summary() if done else Backend.objects.get(pk=backend.pk).engine_error}")
        for _, line in demo_loaded.send(sender=self.__class__):
            if line:
                self.stdout.write(line)

    def ensure_admin(self) -> str:
        """One admin whose password is kept in .data/, so every `make demo` prints the same login."""
        secret_file = settings.DATA_DIR / PASSWORD_FILE
        if not secret_file.exists():
            secret_file.write_text(secrets.token_urlsafe(12))
            secret_file.chmod(0o600)
        password = secret_file.read_text().strip()
        user, _ = get_user_model().objects.get_or_create(username=ADMIN_USERNAME)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        return password


def serving_port() -> int | None:
    """The port of the demo serving from this data directory now, if one is."""
    try:
        return int((settings.DATA_DIR / PORT_FILE).read_text())
    except (OSError, ValueError):
        return None


def kai_backend() -> Backend | None:
    """The demo's KAI backend, made when missing; None when a backend of that name is something else."""
    backend, created = Backend.objects.get_or_create(
        name=KAI_BACKEND, defaults={"kind": Backend.Kind.SIMULATED, "scheduler": Backend.Scheduler.KAI,
                                    "description": "Simulated cluster scheduled by KAI Scheduler (demo)"})
    if not created and (backend.kind, backend.scheduler) != (Backend.Kind.SIMULATED, Backend.Scheduler.KAI):
        return None
    return backend


def init_kai_demo(author: str = "demo") -> list[WriteResult]:
    """The demo's KAI backend (simulated, scheduler kai), its pool kai-training, and a kai-training quota for each
    demo department and project (KAI_QUOTAS) that has none yet; what exists is left as it is, so it is safe to
    rerun. Needs init_demo's configuration first (the pod templates, validations, departments and projects)."""
    results = []
    with transaction.atomic():
        if kai_backend() is None:
            return results  # someone made the backend something else: not the demo's to change
        if not Pool.objects.filter(name=KAI_POOL).exists():
            results.append(writes.import_document(ConfigKind.POOL, {"pools": {KAI_POOL: KAI_POOL_DOCUMENT}},
                                                  author=author, description="Demo configuration (KAI)"))
        for kind, model, docs, field in ((ConfigKind.DEPARTMENT, Department, department_docs, "department"),
                                         (ConfigKind.PROJECT, Project, project_docs, "project")):
            wanted = KAI_QUOTAS[f"{field}s"]
            have = set(Quota.objects.filter(pool__name=KAI_POOL, **{f"{field}__name__in": wanted})
                       .values_list(f"{field}__name", flat=True))
            names = set(model.objects.filter(name__in=wanted).values_list("name", flat=True)) - have
            if not names:
                continue
            documents = docs(sorted(names))
            for name, document in documents.items():
                deserved, limit, weight = wanted[name]
                document["resources"].append({"node_pool": KAI_POOL, "gpu": {
                    "deserved": deserved, "limit": limit, "over_quota_weight": weight}})
            results.append(writes.import_document(kind, documents, author=author,
                                                  description="Demo configuration (KAI quotas)"))
    return results
