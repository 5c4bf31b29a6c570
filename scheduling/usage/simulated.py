"""The demo's DCGM figures (OSMO_PROMETHEUS_URL=simulated://dcgm, as `manage.py demo` sets it): the simulated
cluster has no GPUs to measure, so each pod's utilization is made up from its name, the same in every process and
every round. About one pod in four idles under 4 %, the others work at 35-95 % with a slow swing, so the workload
pages show figures and the idle list is not empty. It answers through the same `Source` interface as Prometheus;
the HTTP path is tested against tests/prometheus_standin.py. Pure."""

import hashlib
import math
from collections.abc import Collection
from datetime import datetime

from scheduling.usage.utilization import PodKey

IDLE_SHARE = 4  # one pod in this many idles


def _seed(namespace: str, pod: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{namespace}/{pod}".encode()).digest()[:8], "big")


def base(namespace: str, pod: str) -> float:
    """The pod's average utilization (percent)."""
    seed = _seed(namespace, pod)
    if seed % IDLE_SHARE == 0:
        return 0.5 + (seed >> 8) % 30 / 10  # 0.5 to 3.4
    return 35.0 + (seed >> 8) % 600 / 10  # 35 to 94.9


def swing(namespace: str, pod: str) -> float:
    """How far above its average a working pod peaks; idle pods stay flat."""
    seed = _seed(namespace, pod)
    return 0.0 if seed % IDLE_SHARE == 0 else 5.0 + (seed >> 20) % 50 / 10


class SimulatedDcgm:
    def averages(self, pods: Collection[PodKey], seconds: int, at: datetime) -> dict[PodKey, float]:
        return {(ns, pod): round(base(ns, pod), 1) for ns, pod in pods}

    def peaks(self, pods: Collection[PodKey], seconds: int, at: datetime) -> dict[PodKey, float]:
        return {(ns, pod): round(min(100.0, base(ns, pod) + swing(ns, pod)), 1) for ns, pod in pods}

    def hourly(self, pods: Collection[PodKey], start: datetime, end: datetime) -> dict[PodKey, dict[float, float]]:
        first = math.ceil(start.timestamp() / 3600) * 3600
        hours = range(first, math.floor(end.timestamp() / 3600) * 3600, 3600)
        return {(ns, pod): {float(hour): round(base(ns, pod), 1) for hour in hours} for ns, pod in pods}
