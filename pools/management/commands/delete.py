"""`./manage.py delete -f FILE` or `delete pool NAME`: gpuctl's pool deletion."""

from django.core.management.base import BaseCommand

from pools.engine import ConfigError
from pools.fleet import poolfiles
from pools.management.cli import author, clear_errors
from pools.management.commands.create import read_pool_file


class Command(BaseCommand):
    help = "Delete pools: remove their labels from nodes and the pool itself. Running pods are left alone."

    def add_arguments(self, parser):
        parser.add_argument("what", nargs="*", metavar="pool NAME")
        parser.add_argument("-f", "--file")
        parser.add_argument("--author")

    @clear_errors
    def handle(self, *args, what, file, **options):
        if file and what:
            raise ConfigError("give either -f FILE or `pool NAME`, not both")
        if file:
            names = [spec.name for spec in read_pool_file(file)]
        elif len(what) == 2 and what[0] == "pool":
            names = [what[1]]
        else:
            raise ConfigError("usage: delete -f FILE | delete pool NAME")
        for name in names:
            outcome = poolfiles.delete_pool(name, author=author(options))
            self.stdout.write(f"pool/{name} deleted ({len(outcome.nodes)} nodes unlabeled)")
            for warning in outcome.warnings:
                self.stderr.write(f"warning: {warning}")
