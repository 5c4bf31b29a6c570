"""Health and metrics endpoints (docs/operations/monitoring.md). None needs a sign-in: no middleware of ours
requires one (pages and API views each declare their access rule, pools.access.scoping), and these views declare
none. They answer GET and HEAD only, so CSRF does not apply.

- /healthz: the process is up. Touches nothing, not even the database.
- /readyz: the database answers a `SELECT 1` and the Celery broker a connection, each within
  OSMO_READY_TIMEOUT seconds; else 503 naming which failed (the details go to the log, not to the caller).
- /metrics: Prometheus text (scheduling.run.metrics), for a bearer of OSMO_METRICS_TOKEN or a caller from
  OSMO_METRICS_ALLOWED_ADDRESSES; 403 for anyone else, 404 while neither is configured.
"""

import hmac
import ipaddress
import logging

from django.conf import settings
from django.db import connections
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from kombu import Connection
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from osmo_site import sqlite_broker
from scheduling.run.metrics import exposition

log = logging.getLogger(__name__)


@never_cache
@require_safe
def healthz(request):
    return JsonResponse({"status": "ok"})


def check_database(alias: str = "default", timeout: float | None = None) -> None:
    """Raises unless the database answers `SELECT 1` within `timeout` seconds. A connection of its own, made
    for this check with the timeouts set (connect and statement), and closed after it: the request's
    connection has no connect timeout and may be a persistent one that a reconnect would hide behind."""
    timeout = settings.OSMO_READY_TIMEOUT if timeout is None else timeout
    wrapper = connections[alias]
    options = dict(wrapper.settings_dict.get("OPTIONS") or {})
    options.pop("pool", None)  # a connection of its own, not one the pool would hand out without the timeouts
    if wrapper.vendor == "postgresql":
        options["connect_timeout"] = max(2, int(timeout + 0.999))  # libpq's minimum is 2 seconds
        options["options"] = f"{options.get('options', '')} -c statement_timeout={int(timeout * 1000)}".strip()
    elif wrapper.vendor == "sqlite":
        options["timeout"] = timeout
    probe = type(wrapper)({**wrapper.settings_dict, "OPTIONS": options}, alias)
    try:
        with probe.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    finally:
        probe.close()


def check_broker(url: str | None = None, timeout: float | None = None) -> None:
    """Raises unless the Celery broker accepts a connection within `timeout` seconds (one attempt, no
    retries). The demo's SQLite broker answers when its file answers a query."""
    url = settings.CELERY_BROKER_URL if url is None else url
    timeout = settings.OSMO_READY_TIMEOUT if timeout is None else timeout
    if url.startswith("sqlite:"):
        with Connection(url, transport=sqlite_broker.Transport,
                        transport_options={"connect_args": {"timeout": timeout}}) as connection:
            connection.default_channel.session.execute(text("SELECT 1"))
        return
    options = {"socket_connect_timeout": timeout, "socket_timeout": timeout, "max_retries": 0}
    with Connection(url, connect_timeout=timeout, transport_options=options) as connection:
        connection.ensure_connection(max_retries=0, timeout=timeout)


CHECKS = {"database": check_database, "broker": check_broker}


@never_cache
@require_safe
def readyz(request):
    checks = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as exc:  # any failure means not ready; the log has the details
            log.warning("readiness: the %s check failed: %s: %s", name, type(exc).__name__, exc)
            checks[name] = "failed"
        else:
            checks[name] = "ok"
    failed = [name for name, result in checks.items() if result != "ok"]
    if failed:
        return JsonResponse({"status": "unavailable", "failed": failed, "checks": checks}, status=503)
    return JsonResponse({"status": "ok", "checks": checks})


def _bearer(request) -> str:
    scheme, _, credentials = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else ""


def _address_allowed(address: str | None, allowed: list[str]) -> bool:
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(network, strict=False) for network in allowed)


def metrics_allowed(request) -> bool:
    """Raises Http404 while neither a token nor addresses are configured (the endpoint is off)."""
    token = settings.OSMO_METRICS_TOKEN
    allowed = settings.OSMO_METRICS_ALLOWED_ADDRESSES
    if not token and not allowed:
        raise Http404("Metrics are off: set OSMO_METRICS_TOKEN or OSMO_METRICS_ALLOWED_ADDRESSES")
    sent = _bearer(request)
    if token and sent and hmac.compare_digest(sent.encode(), token.encode()):
        return True
    return bool(allowed) and _address_allowed(request.META.get("REMOTE_ADDR"), allowed)


@never_cache
@require_safe
def metrics(request):
    if not metrics_allowed(request):
        return JsonResponse({"detail": "Metrics need the scrape token (Authorization: Bearer) or an allowed "
                                       "address (OSMO_METRICS_ALLOWED_ADDRESSES)."}, status=403)
    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
