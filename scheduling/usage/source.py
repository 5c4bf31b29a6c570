"""Where GPU utilization figures come from: what OSMO_PROMETHEUS_URL names (a Prometheus scraping DCGM, or the
demo's `simulated://` source), read by the utilization rounds (`scheduling.run.utilization`) and the usage
rollup alike."""

from django.conf import settings

from scheduling.usage.simulated import SimulatedDcgm
from scheduling.usage.utilization import Prometheus, Source


def source() -> Source | None:
    """What OSMO_PROMETHEUS_URL names, or None when it is unset."""
    url = settings.OSMO_PROMETHEUS_URL
    if not url:
        return None
    if url.startswith("simulated://"):
        return SimulatedDcgm()
    return Prometheus(url, timeout=float(settings.OSMO_PROMETHEUS_TIMEOUT),
                      max_bytes=settings.OSMO_PROMETHEUS_MAX_BYTES)


def kind() -> str:
    """Where the GPU utilization figures come from: "prometheus", "simulated" (the demo's made-up DCGM) or ""
    (none: "not measured")."""
    url = settings.OSMO_PROMETHEUS_URL
    return "" if not url else "simulated" if url.startswith("simulated://") else "prometheus"
