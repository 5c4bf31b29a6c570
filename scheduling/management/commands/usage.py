"""`./manage.py usage`: usage accounting and GPU utilization.

`usage report --group-by project --month 2026-11 [--format table|csv|json]`: the usage page's table (the same
`reports.report`, every row: operators see everything), as text, CSV (the page's download, byte for byte) or JSON
(the API's body). `usage rollup [--since DATE]` observes the pods and recomputes the touched hours now (beat does it
every OSMO_USAGE_INTERVAL seconds; --since recomputes from a date on); `usage prune` drops what the retention
settings say; `usage demo-history` writes the demo's week. `usage idle` lists running workloads whose every GPU
stayed under OSMO_IDLE_GPU_PERCENT for OSMO_IDLE_GPU_MINUTES (the rows of GET /api/workloads/idle/; every workload,
or what `--as-user USER` may see); `usage sample` runs one utilization round now (what beat runs every
OSMO_UTILIZATION_INTERVAL s)."""


import json

from django.conf import settings
from django.core.management.base import CommandError
from django.utils import timezone

from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models.visibility import Access
from pools.pages import csv
from pools.pages.tables import RowContext
from scheduling.listing import bodies
from scheduling.management.cli import find_user, operator_access
from scheduling.models import Workload
from scheduling.pages import usage as page
from scheduling.run import utilization
from scheduling.usage import demo, observe, reports, rollup
from scheduling.usage.params import GROUPS, PERIOD_CHOICES, ParamError, parse


class Command(CliCommand):
    help = ("Usage accounting: report GPU-hours by department, project, user, pool or platform; roll up; prune; "
            "idle GPUs and one utilization round by hand.")

    def add_arguments(self, parser):
        commands = parser.add_subparsers(dest="action", required=True)
        report = commands.add_parser("report", help="GPU-hours over a period, grouped.")
        report.add_argument("--group-by", default="project", choices=GROUPS)
        report.add_argument("--period", choices=PERIOD_CHOICES)
        report.add_argument("--month", help="YYYY-MM")
        report.add_argument("--from", dest="start", help="A date or ISO time (UTC).")
        report.add_argument("--to", dest="end", help="A date (its end) or ISO time; default now.")
        report.add_argument("--pool", default="")
        report.add_argument("--project", default="")
        report.add_argument("--format", default="table", choices=("table", "csv", "json"))
        run = commands.add_parser("rollup", help="Observe pods and recompute the touched hours now.")
        run.add_argument("--since", help="Recompute every hour from this date or ISO time on.")
        commands.add_parser("prune", help="Drop intervals and hourly rows older than the retention settings.")
        commands.add_parser("demo-history", help="A week of history for the demo (only on a database without any).")
        idle = commands.add_parser("idle", help="Running workloads whose GPUs stayed under OSMO_IDLE_GPU_PERCENT for "
                                                "OSMO_IDLE_GPU_MINUTES, longest idle first.")
        idle.add_argument("--as-user", metavar="USER", help="Only what USER may see.")
        add_format(idle)
        commands.add_parser("sample", help="Read every running workload's GPU utilization now.")

    @clear_errors
    def handle(self, *args, action, **options):
        if action == "rollup":
            since = None
            if options.get("since"):
                try:
                    since = parse({"from": options["since"]}, timezone.now(), max_days=10**6).start
                except ParamError as exc:
                    raise CommandError(f"--since: {exc.message}") from None
            summary = {**observe.observe(), **rollup.run(since=since)}
            self.stdout.write(json.dumps(summary))
            return
        if action == "demo-history":
            self.stdout.write(json.dumps(demo.generate()))
            return
        if action in ("idle", "sample"):
            getattr(self, action)(**options)
            return
        if action == "prune":
            self.stdout.write(json.dumps(rollup.prune()))
            return
        query = {"group_by": options["group_by"], "period": options.get("period") or "",
                 "month": options.get("month") or "", "from": options.get("start") or "",
                 "to": options.get("end") or "", "pool": options["pool"], "project": options["project"]}
        try:
            params = parse(query, timezone.now(), max_days=settings.OSMO_USAGE_MAX_DAYS)
        except ParamError as exc:
            raise CommandError(f"--{exc.field.replace('_', '-')}: {exc.message}") from None
        result = reports.report(params, reports.scope_for(None))
        table = page.table(params.group_by)
        columns = table.default_columns
        rows = sorted(result.rows, key=lambda row: (-row["gpu_hours"], row["group"]))
        if options["format"] == "json":
            self.stdout.write(json.dumps(reports.body(result), default=float, indent=2))
        elif options["format"] == "csv":
            for chunk in csv.lines(columns, [*rows, result.totals], RowContext(None, True)):
                self.stdout.write(chunk, ending="")
        else:
            ctx = RowContext(None, True)
            print_table(self.stdout, [column.label for column in columns],
                        [[column.cell(row, ctx).text for column in columns] for row in [*rows, result.totals]])

    def idle(self, as_user, format, **_):
        user = find_user(as_user) if as_user else None
        access = Access(user) if user else operator_access()
        now = timezone.now()
        rows = (Workload.objects.visible_to(user) if user else Workload.objects.all()).light()
        data = [bodies.idle_row(w, access, now) for w in utilization.idle(rows, now)[:utilization.MAX_IDLE_ROWS]]
        if format == "json":
            print_json(self.stdout, {**utilization.settings_body(), "workloads": data})
            return
        if not settings.OSMO_PROMETHEUS_URL:
            self.stdout.write("GPU utilization is not measured: OSMO_PROMETHEUS_URL is not set.")
            return
        if not data:
            self.stdout.write(f"No workload has had every GPU under {settings.OSMO_IDLE_GPU_PERCENT} % for "
                              f"{settings.OSMO_IDLE_GPU_MINUTES} minutes.")
            return
        print_table(self.stdout, ["ID", "NAME", "PROJECT", "USER", "POOL", "GPUS", "AVG%", "PEAK%", "IDLE FOR"],
                    [[r["id"][:8], r["name"], r["project"], r["submitter"] or "-", r["pool"] or "-", r["gpus"],
                      _percent(r["average_percent"]), _percent(r["peak_percent"]), f"{r['idle_minutes']} min"]
                     for r in data])

    def sample(self, **_):
        done = utilization.sample()
        if done.skipped:
            self.stdout.write(f"Nothing sampled: {done.skipped}.")
        elif done.error:
            self.stdout.write(f"Not measured: {done.error}")
        else:
            self.stdout.write(f"{done.workloads} running workload(s), {done.pods} pod(s): {done.measured} measured, "
                              f"{done.idle} idle.")


def _percent(value) -> str:
    return "-" if value is None else f"{value:.1f}"
