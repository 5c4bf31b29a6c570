"""`./manage.py audit list|verify|prune`: read the audit log, check its hash chain, apply its retention."""

import json
import time

from django.core.management.base import CommandError
from django.utils import timezone

from pools.management.cli import CliCommand, clear_errors
from pools.models import AuditEvent
from pools.models.audit import ACTIONS, KINDS, prune, verify


class Command(CliCommand):
    help = "List the audit log, verify its hash chain, or prune rows past OSMO_AUDIT_DAYS."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        listing = sub.add_parser("list", help="Rows newest first (all of them: the CLI runs as the operator).")
        listing.add_argument("--user", default="", help="Exactly this actor (a user name or a process).")
        listing.add_argument("--kind", choices=KINDS)
        listing.add_argument("--object", default="", help="Objects containing this text.")
        listing.add_argument("--action", choices=ACTIONS)
        listing.add_argument("--days", type=int, help="Only the last N days.")
        listing.add_argument("--limit", type=int, default=100, help="At most this many rows (default 100; 0: all).")
        listing.add_argument("--format", choices=("table", "csv", "json"), default="table")
        sub.add_parser("verify", help="Check every row's hash and link; exit 1 naming the first broken one.")
        pruning = sub.add_parser("prune", help="Delete rows older than OSMO_AUDIT_DAYS (leaves a row saying so).")
        pruning.add_argument("--days", type=int, help="Keep this many days instead of OSMO_AUDIT_DAYS.")

    @clear_errors
    def handle(self, *args, verb, **options):
        getattr(self, f"do_{verb}")(options)

    def do_list(self, options):
        if options["limit"] < 0 or (options["days"] is not None and options["days"] < 1):
            raise CommandError("--limit must be 0 or more and --days 1 or more")
        since = timezone.now() - timezone.timedelta(days=options["days"]) if options["days"] else None
        rows = AuditEvent.objects.matching(user=options["user"], kind=options["kind"] or "",
                                           obj=options["object"], action=options["action"] or "", since=since)
        rows = rows.order_by("-id")
        if options["limit"]:
            rows = rows[:options["limit"]]
        # The API's serializer (DRF) and the page's table are loaded only for the format that needs them (cli.py).
        if options["format"] == "json":
            from pools.api.audit import AuditEventSerializer

            self.stdout.write(json.dumps(AuditEventSerializer(rows, many=True).data, indent=2, ensure_ascii=False))
        elif options["format"] == "csv":
            from pools.pages import csv
            from pools.pages.tables import AUDIT, RowContext

            columns = list(AUDIT.columns)
            fields = AUDIT.fields(columns, export=True)
            for chunk in csv.lines(columns, rows.values(*fields), RowContext(staff=True)):
                self.stdout.write(chunk, ending="")
        else:
            for event in rows:
                who = event.actor or event.actor_kind
                if event.token:
                    who += f" (token {event.token})"
                where = f" from {event.address}" if event.address else ""
                self.stdout.write(f"{event.at:%Y-%m-%d %H:%M:%S}  {who}{where}  {event.action} {event.object}"
                                  + (f"  {event.summary}" if event.summary else ""))

    def do_verify(self, options):
        started = time.perf_counter()
        checked, broken = verify()
        seconds = time.perf_counter() - started
        if broken is not None:
            raise CommandError(f"audit row {broken.id} is broken: {broken.reason}. {checked} rows before it are "
                               "intact.")
        self.stdout.write(f"{checked} audit rows verified in {seconds:.1f} s: the chain is intact.")

    def do_prune(self, options):
        if options["days"] is not None and options["days"] < 1:
            raise CommandError("--days must be 1 or more")
        removed = prune(days=options["days"])
        self.stdout.write(f"{removed} audit rows removed." if removed else "Nothing to remove.")

