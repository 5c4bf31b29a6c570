"""Node events as rows: written by every path that changes a node's stored row (the sync's recompute, a cordon
or a label through it, a configuration write that moves nodes between pools, a backend marked silent), read by
the node page and `describe node`, dropped after `OSMO_NODE_EVENTS_KEEP_DAYS`. What an event means is
`pools.inventory.node_events`."""

from collections.abc import Callable, Iterable
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from pools.inventory.node_events import describe
from pools.models import Backend, Node, NodeEvent
from pools.models.bulk import copy_or_bulk_create

RECENT = 20


def record(backend: Backend, events: list[tuple[str, str, dict]], at) -> None:
    """Store `events` ((node name, kind, details), in the order they happened) at `at`."""
    copy_or_bulk_create(NodeEvent, [NodeEvent(backend=backend, node=name, at=at, kind=kind, details=details)
                                    for name, kind, details in events])


def recent(backend: Backend, name: str, limit: int = RECENT) -> list[NodeEvent]:
    """The node's latest events, newest first."""
    return list(NodeEvent.objects.filter(backend=backend, node=name).order_by("-at", "-id")[:limit])


def described(node: Node, visible: Callable[[Iterable[str]], list[str]] = list) -> list[dict]:
    """The node's latest events as {at, kind, event}, newest first, naming only the pools `visible` keeps (all
    by default); an event about pools it hides is left out."""
    rows = [{"at": event.at, "kind": event.kind, "event": describe(event.kind, event.details, visible)}
            for event in recent(node.backend, node.name)]
    return [row for row in rows if row["event"]]


def prune(now=None) -> int:
    """Drop events older than the retention; returns how many."""
    now = now or timezone.now()
    deleted, _ = NodeEvent.objects.filter(at__lt=now - timedelta(days=settings.OSMO_NODE_EVENTS_KEEP_DAYS)).delete()
    return deleted
