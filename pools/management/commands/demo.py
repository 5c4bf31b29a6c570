"""`./manage.py demo`: the site, a Celery worker and Celery beat, stopped together by Ctrl-C.
`make demo` migrates and runs `config init` first; this loads the demo pools and reads the simulated
cluster once, so the pages have data before beat's first sync round."""

import os
import secrets
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from pools.config.defaults import init_demo
from pools.fleet.sync import BackendSync, SyncBusy, cluster_for
from pools.management.cli import clear_errors
from pools.models import Backend

ADMIN_USERNAME = "admin"


class Command(BaseCommand):
    help = "Serve the demo at http://127.0.0.1:8000 with a Celery worker and beat; Ctrl-C stops all three."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--no-serve", action="store_true", help="Only create the admin login and exit.")

    @clear_errors
    def handle(self, *args, port, no_serve, **options):
        password = self.ensure_admin()
        self.load_demo()
        self.stdout.write(self.style.SUCCESS(
            f"Admin login: {ADMIN_USERNAME} / {password}   (http://127.0.0.1:{port}/admin/)"))
        if no_serve:
            return
        celery = [sys.executable, "-m", "celery", "-A", "osmo_site"]
        commands = {
            "web": [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
            "worker": [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"],
            "beat": [*celery, "beat", "--loglevel", "INFO", "--schedule", settings.CELERY_BEAT_SCHEDULE_FILENAME],
        }
        # Beat also runs the demo's trickle of workload submissions (scheduling.demo), unless set otherwise.
        env = {"OSMO_DEMO_TRICKLE": "15", **os.environ}
        processes = {name: subprocess.Popen(cmd, cwd=settings.BASE_DIR, env=env, start_new_session=True)
                     for name, cmd in commands.items()}
        try:
            while all(process.poll() is None for process in processes.values()):
                time.sleep(0.5)
            dead = [name for name, process in processes.items() if process.poll() is not None]
            self.stderr.write(f"{', '.join(dead)} stopped; stopping the rest.")
        except KeyboardInterrupt:
            self.stdout.write("Stopping...")
        finally:
            # TERM to each leader lets Celery stop its own pool children (a warm shutdown).
            for process in processes.values():
                if process.poll() is None:
                    process.terminate()
            for process in processes.values():
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    def load_demo(self) -> None:
        for result in init_demo():
            self.stdout.write(result.summary())
        for backend in Backend.objects.filter(kind=Backend.Kind.SIMULATED):
            try:
                BackendSync(backend, cluster_for(backend)).run(seconds=0)
            except SyncBusy:
                continue
            self.stdout.write(f"Simulated backend {backend.name}: {backend.nodes.count()} nodes")

    def ensure_admin(self) -> str:
        """One admin whose password is kept in .data/, so every `make demo` prints the same login."""
        secret_file = settings.DATA_DIR / "admin-password"
        if not secret_file.exists():
            secret_file.write_text(secrets.token_urlsafe(12))
            secret_file.chmod(0o600)
        password = secret_file.read_text().strip()
        user, _ = get_user_model().objects.get_or_create(username=ADMIN_USERNAME)
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        return password
