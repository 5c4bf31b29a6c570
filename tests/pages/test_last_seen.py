"""The nodes tables' "Last seen" is the sync's last contact with the node (a node stored is in its backend's live
picture, so it was seen at the backend's last good sync), not its last change: a node that has not changed for
7 minutes on a backend synced 10 s ago was seen 10 s ago. Its last change stays available as its own column."""

import datetime as dt
import re

import pytest

from pools.fleet.usage import last_contact
from pools.models import Backend, Node
from pools.pages.tables import NODES, RowContext
from tests.pages.conftest import body
from tests.support.fleet import ALPHA, make_nodes

pytestmark = pytest.mark.django_db
T = dt.datetime(2026, 3, 4, 12, 0, 0, tzinfo=dt.UTC)
# The backends' last syncs and the nodes' backends are written by hand: each is a sync at a pinned past moment (T, or
# hours before it), which no door dates back.


def test_last_contact_is_the_later_of_the_last_change_and_the_backends_last_sync():
    assert last_contact(T - dt.timedelta(minutes=7), T) == T
    assert last_contact(T, T - dt.timedelta(minutes=7)) == T  # heard by a round that then failed
    assert last_contact(None, T) == T and last_contact(T, None) == T and last_contact(None, None) is None


def test_a_node_unchanged_for_minutes_on_a_freshly_synced_backend_reads_as_seen_just_now(fleet):
    Backend.objects.filter(name="default").update(last_sync_at=T)
    make_nodes(1, [ALPHA], last_seen=T - dt.timedelta(minutes=7))
    row = Node.objects.values(*NODES.fields(NODES.choose(["last_seen", "last_change"]))).get()
    clock = RowContext(now=T + dt.timedelta(seconds=10))  # the injected clock of the response

    seen = NODES.by_key["last_seen"].cell(row, clock)
    change = NODES.by_key["last_change"].cell(row, clock)

    assert (seen.text, seen.iso) == ("10\xa0s ago", T.isoformat())
    assert (change.text, change.iso) == ("7\xa0min ago", (T - dt.timedelta(minutes=7)).isoformat())


def test_a_silent_backend_leaves_its_nodes_last_seen_at_its_last_contact(fleet):
    Backend.objects.filter(name="default").update(last_sync_at=T - dt.timedelta(hours=2))
    make_nodes(1, [ALPHA], last_seen=T - dt.timedelta(hours=3))
    row = Node.objects.values(*NODES.by_key["last_seen"].fields).get()

    assert NODES.by_key["last_seen"].cell(row, RowContext(now=T)).text == "2\xa0h ago"


def test_the_page_the_csv_and_the_api_show_the_last_contact(staff_client, api, fleet):
    Backend.objects.filter(name="default").update(last_sync_at=T)
    make_nodes(1, [ALPHA], last_seen=T - dt.timedelta(minutes=7))

    page = body(staff_client.get("/nodes/?cols=node,last_seen,last_change"))
    times = re.findall(r'<time datetime="([^"]+)"', page)
    csv = b"".join(staff_client.get("/nodes/?export=csv&cols=node,last_seen,last_change").streaming_content).decode()
    resource = api.get("/api/resources/").json()

    assert times == [T.isoformat(), (T - dt.timedelta(minutes=7)).isoformat()]
    assert csv.splitlines()[1] == f"node-0000,{T.isoformat()},{(T - dt.timedelta(minutes=7)).isoformat()}"
    rows = resource if isinstance(resource, list) else resource["resources"]
    assert [row["last_seen"] for row in rows] == ["2026-03-04T12:00:00Z"]


def test_it_sorts_by_last_contact_in_sql_across_backends(staff_client, fleet):
    Backend.objects.filter(name="default").update(last_sync_at=T)
    other = Backend.objects.create(name="other", last_sync_at=T - dt.timedelta(hours=1))
    # Changed recently on the silent backend; long unchanged on the synced one.
    make_nodes(1, [ALPHA], prefix="quiet", last_seen=T - dt.timedelta(days=1))
    make_nodes(1, [ALPHA], prefix="silent", last_seen=T - dt.timedelta(minutes=30))
    Node.objects.filter(name="silent-0000").update(backend=other)
    make_nodes(1, [ALPHA], prefix="unseen", last_seen=None)
    Node.objects.filter(name="unseen-0000").update(backend=Backend.objects.create(name="new"))

    order = [re.findall(r'<tr data-key="([^"]+)"', body(staff_client.get(f"/nodes/?sort={sort}")))
             for sort in ("last_seen", "-last_seen", "last_change")]

    assert order[0] == ["silent-0000", "quiet-0000", "unseen-0000"]
    assert order[1] == ["quiet-0000", "silent-0000", "unseen-0000"]  # never seen: last either way
    assert order[2] == ["quiet-0000", "silent-0000", "unseen-0000"]
