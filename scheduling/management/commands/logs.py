"""`./manage.py logs JOB [-f]`: gpuctl's `logs` (a job is a workload: its id, an id prefix or its name), the same
reader as `workload logs` (scheduling.management.logs)."""

from pools.management.cli import CliCommand, clear_errors
from scheduling.management.cli import find_user, find_workload, readable_by
from scheduling.management.logs import add_log_arguments, print_log
from scheduling.models import Workload


class Command(CliCommand):
    help = "Print a job's log (gpuctl's `logs JOB`): its replica 0's user container, or --replica, --attempt."

    def add_arguments(self, parser):
        parser.add_argument("job", help="Job id, id prefix (4+ characters) or unique name.")
        add_log_arguments(parser)
        parser.add_argument("--as-user", metavar="USER", help="Only what USER may read.")

    @clear_errors
    def handle(self, *args, job, as_user=None, **options):
        user = find_user(as_user) if as_user else None
        workload = readable_by(user, find_workload(job, Workload.objects.visible_to(user) if user else None))
        print_log(self._write, workload, **{key: options[key] for key in (
            "follow", "replica", "attempt", "tail", "container", "previous")})

    def _write(self, text: str) -> None:
        self.stdout.write(text, ending="")
        self.stdout.flush()
