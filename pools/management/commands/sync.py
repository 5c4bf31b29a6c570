"""`./manage.py sync NAME [--once]`: list and reconcile a backend, then keep watching it.

SIGTERM, SIGHUP and Ctrl-C stop it cleanly: its lease is released on the way out, so a restart takes it at once.
`--once` beside a sync that holds the lease (a watching `sync NAME`, or the worker's round under `make demo`)
asks that sync for a full list and waits for it, instead of failing."""

import time

from django.core.management.base import BaseCommand, CommandError
from django.db import InterfaceError, OperationalError, connections
from django.utils import timezone

from pools.cluster import ClusterError
from pools.fleet.sync import BackendSync, Lease, SyncBusy, cluster_for, new_lease_owner
from pools.management.cli import clear_errors
from pools.management.stopping import interrupt_on_stop_signals
from pools.models import Backend
from pools.models.dbwrites import is_locked, retry_locked

ROUND_SECONDS = 60
RETRY_SECONDS = 5  # after a round that failed (the API server down, say): the failure is on the backend's page
WAIT_SECONDS = 120.0  # --once beside a running sync: how long to wait for the full list it was asked for
POLL_SECONDS = 0.5


class Command(BaseCommand):
    help = ("Sync one backend's nodes and pods. --once: one full list and reconcile, then exit (beside a running "
            "sync: ask it for one and wait for it).")

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--once", action="store_true")
        parser.add_argument("--wait", type=float, default=WAIT_SECONDS,
                            help=f"--once beside a running sync: seconds to wait for its full list "
                                 f"(default {WAIT_SECONDS:g})")

    def execute(self, *args, **options):
        # `--once` is a one-shot command like the inventory commands (pools.management.cli.CliCommand) and skips the
        # system checks, which import the whole URL configuration (a third of its CPU); the watching sync, which
        # runs for days, still runs them at its start.
        if options.get("once"):
            options["skip_checks"] = True
        return super().execute(*args, **options)

    @clear_errors
    def handle(self, *args, name, once, wait, **options):
        if not 0 <= wait <= 86_400:  # NaN fails this too
            raise CommandError(f"--wait must be a number of seconds from 0 to 86400 (not {wait:g})")
        backend = Backend.objects.filter(name=name).first()
        if backend is None:
            known = ", ".join(Backend.objects.values_list("name", flat=True)) or "none"
            raise ClusterError(f"there is no backend {name!r} (known: {known})")
        cluster = cluster_for(backend)
        owner = new_lease_owner()
        with interrupt_on_stop_signals():
            try:
                if once:
                    self._once(backend, cluster, owner, wait)
                else:
                    self._watch(backend, cluster, owner)
            except KeyboardInterrupt:
                self.stdout.write("Stopped.")
            finally:
                # A run releases its lease itself; this covers a signal between its taking the lease and its `try`.
                Lease(backend, owner=owner).release()

    def _watch(self, backend, cluster, owner: str) -> None:
        name = backend.name
        self.stdout.write(f"Watching {name}; Ctrl-C to stop.")
        self.stdout.flush()
        while True:
            try:
                self._report(backend, BackendSync(backend, cluster, lease_owner=owner).run(seconds=ROUND_SECONDS))
            except SyncBusy as exc:
                raise ClusterError(f"{exc}; try again when it ends (leases expire by themselves)") from None
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

    def _once(self, backend, cluster, owner: str, wait: float) -> None:
        """One full list: this command's own, or, while another sync holds the lease, that sync's, asked for by
        clearing the backend's listed_at (which the sync looks at every second, and sets again when it has listed
        in full). Never a failure: past `wait`, it says that the sync is running and exits 0."""
        deadline = time.monotonic() + wait
        asked_at = None
        while True:
            try:
                self._report(backend, BackendSync(backend, cluster, lease_owner=owner).run(seconds=0))
                return
            except SyncBusy:
                pass
            holder, listed_at = Backend.objects.values_list("sync_lease_owner", "listed_at").get(pk=backend.pk)
            if asked_at is not None and listed_at is not None and listed_at >= asked_at:
                self.stdout.write(f"{backend.name}: listed in full by the running sync ({holder}): "
                                  f"{backend.nodes.count()} nodes")
                return
            if asked_at is None or listed_at is not None:  # not asked yet, or a list begun before the ask ended
                if asked_at is None:
                    self.stdout.write(f"{backend.name}: a sync is running ({holder}); asked it for a full list, "
                                      f"waiting for it (at most {wait:g} s)")
                    self.stdout.flush()
                asked_at = timezone.now()
                retry_locked(lambda: Backend.objects.filter(pk=backend.pk).update(listed_at=None),
                             what=f"backend {backend.name}: ask for a full list")
            if time.monotonic() >= deadline:
                self.stdout.write(f"{backend.name}: the running sync ({holder}) has not listed in full within "
                                  f"{wait:g} s; it keeps the nodes current meanwhile and lists when it can")
                return
            time.sleep(POLL_SECONDS)

    def _report(self, backend, stats) -> None:
        self.stdout.write(
            f"{backend.name}: {backend.nodes.count()} nodes; {stats.relists} lists, {stats.events} events; "
            f"nodes written {stats.nodes_written}, deleted {stats.nodes_deleted}; "
            f"pods written {stats.pods_written}, deleted {stats.pods_deleted}")
        for error in stats.errors:
            self.stderr.write(f"error: {error}")
