"""`./manage.py delete -f FILE`, `delete pool NAME` (gpuctl's pool deletion) and `delete job NAME` (cancels the
workloads of that name that are still alive, as gpuctl deletes a job)."""

from django.core.management.base import BaseCommand

from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.fleet import poolfiles
from pools.management.cli import author, clear_errors
from scheduling.cli import cancel_now, login
from scheduling.formats import gpuctl_request
from scheduling.management.commands.create import JOB_KINDS, kind_of, read_file
from scheduling.models import ALIVE, Workload


class Command(BaseCommand):
    help = ("Delete pools (remove their labels from nodes and the pool; running pods are left alone), or a job "
            "(cancel the live workloads of that name).")

    def add_arguments(self, parser):
        parser.add_argument("what", nargs="*", metavar="pool|job NAME")
        parser.add_argument("-f", "--file")
        parser.add_argument("--author")

    @clear_errors
    def handle(self, *args, what, file, **options):
        if file and what:
            raise ConfigError("give either -f FILE, `pool NAME` or `job NAME`, not both")
        if file:
            text = read_file(file)
            if kind_of(text) in JOB_KINDS:
                self.delete_job(gpuctl_request(text).name)
                return
            names = [spec.name for spec in poolfiles.parse_pool_file(text)]
        elif len(what) == 2 and what[0] == "pool":
            names = [what[1]]
        elif len(what) == 2 and what[0] == "job":
            self.delete_job(what[1])
            return
        else:
            raise ConfigError("usage: delete -f FILE | delete pool NAME | delete job NAME")
        for name in names:
            outcome = poolfiles.delete_pool(name, author=author(options))
            self.stdout.write(f"pool/{name} deleted ({len(outcome.nodes)} nodes unlabeled)")
            for warning in outcome.warnings:
                self.stderr.write(f"warning: {warning}")

    def delete_job(self, name: str) -> None:
        live = list(Workload.objects.filter(name=name, status__in=ALIVE))
        if not live:
            raise ConfigNotFound(f"There is no live job named {name!r}; `./manage.py get jobs` lists them")
        for workload in live:
            line = cancel_now(None, workload, "deleted with `delete job`", operator=login() or "cli")
            self.stdout.write(f"job/{name} deleted: {line}")
