"""What a notification says and where it may go (pure: no Django). Which status change is which transition, the
text and the JSON body (Slack's and Teams' incoming webhooks both read `text`; the structured fields ride under
`osmo`, which both ignore), and the checks on a webhook URL a user gives (http or https, a size limit, no
credentials in it, and no private address unless the operator allows its host)."""

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

STARTED, COMPLETED, FAILED, PREEMPTED, PENDING = "started", "completed", "failed", "preempted", "pending"
IDLE = "idle"  # a notebook at 80 % of its idle rule or lifetime: stopped soon (issue 43)
TRANSITIONS = (STARTED, COMPLETED, FAILED, PREEMPTED, PENDING, IDLE)
WEBHOOK_MAX_CHARS = 2000
PENDING_MINUTES_RANGE = (1, 7 * 24 * 60)
TEXT_MAX_CHARS = 2000  # a long failure message is cut: the workload's page has it whole


class Refused(ValueError):
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.message, self.field = message, field


def transition_for(status: str, reason: str, *, rescheduled: bool) -> str | None:
    """The transition an attempt's change is, or None for one nobody is told about: a cancel (the user, or staff
    on their behalf, asked for it) and an attempt that failed but is retried (only its end matters)."""
    if status == "RUNNING":
        return STARTED
    if rescheduled:
        return PREEMPTED if reason == "PREEMPTED" else None
    if status == "COMPLETED":
        return COMPLETED
    if status == "FAILED_CANCELED":
        return None
    if status.startswith("FAILED"):
        return FAILED
    return None


@dataclass(frozen=True)
class Change:
    """One transition of one workload, as told."""

    transition: str
    workload_id: str
    name: str
    attempt: int
    status: str
    project: str
    pool: str
    message: str
    at: str  # ISO time


LABELS = {STARTED: "Started (every replica runs)", COMPLETED: "Completed", FAILED: "Failed (not when you cancel it)",
          PREEMPTED: "Preempted (it queues again)", PENDING: "Still pending after the minutes below",
          IDLE: "About to be stopped by an idle rule (a notebook)"}
VERBS = {STARTED: "started", COMPLETED: "completed", FAILED: "failed", PREEMPTED: "was preempted",
         PENDING: "is still pending", IDLE: "will be stopped soon"}


def subject(change: Change) -> str:
    return f"[osmo] {change.name} ({change.workload_id[:8]}) {VERBS[change.transition]}"


def text(change: Change) -> str:
    where = f" in pool {change.pool}" if change.pool else ""
    body = (f"Workload {change.name} ({change.workload_id[:8]}, project {change.project or '-'}, attempt "
            f"{change.attempt}) {VERBS[change.transition]}{where}: {change.status}. {change.message}").strip()
    return body if len(body) <= TEXT_MAX_CHARS else body[:TEXT_MAX_CHARS - 1] + "…"


def slack_escaped(message: str) -> str:
    """Slack reads `<...>` as links and mentions (`<!channel>`): a pod's message must not ping a channel, so
    &, < and > are escaped as Slack documents (Teams shows them as written)."""
    return message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def webhook_body(notification_id: str, change: Change, message: str) -> dict:
    """`text` for Slack and Teams; `osmo` for a receiver of ours, with `id`, the key that is the same on every
    try of this notification (also sent as the Idempotency-Key header), so that a receiver can drop a repeat."""
    return {"text": slack_escaped(message), "osmo": {"id": notification_id, "transition": change.transition,
                                      "workload": change.workload_id, "name": change.name, "attempt": change.attempt,
                                      "status": change.status, "project": change.project, "pool": change.pool,
                                      "at": change.at}}


def check_transitions(values) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(value, str) for value in values):
        raise Refused(f"transitions must be a list of {', '.join(TRANSITIONS)}", "transitions")
    unknown = sorted(set(values) - set(TRANSITIONS))
    if unknown:
        raise Refused(f"unknown transitions {', '.join(unknown)}; choose from {', '.join(TRANSITIONS)}",
                      "transitions")
    return [value for value in TRANSITIONS if value in values]


def check_pending_minutes(value) -> int:
    low, high = PENDING_MINUTES_RANGE
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise Refused(f"pending_minutes must be a whole number from {low} to {high}", "pending_minutes")
    return value


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    """`host` (a name or an address) is among the operator's OSMO_NOTIFY_ALLOWED_HOSTS: names, addresses or
    networks (CIDR)."""
    host = host.lower().strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for entry in allowed:
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == host:
            return True
        if address is not None and "/" in entry:
            try:
                if address in ipaddress.ip_network(entry, strict=False):
                    return True
            except ValueError:
                continue
    return False


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052's well-known prefix: the last 32 bits are an IPv4 address
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215: a site's own translator, never global
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible addresses (::127.0.0.1)


def _global(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_global and not (ip.is_multicast or ip.is_reserved or ip.is_unspecified)


def public(address: str) -> bool:
    """Whether a webhook may reach `address` unasked: not loopback, private, link-local (cloud metadata),
    multicast, reserved or unspecified, nor an IPv6 address that carries such an IPv4 address. Python's
    `is_global` says True for 64:ff9b::a9fe:a9fe (NAT64 to 169.254.169.254), 2002:a9fe:a9fe:: (6to4) and
    ::127.0.0.1, so the IPv4 address inside is unwrapped and judged: a translated address (IPv4-mapped, NAT64)
    by that address alone, the others (6to4, Teredo, IPv4-compatible) by both."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv4Address):
        return _global(ip)
    if ip in _NAT64_LOCAL:
        return False
    if ip.ipv4_mapped is not None:
        return _global(ip.ipv4_mapped)
    if ip in _NAT64:
        return _global(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    inside = [ip.sixtofour] if ip.sixtofour is not None else list(ip.teredo or ())
    if ip in _COMPATIBLE:
        inside.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return _global(ip) and all(_global(v4) for v4 in inside if v4 is not None)


def refused_addresses(addresses: Iterable[str], allowed: Iterable[str]) -> list[str]:
    """Those of `addresses` (every address a webhook's host resolves to, not only the first) a webhook may not
    reach: not public and not allowed by the operator."""
    allowed = list(allowed)
    return [address for address in addresses if not public(address) and not host_allowed(address, allowed)]


def check_webhook_url(url, allowed: Iterable[str] = ()) -> str:
    """The URL as given, or Refused naming `webhook_url`. A host given by name is resolved and checked again at
    each send (`scheduling.run.notify`): a name may point anywhere later."""
    if not isinstance(url, str):
        raise Refused("webhook_url must be a string", "webhook_url")
    url = url.strip()
    if not url:
        return ""
    if len(url) > WEBHOOK_MAX_CHARS:
        raise Refused(f"webhook_url is longer than {WEBHOOK_MAX_CHARS} characters", "webhook_url")
    if any(ord(char) < 33 or ord(char) == 127 for char in url):
        raise Refused("webhook_url may not hold spaces or control characters", "webhook_url")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"webhook_url is not a URL: {exc}", "webhook_url") from None
    if parts.scheme not in ("http", "https"):
        raise Refused("webhook_url must be an http:// or https:// URL", "webhook_url")
    if not parts.hostname:
        raise Refused("webhook_url names no host", "webhook_url")
    if parts.username is not None or parts.password is not None:
        raise Refused("webhook_url may not carry a user name or password", "webhook_url")
    if port == 0:
        raise Refused("webhook_url names port 0", "webhook_url")
    try:
        ipaddress.ip_address(parts.hostname)
        literal = True
    except ValueError:
        literal = False
    if literal and not public(parts.hostname) and not host_allowed(parts.hostname, allowed):
        raise Refused(f"webhook_url points at a private address ({parts.hostname}); an operator may allow it in "
                      "OSMO_NOTIFY_ALLOWED_HOSTS", "webhook_url")
    return url
