"""The pending demand `pools.quotas.demand` asks for: per (project, pool), what the PENDING workloads ask for, all
replicas together, counted in each one's first candidate pool as admission counts it for fair share
(`scheduling.run.snapshot.add_fair_shares`). One grouped query over the pending workloads.

The first pool is cast to text before `__in`: on SQLite (the demo's database) an `__in` on a JSON key wraps each
name in JSON_EXTRACT(name, '$'), which fails on a bare name ("malformed JSON"), so every quota table, `quota list`
and OSMO's `pool list` answered 500 as soon as one workload was pending."""

from django.db.models import F, Sum, TextField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast

from scheduling.models import Status, Workload


def pending_demand(pool_names: list[str]) -> dict[tuple[str, str], tuple[int, int, int]]:
    if not pool_names:
        return {}
    rows = (Workload.objects.filter(status=Status.PENDING, project__isnull=False)
            .annotate(first_pool=Cast(KeyTextTransform("0", "pools"), TextField()))
            .filter(first_pool__in=pool_names)
            .values("project__name", "first_pool")
            .annotate(gpu=Sum(F("gpu") * F("replicas")), cpu=Sum(F("cpu") * F("replicas")),
                      memory=Sum(F("memory") * F("replicas")))
            .order_by())
    return {(row["project__name"], row["first_pool"]): (int(row["gpu"] or 0), int(row["cpu"] or 0),
                                                        int(row["memory"] or 0)) for row in rows}
