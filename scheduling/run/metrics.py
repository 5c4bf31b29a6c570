"""Prometheus metrics, computed from the database at scrape time (`/metrics`, served by osmo_site.health).

`OsmoCollector` holds no state between scrapes: each `collect()` reads the rows with a fixed number of aggregate
queries (eight, whatever the number of backends, nodes, pools and workloads) and yields gauge families. It
lives here, not in `pools`, because it counts workloads and `pools` never imports `scheduling`.

Families (README "Health and metrics"):

- osmo_backend_sync_age_seconds{backend}: seconds since the backend's last good sync (+Inf if it never synced).
- osmo_backend_sync_error{backend}: 1 while the backend's sync is failing (its last sync error), else 0.
- osmo_backend_engine_refused_objects{backend}: engine objects (KAI's, Kueue's) the cluster refused in the
  backend's last reconcile (pools.schedulers.reconcile; 0 once a run writes them all).
- osmo_nodes{backend,status}: nodes by status ("Ready", "Not ready (...)", "Unknown", ...).
- osmo_pool_nodes{pool}, osmo_pool_gpu_capacity{pool}, osmo_pool_gpu_used{pool}, osmo_pool_gpu_free{pool}:
  as `pool list` shows them (pools.fleet.usage.pools_with_usage).
- osmo_pool_workloads{pool,status}: PENDING workloads count in each of their candidate pools (so a sum over
  pools counts a workload once per candidate); ADMITTED, PREEMPTING, SCHEDULING and RUNNING ones in the pool
  they were admitted to. Every pool has all five series, zeros included.
- osmo_admission_last_cycle_duration_seconds, osmo_admission_last_cycle_age_seconds: the last admission cycle
  (scheduling.run.cycle), absent until one ran.
- osmo_dispatch_errors_last_hour{pool}: workloads that ended FAILED_BACKEND_ERROR (the cluster refused or lost
  their Job) in the last hour, by the pool they were admitted to.
"""

import math
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta

from django.db.models import Count
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from pools.fleet.usage import pools_with_usage
from pools.models import Backend, Node
from scheduling.models import RESERVING, AdmissionState, Status, Workload

DISPATCH_ERROR_WINDOW = timedelta(hours=1)
WORKLOAD_STATUSES = (Status.PENDING, *RESERVING)


class OsmoCollector:
    def __init__(self, now=None):
        self.now = now

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self.now or timezone.now()
        yield from self._backends(now)
        yield self._nodes()
        pools = pools_with_usage()
        yield from self._pool_usage(pools)
        yield self._workloads([pool.name for pool in pools])
        yield from self._admission(now)
        yield self._dispatch_errors(now, [pool.name for pool in pools])

    def _backends(self, now) -> Iterator[GaugeMetricFamily]:
        age = GaugeMetricFamily("osmo_backend_sync_age_seconds",
                                "Seconds since the backend's last good sync (+Inf if it never synced).",
                                labels=["backend"])
        error = GaugeMetricFamily("osmo_backend_sync_error", "1 while the backend's sync is failing, else 0.",
                                  labels=["backend"])
        refused = GaugeMetricFamily("osmo_backend_engine_refused_objects",
                                    "Engine objects the cluster refused in the backend's last reconcile.",
                                    labels=["backend"])
        for name, last_sync_at, sync_error, engine_objects, records in Backend.objects.order_by("name").values_list(
                "name", "last_sync_at", "sync_error", "engine_objects", "engine_refused"):
            age.add_metric([name], (now - last_sync_at).total_seconds() if last_sync_at else math.inf)
            error.add_metric([name], 1 if sync_error else 0)
            count = (engine_objects or {}).get("refused")
            refused.add_metric([name], count if isinstance(count, int) else len(records or []))
        yield age
        yield error
        yield refused

    def _nodes(self) -> GaugeMetricFamily:
        family = GaugeMetricFamily("osmo_nodes", "Nodes by backend and status.", labels=["backend", "status"])
        rows = Node.objects.values_list("backend__name", "status").annotate(n=Count("id")).order_by(
            "backend__name", "status")
        for backend, status, count in rows:
            family.add_metric([backend, status], count)
        return family

    def _pool_usage(self, pools) -> Iterator[GaugeMetricFamily]:
        families = {
            "node_count": GaugeMetricFamily("osmo_pool_nodes", "Nodes in the pool.", labels=["pool"]),
            "gpu_total": GaugeMetricFamily("osmo_pool_gpu_capacity", "GPUs of the pool's nodes (capacity).",
                                           labels=["pool"]),
            "gpu_used": GaugeMetricFamily("osmo_pool_gpu_used", "GPUs of the pool's nodes in use.", labels=["pool"]),
            "gpu_free": GaugeMetricFamily("osmo_pool_gpu_free", "GPUs of the pool's nodes free.", labels=["pool"]),
        }
        for pool in sorted(pools, key=lambda pool: pool.name):
            for attribute, family in families.items():
                family.add_metric([pool.name], getattr(pool, attribute))
        yield from families.values()

    def _workloads(self, pool_names: list[str]) -> GaugeMetricFamily:
        counts: Counter[tuple[str, str]] = Counter()
        # Grouped by the candidate list itself: one row per distinct list, however many workloads wait.
        pending = Workload.objects.filter(status=Status.PENDING).values_list("pools").annotate(n=Count("id"))
        for candidates, count in pending.order_by():
            for pool in dict.fromkeys(candidates or ()):
                counts[pool, Status.PENDING] += count
        held = Workload.objects.filter(status__in=RESERVING, pool__isnull=False).values_list(
            "pool__name", "status").annotate(n=Count("id"))
        for pool, status, count in held.order_by():
            counts[pool, status] += count
        family = GaugeMetricFamily(
            "osmo_pool_workloads",
            "Workloads by pool and status: PENDING ones in each candidate pool, the others in the pool they hold.",
            labels=["pool", "status"])
        for pool in sorted({*pool_names, *(pool for pool, _ in counts)}):
            for status in WORKLOAD_STATUSES:
                family.add_metric([pool, str(status)], counts[pool, status])
        return family

    def _admission(self, now) -> Iterator[GaugeMetricFamily]:
        duration = GaugeMetricFamily("osmo_admission_last_cycle_duration_seconds",
                                     "How long the last admission cycle took.")
        age = GaugeMetricFamily("osmo_admission_last_cycle_age_seconds",
                                "Seconds since the last admission cycle ran.")
        state = AdmissionState.objects.filter(pk=1).values_list("last_cycle_at", "last_cycle").first()
        if state and state[0]:
            last_cycle_at, last_cycle = state
            age.add_metric([], (now - last_cycle_at).total_seconds())
            if isinstance(last_cycle, dict) and "seconds" in last_cycle:
                duration.add_metric([], float(last_cycle["seconds"]))
        yield duration
        yield age

    def _dispatch_errors(self, now, pool_names: list[str]) -> GaugeMetricFamily:
        rows = Workload.objects.filter(status=Status.FAILED_BACKEND_ERROR,
                                       finished_at__gte=now - DISPATCH_ERROR_WINDOW).values_list(
            "pool__name").annotate(n=Count("id")).order_by()
        counts = {pool or "": count for pool, count in rows}
        family = GaugeMetricFamily("osmo_dispatch_errors_last_hour",
                                   "Workloads that ended FAILED_BACKEND_ERROR in the last hour, by pool.",
                                   labels=["pool"])
        for pool in sorted({*pool_names, *counts}):
            family.add_metric([pool], counts.get(pool, 0))
        return family


def exposition(now=None) -> bytes:
    """The metrics in Prometheus text format, from a registry made for this scrape (nothing global)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(OsmoCollector(now))
    return generate_latest(registry)
