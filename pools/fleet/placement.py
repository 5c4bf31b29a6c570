"""Which pools and platforms each node belongs to, from the stored configuration (docs/concepts.md,
"Backends, pools and platforms").

The selectors come from each platform's effective configuration (merged pod templates, rendered), so a
template change moves nodes exactly as it moves the pods that use it.
"""

from django.db.models import Q

from pools.config.checks import Catalog
from pools.config.documents import PoolDoc
from pools.config.effective import effective_pool
from pools.config.writes import catalog_for, pool_documents_from_db
from pools.inventory.membership import PlatformSelector, PoolSelector
from pools.models import Pool


def pool_selectors(backend_ids: int | list[int]) -> list[PoolSelector]:
    """The pools of the backends `backend_ids` (every backend of one cluster: they share its nodes), and the
    default pool (which collects the nodes of every backend), in name order, with their platforms' effective
    selectors. The default pool's platforms say which of its nodes they can place work on, as any pool's do."""
    ids = [backend_ids] if isinstance(backend_ids, int) else list(backend_ids)
    names = list(
        Pool.objects.filter(Q(backend_id__in=ids) | Q(name=Pool.DEFAULT_NAME)).values_list("name", flat=True)
    )
    documents = {name: PoolDoc.model_validate(doc) for name, doc in pool_documents_from_db(names).items()}
    catalog: Catalog = catalog_for(documents)
    selectors = []
    for name in sorted(documents):
        pool = documents[name]
        platforms = effective_pool(pool, catalog.templates, catalog.validations)["platforms"]
        selectors.append(PoolSelector(
            name=name,
            node_selector=dict(pool.node_selector),
            platforms=[
                PlatformSelector(name, platform, dict(body["node_selector"]), list(body["tolerations"]))
                for platform, body in platforms.items()
            ],
        ))
    return selectors
