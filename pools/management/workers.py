"""The Celery workers `manage.py serve` and `manage.py demo` start: one per queue group of
settings.OSMO_WORKER_QUEUES (sync, admission, lifecycle), each with its own node name and concurrency."""

import sys

from django.conf import settings


def worker_commands(*extra: str, pool: str | None = None) -> dict[str, list[str]]:
    """{"worker-sync": argv, ...}; `pool` (threads, solo) replaces Celery's prefork pool."""
    commands = {}
    for name, queues in settings.OSMO_WORKER_QUEUES.items():
        concurrency = getattr(settings, f"OSMO_{name.upper()}_CONCURRENCY")
        argv = [sys.executable, "-m", "celery", "-A", "osmo_site", "worker", *extra, "-Q", ",".join(queues),
                "-n", f"{name}@%h", "--concurrency", str(concurrency)]
        if pool:
            argv += ["--pool", pool]
        commands[f"worker-{name}"] = argv
    return commands
