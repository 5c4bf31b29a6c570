"""Usage history: beat runs `pools.tasks.record_usage_snapshots`, which stores one UsageSnapshot per pool
(the same sums as the pool table, from `usage.pools_with_usage`) and drops rows older than the retention."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pools.fleet.usage import pools_with_usage
from pools.models import UsageSnapshot


def interval() -> timedelta:
    return timedelta(seconds=settings.OSMO_USAGE_SNAPSHOT_INTERVAL)


def record(now: datetime | None = None) -> int:
    """One snapshot per pool; returns how many were written. Idempotent: a second run within half an
    interval of the last one (a redelivered or doubled task) writes nothing."""
    now = now or timezone.now()
    with transaction.atomic():
        if UsageSnapshot.objects.filter(at__gt=now - interval() / 2, at__lte=now).exists():
            return 0
        snapshots = [
            UsageSnapshot(pool=pool, at=now, node_count=pool.node_count, gpu_total=pool.gpu_total,
                          gpu_used=pool.gpu_used, gpu_free=pool.gpu_free, gpu_unhealthy=pool.gpu_unhealthy,
                          cpu_total=pool.cpu_total, cpu_used=pool.cpu_used, memory_total=pool.memory_total,
                          memory_used=pool.memory_used)
            for pool in pools_with_usage()
        ]
        UsageSnapshot.objects.bulk_create(snapshots, batch_size=1000)
        UsageSnapshot.objects.filter(at__lt=now - timedelta(days=settings.OSMO_USAGE_SNAPSHOT_KEEP_DAYS)).delete()
    return len(snapshots)
