"""Cordon and uncordon (`manage.py cordon NODE`, `POST /api/nodes/{name}/cordon`, the node page's button):
`spec.unschedulable` written to the cluster first and then to the database, as labels are
(`pools.fleet.labels`), so the database never says a node is cordoned when the cluster does not."""

from django.db import DatabaseError, transaction

from pools.fleet.labels import find_node, reason_of, store_nodes
from pools.fleet.sync import cluster_for
from pools.models import Node, audit
from pools.models.dbwrites import NotRecorded


def cordon_node(name: str, cordon: bool, *, backend: str | None = None) -> Node:
    """Mark the node unschedulable (`cordon`) or schedulable again; returns its row as now stored, its status
    recomputed ("Cordoned" while cordoned, as the sync would say)."""
    node = find_node(name, backend)
    patched = cluster_for(node.backend).set_unschedulable(name, cordon)
    try:
        with transaction.atomic():
            store_nodes(node.backend, [patched])
            audit.record("node", f"node/{name}", "cordon" if cordon else "uncordon")
    except DatabaseError as exc:
        verb = "cordoned" if cordon else "uncordoned"
        raise NotRecorded(f"node/{name}: {verb} in the cluster but not recorded here ({reason_of(exc)}); "
                          "the next sync will pick it up") from exc
    return Node.objects.select_related("backend").get(pk=node.pk)
