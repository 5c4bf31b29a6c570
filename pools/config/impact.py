"""The fleet side of a configuration write: where every node sits, read before and after the write (whose
hooks re-place the nodes in the same transaction), compared by `pools.inventory.impact`."""

from pools.inventory.impact import Impact, placement_impact
from pools.models import ConfigKind, Node

# The kinds whose writes move nodes: pools, and the pod templates that their platforms select nodes by.
MOVES_NODES = frozenset({ConfigKind.POOL, ConfigKind.POD_TEMPLATE})


def placement() -> dict[int, tuple[list[str], int]]:
    """Every node's pools and GPUs, by node id: one query over the denormalised columns the sync writes."""
    return {node_id: (pools, gpus) for node_id, pools, gpus in
            Node.objects.order_by().values_list("id", "pool_names", "gpu_total")}


def impact_since(before: dict[int, tuple[list[str], int]]) -> Impact:
    return placement_impact(before, placement())
