"""`./manage.py uncordon NODE [--backend B]` (kubectl's `uncordon`): the node takes new pods again."""

from .cordon import Command as Cordon


class Command(Cordon):
    help = "Mark a node schedulable again, in the cluster and then here."
    cordon = False
