"""`./manage.py serve`: the production web server, Celery workers (one per queue group: sync, admission,
lifecycle; pools.management.workers) and beat, as one foreground command.

Each runs as a child process against the database and broker of the environment (DATABASE_URL,
CELERY_BROKER_URL). Ctrl-C, SIGTERM or SIGHUP stops all of them and whatever processes they started; when one of
them exits, the others are stopped and the command exits with its status, so a supervisor (systemd, a container
runtime) sees the failure and restarts.
On Kubernetes each runs in its own Deployment instead (deploy/base).
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from pools.management.stopping import STOP_SIGNALS, stop_children
from pools.management.workers import worker_commands

GUNICORN_CONF = Path(settings.BASE_DIR) / "deploy" / "gunicorn.conf.py"


def commands(*, web: bool, worker: bool, beat: bool, bind: str) -> dict[str, list[str]]:
    python = sys.executable
    chosen = {}
    if web:
        chosen["web"] = [python, "-m", "gunicorn", "osmo_site.wsgi:application", "-c", str(GUNICORN_CONF),
                         "--bind", bind]
    if worker:
        chosen.update(worker_commands("-l", "info"))
    if beat:
        chosen["beat"] = [python, "-m", "celery", "-A", "osmo_site", "beat", "-l", "info"]
    return chosen


class Command(BaseCommand):
    help = "Run the web server (gunicorn), the Celery workers (sync, admission, lifecycle) and beat until stopped."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:8000", help="address:port for the web server")
        parser.add_argument("--no-web", action="store_true", help="do not start the web server")
        parser.add_argument("--no-worker", action="store_true", help="do not start the Celery workers")
        parser.add_argument("--no-beat", action="store_true", help="do not start Celery beat")

    def handle(self, *args, bind, no_web, no_worker, no_beat, **options):
        chosen = commands(web=not no_web, worker=not no_worker, beat=not no_beat, bind=bind)
        if not chosen:
            raise CommandError("nothing to run: --no-web, --no-worker and --no-beat leave no process")
        stopping = []

        def stop(signum, _frame):
            stopping.append(signum)

        for number in STOP_SIGNALS:
            signal.signal(number, stop)
        # Each in a session of its own: only this command signals them (a terminal's Ctrl-C or SIGHUP reaches this
        # command alone, and Celery does not take a second signal for a cold shutdown), and stop_children can
        # kill what a child leaves behind.
        children = {name: subprocess.Popen(argv, start_new_session=True) for name, argv in chosen.items()}
        self.stdout.write(f"Serving: {', '.join(f'{name} (pid {child.pid})' for name, child in children.items())}"
                          f"; the site at http://{bind}/ ; Ctrl-C stops all.")
        self.stdout.flush()
        status = 0
        while not stopping:
            ended = {name: child.returncode for name, child in children.items() if child.poll() is not None}
            if ended:
                name, status = next(iter(ended.items()))
                self.stderr.write(f"serve: {name} exited with status {status}; stopping the others")
                break
            time.sleep(0.2)
        stop_children(children, 30, lambda message: self.stderr.write(f"serve: {message}"))
        if status:
            raise CommandError(f"a process exited with status {status}", returncode=status)
