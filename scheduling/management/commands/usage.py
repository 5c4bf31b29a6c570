"""`./manage.py usage idle` lists running workloads whose every GPU stayed under OSMO_IDLE_GPU_PERCENT for
OSMO_IDLE_GPU_MINUTES (the rows of GET /api/workloads/idle/; every workload, or what `--as-user USER` may see);
`./manage.py usage sample` runs one utilization round now (what beat runs every OSMO_UTILIZATION_INTERVAL s)."""

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from pools.management.cli import add_format, clear_errors, print_json, print_table
from pools.models.visibility import Access
from scheduling.listing import bodies
from scheduling.management.cli import find_user, operator_access
from scheduling.models import Workload
from scheduling.run import utilization


class Command(BaseCommand):
    help = "GPU usage: idle workloads (and one utilization round by hand)."

    def add_arguments(self, parser):
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        idle = verbs.add_parser("idle", help="Running workloads whose GPUs stayed under OSMO_IDLE_GPU_PERCENT for "
                                             "OSMO_IDLE_GPU_MINUTES, longest idle first.")
        idle.add_argument("--as-user", metavar="USER", help="Only what USER may see.")
        add_format(idle)
        verbs.add_parser("sample", help="Read every running workload's GPU utilization now.")

    @clear_errors
    def handle(self, *args, verb, **options):
        getattr(self, verb)(**options)

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
