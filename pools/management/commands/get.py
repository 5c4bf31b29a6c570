"""`./manage.py get labels NODE [--key KEY]` and `get pools` (gpuctl's `get`)."""

from django.core.management import call_command
from django.core.management.base import BaseCommand

from pools.fleet import labels
from pools.management.cli import add_format, clear_errors, print_json, print_table


class Command(BaseCommand):
    help = "get labels NODE [--key KEY]: a node's labels; get pools: same as `pool list`."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True, metavar="WHAT")
        node_labels = sub.add_parser("labels", help="A node's labels as last synced.")
        node_labels.add_argument("node")
        node_labels.add_argument("--key", help="Only this label.")
        node_labels.add_argument("--backend")
        add_format(node_labels)
        add_format(sub.add_parser("pools", help="Pools with status and GPU counts."))

    @clear_errors
    def handle(self, *args, what, **options):
        if what == "pools":
            call_command("pool", "list", "--format", options["format"], stdout=self.stdout)
            return
        node = labels.find_node(options["node"], options["backend"])
        shown = dict(sorted(node.labels.items()))
        if options["key"]:
            if options["key"] not in shown:
                raise labels.LabelError(f"node {node.name} has no label {options['key']!r}", field="key")
            shown = {options["key"]: shown[options["key"]]}
        if options["format"] == "json":
            print_json(self.stdout, shown)
        else:
            print_table(self.stdout, ["KEY", "VALUE"], [[key, value] for key, value in shown.items()])
