"""`./manage.py delete -f FILE`, `delete pool NAME` (gpuctl's pool deletion) and `delete job NAME` (cancels the
workloads of that name that are still alive, as gpuctl deletes a job; `--as-user USER` cancels as USER, who must be
their submitter or staff, as `workload cancel --as-user` and `create -f --as-user` act for USER)."""

from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.fleet import poolfiles
from pools.management.cli import CliCommand, author, clear_errors
from scheduling.management.cli import cancel_now, find_user, login
from scheduling.management.commands.create import JOB_KINDS, kind_of, read_file
from scheduling.models import ALIVE, Workload
from scheduling.specs.formats import gpuctl_request


class Command(CliCommand):
    help = ("Delete pools (remove their labels from nodes and the pool; running pods are left alone), or a job "
            "(cancel the live workloads of that name).")

    def add_arguments(self, parser):
        parser.add_argument("what", nargs="*", metavar="pool|job NAME")
        parser.add_argument("-f", "--file")
        parser.add_argument("--author")
        parser.add_argument("--as-user", metavar="USER", help="Delete a job as USER (its submitter or staff; "
                                                              "default: as the operator).")

    @clear_errors
    def handle(self, *args, what, file, as_user=None, **options):
        if file and what:
            raise ConfigError("give either -f FILE, `pool NAME` or `job NAME`, not both")
        if file:
            text = read_file(file)
            if kind_of(text) in JOB_KINDS:
                self.delete_job(gpuctl_request(text).name, as_user)
                return
            names = [spec.name for spec in poolfiles.parse_pool_file(text)]
        elif len(what) == 2 and what[0] == "pool":
            names = [what[1]]
        elif len(what) == 2 and what[0] == "job":
            self.delete_job(what[1], as_user)
            return
        else:
            raise ConfigError("usage: delete -f FILE | delete pool NAME | delete job NAME [--as-user USER]")
        if as_user:
            raise ConfigError("--as-user: pools are deleted by the operator; it applies to jobs only")
        for name in names:
            outcome = poolfiles.delete_pool(name, author=author(options))
            self.stdout.write(f"pool/{name} deleted ({len(outcome.nodes)} nodes unlabeled)")
            for warning in outcome.warnings:
                self.stderr.write(f"warning: {warning}")

    def delete_job(self, name: str, as_user: str | None) -> None:
        user = find_user(as_user) if as_user else None
        rows = Workload.objects.visible_to(user) if user else Workload.objects.all()
        live = list(rows.filter(name=name, status__in=ALIVE))
        if not live:
            raise ConfigNotFound(f"There is no live job named {name!r}; `./manage.py get jobs` lists them")
        for workload in live:
            try:
                line = cancel_now(user, workload, "deleted with `delete job`") if user else \
                    cancel_now(None, workload, "deleted with `delete job`", operator=login() or "cli")
            except PermissionError as exc:
                raise ConfigError(f"job/{name}: {exc}") from None
            self.stdout.write(f"job/{name} deleted: {line}")
