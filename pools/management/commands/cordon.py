"""`./manage.py cordon NODE [--backend B]` (kubectl's `cordon`): no new pods are scheduled on the node."""

from pools.fleet.cordon import cordon_node
from pools.management.cli import CliCommand, clear_errors


class Command(CliCommand):
    help = "Mark a node unschedulable, in the cluster and then here (uncordon undoes it)."
    cordon = True

    def add_arguments(self, parser):
        parser.add_argument("node")
        parser.add_argument("--backend", help="Needed only when several backends have a node of that name.")

    @clear_errors
    def handle(self, *args, node, backend, **options):
        stored = cordon_node(node, self.cordon, backend=backend)
        self.stdout.write(f"node/{node} {'cordoned' if self.cordon else 'uncordoned'} ({stored.status})")
