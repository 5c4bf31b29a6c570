"""`./manage.py sync NAME [--once]`: list and reconcile a backend, then keep watching it."""

import time

from django.core.management.base import BaseCommand
from django.db import InterfaceError, OperationalError, connections

from pools.cluster import ClusterError
from pools.fleet.sync import BackendSync, SyncBusy, cluster_for, new_lease_owner
from pools.management.cli import clear_errors
from pools.models import Backend
from pools.models.dbwrites import is_locked

ROUND_SECONDS = 60
RETRY_SECONDS = 5  # after a round that failed (the API server down, say): the failure is on the backend's page


class Command(BaseCommand):
    help = "Sync one backend's nodes and pods. --once: one full list and reconcile, then exit."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--once", action="store_true")

    @clear_errors
    def handle(self, *args, name, once, **options):
        backend = Backend.objects.filter(name=name).first()
        if backend is None:
            known = ", ".join(Backend.objects.values_list("name", flat=True)) or "none"
            raise ClusterError(f"there is no backend {name!r} (known: {known})")
        cluster = cluster_for(backend)
        try:
            if once:
                self._report(backend, BackendSync(backend, cluster).run(seconds=0))
                return
            self.stdout.write(f"Watching {name}; Ctrl-C to stop.")
            owner = new_lease_owner()
            while True:
                try:
                    self._report(backend, BackendSync(backend, cluster, lease_owner=owner).run(seconds=ROUND_SECONDS))
                except (OperationalError, InterfaceError) as exc:
                    # The next round resumes from the last stored resourceVersion: the events of a batch that was
                    # not written come again.
                    if is_locked(exc):  # the sync already tried again
                        self.stderr.write(f"error: {name}: {exc}, even after retries; starting the next round")
                        continue
                    # The database restarted or does not answer: new connections, once it is back.
                    self.stderr.write(f"error: {name}: the database: {' '.join(str(exc).split())}; trying again in "
                                      f"{RETRY_SECONDS} s")
                    connections.close_all()
                    time.sleep(RETRY_SECONDS)
                except ClusterError as exc:
                    # Recorded on the backend; a watcher keeps going, so it recovers when the cluster answers again.
                    self.stderr.write(f"error: {exc.message}; trying again in {RETRY_SECONDS} s")
                    time.sleep(RETRY_SECONDS)
        except SyncBusy as exc:
            raise ClusterError(f"{exc}; try again when it ends (leases expire by themselves)") from None
        except KeyboardInterrupt:
            self.stdout.write("Stopped.")

    def _report(self, backend, stats) -> None:
        self.stdout.write(
            f"{backend.name}: {backend.nodes.count()} nodes; {stats.relists} lists, {stats.events} events; "
            f"nodes written {stats.nodes_written}, deleted {stats.nodes_deleted}; "
            f"pods written {stats.pods_written}, deleted {stats.pods_deleted}")
        for error in stats.errors:
            self.stderr.write(f"error: {error}")
