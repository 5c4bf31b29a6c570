"""`./manage.py label node NODE KEY=VALUE|KEY- ... [--overwrite]` (gpuctl / kubectl syntax)."""

from pools.fleet import labels as pools_labels
from pools.management.cli import CliCommand, clear_errors


class Command(CliCommand):
    help = "Set (KEY=VALUE) or remove (KEY-) managed labels on a node, in the cluster and here."

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=["node"])
        parser.add_argument("node")
        parser.add_argument("labels", nargs="+", metavar="KEY=VALUE|KEY-")
        parser.add_argument("--overwrite", action="store_true", help="Allow changing a label's existing value.")
        parser.add_argument("--backend", help="Needed only when several backends have a node of that name.")

    @clear_errors
    def handle(self, *args, node, labels: list[str], overwrite, backend, **options):
        changes = pools_labels.parse_label_args(labels)
        pools_labels.label_node(node, changes, overwrite=overwrite, backend=backend)
        self.stdout.write(f"node/{node} labeled")

