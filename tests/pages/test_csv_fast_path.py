"""The PostgreSQL CSV fast path (`COPY ... TO STDOUT`, pools/pages/csv.py) writes exactly the bytes of the
reference Python writer: same rows, same order, same columns, same cells, same quoting and line ends, for
data chosen to be awkward, every column, filters, sorts and a member's scope. Also: the COPY streams after the
view has returned, and a download abandoned half-way leaves the connection usable."""

import datetime as dt

import psycopg
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.models import Backend, Node, NodeMembership, Pool
from pools.pages import csv as pages_csv
from pools.pages.tables import NODES, POOLS
from tests.support.fleet import ALPHA, BRAVO

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

EVERY_NODE_COLUMN = ",".join(column.key for column in NODES.columns)
EVERY_POOL_COLUMN = ",".join(column.key for column in POOLS.columns)
BASE = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)

# name, fields: each node differs from a plain one in the ways the formatting could go wrong.
AWKWARD = [
    ("=HYPERLINK(\"http://x\")", {"gpu_product": "+SUM(A1)", "status": "@cmd", "labels": {"-k": "v", "=k": "@v"},
                                  "taints": [{"key": "\tk", "effect": "NoSchedule"}]}),
    ("-1+2", {"gpu_product": "-1+2", "status": "\rcr", "reasons": ["=bad", "Disk pressure"]}),
    ("\ttab", {"gpu_product": "", "labels": {}, "taints": [], "reasons": [], "last_seen": None}),
    ("nœud-ü-名前", {"gpu_product": "GPU «日本»", "labels": {"é": "1", "z": "2", "Z": "3", "a": "ü", "ä": ""},
                    "taints": [{"key": "k", "value": "", "effect": "NoExecute"},
                               {"key": "k2", "value": None, "effect": "NoSchedule"},
                               {"key": "k3", "value": "v,3", "effect": "Prefer\"NoSchedule\""}]}),
    ("comma,\"quote\"", {"labels": {"a": "x,y", "b": "say \"hi\"", "c": "line\nbreak", "d": "cr\rhere"},
                         "taints": [{"effect": "NoSchedule"}, {"key": "only-key"}]}),
    ("line\nbreak", {"status": "Ready", "gpu_product": "multi\nline"}),
    ("\\.", {"gpu_product": "\\."}),
    ("zeros", {"cpu_allocatable": 0, "cpu_requested": 1, "memory_requested": 0, "gpu_free": -1,
               "last_seen": BASE.replace(microsecond=0)}),
    ("thousands", {"cpu_allocatable": 1000, "cpu_requested": 999, "last_seen": BASE.replace(microsecond=500000)}),
    ("negative", {"cpu_allocatable": 9_000_000_000_123, "cpu_requested": -500, "gpu_unhealthy": -3,
                  "last_seen": BASE.replace(microsecond=1)}),
    ("long-lists", {"pools": [ALPHA, BRAVO, "gone-1", "gone-2", "gone-3"],
                    "taints": [{"key": f"k{i}", "value": f"v{i}", "effect": "NoSchedule"} for i in range(5)]}),
    ("odd-json", {"pools": [BRAVO], "platform_names": [f"{ALPHA}/h100", 7, True, None, {"x": 1}],
                  "reasons": [1, False, None], "labels": {"n": 1, "b": True, "z": None, "s": "text"},
                  "taints": [{"key": "k", "value": 0, "effect": "NoSchedule"},
                             {"key": None, "value": True, "effect": False}]}),
    ("two-pools", {"pools": [BRAVO, ALPHA], "status": "Not ready (Disk pressure)", "unschedulable": True,
                   "sharing": "SHARED"}),
    ("bravo-only", {"pools": [BRAVO], "status": "Unknown", "gpu_product": "NVIDIA-H100-80GB-HBM3"}),
    ("alpha-plain", {}),
]


def make_node(name: str, backend: Backend, **fields) -> Node:
    """A node row with the values the CSV writers must agree on (awkward text, microseconds), by hand: rows as the
    sync writes them, with no cluster behind them."""
    pools = fields.pop("pools", [ALPHA])
    values = {
        "gpu_product": "NVIDIA-A100-SXM4-80GB", "gpu_total": 8, "gpu_allocatable": 8, "gpu_used": 3, "gpu_free": 5,
        "gpu_unhealthy": 0, "cpu_allocatable": 191_450, "cpu_requested": 1_500, "memory_allocatable": 2**40,
        "memory_requested": 2**34, "storage_allocatable": 3_456_067_615_356, "status": "Ready", "reasons": [],
        "labels": {"nvidia.com/gpu.present": "true", "kubernetes.io/hostname": name},
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "pool_names": pools, "platform_names": [f"{pool}/h100" for pool in pools], "sharing": "RESERVED",
        "last_seen": BASE + dt.timedelta(microseconds=123456),
    }
    values.update(fields)
    node = Node.objects.create(backend=backend, name=name, **values)
    known = {pool.name: pool for pool in Pool.objects.filter(name__in=pools)}
    NodeMembership.objects.bulk_create(NodeMembership(node=node, pool=known[name], platforms=["h100"])
                                       for name in pools if name in known)
    return node


@pytest.fixture
def awkward(fleet):
    default = Backend.objects.get(name="default")
    other = Backend.objects.create(name="zz-other", kind=Backend.Kind.SIMULATED)  # by hand, with its node below
    for name, fields in AWKWARD:
        make_node(name, default, **fields)
    make_node("alpha-plain", other)  # the same name on another backend: the tie-breakers decide
    make_node("two-pools", other, pools=[ALPHA, BRAVO], gpu_free=9)
    return fleet


@pytest.fixture
def copies(monkeypatch):
    """How many exports took the COPY path, and how many rows Python had to finish."""
    counts = {"copy": 0, "repaired": 0}
    copy_chunks, repair_row = pages_csv.copy_chunks, pages_csv._Repair.row

    def counting_copy(*args, **kwargs):
        counts["copy"] += 1
        return copy_chunks(*args, **kwargs)

    def counting_row(self, row):
        counts["repaired"] += self.marker_bytes in row
        return repair_row(self, row)

    monkeypatch.setattr(pages_csv, "copy_chunks", counting_copy)
    monkeypatch.setattr(pages_csv._Repair, "row", counting_row)
    return counts


def download(client, url: str, *, fast: bool, monkeypatch) -> bytes:
    monkeypatch.setattr(pages_csv, "FAST_PATH", fast)
    response = client.get(url)
    assert response.status_code == 200, response.status_code
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    return b"".join(response.streaming_content)  # the COPY runs here, after the view has returned


def hang_up(response, monkeypatch) -> None:
    """Close the response half-way, as a server does when the client goes away; the request's end keeps the
    database connection (as it does with CONN_MAX_AGE), so that the test can use and inspect it."""
    with monkeypatch.context() as patch:
        patch.setattr(connection, "close_if_unusable_or_obsolete", lambda: None)
        response.close()


def assert_same(client, url: str, monkeypatch, copies, *, rows: int | None = None, copy: bool = True) -> bytes:
    before = copies["copy"]
    reference = download(client, url, fast=False, monkeypatch=monkeypatch)
    assert copies["copy"] == before, "the reference must not use COPY"
    fast = download(client, url, fast=True, monkeypatch=monkeypatch)
    assert copies["copy"] == before + copy, f"{url}: COPY path {'not ' if copy else ''}taken"
    assert fast == reference, f"{url}\nfast:      {fast!r}\nreference: {reference!r}"
    if rows is not None:  # no cell of these holds CRLF, so CRLF ends rows only
        assert reference.count(b"\r\n") == rows + 1
    return fast


def test_every_node_column_is_byte_for_byte_the_reference(staff_client, awkward, monkeypatch, copies):
    content = assert_same(staff_client, f"/nodes/?export=csv&cols={EVERY_NODE_COLUMN}", monkeypatch, copies,
                          rows=len(AWKWARD) + 2)

    text = content.decode()
    assert text.startswith("Node,Status,Pools,Platforms,GPU type,")
    assert "'=HYPERLINK(\"\"http://x\"\")" in text and "'@cmd" in text and "'-1+2" in text
    assert "é=1" in text and "Z=3, a=ü, z=2, ä=, é=1" in text  # code-point order, as Python sorts
    assert "2026-03-04T05:06:07+00:00" in text and "2026-03-04T05:06:07.500000+00:00" in text
    assert ",-0.5," in text and ",9000000000.123," in text and ",0.001," in text
    assert copies["repaired"] >= 2  # the long lists and the odd JSON were finished by Python


def test_the_default_columns_and_each_column_alone_are_the_reference(staff_client, awkward, monkeypatch, copies):
    assert_same(staff_client, "/nodes/?export=csv", monkeypatch, copies, rows=len(AWKWARD) + 2)
    for column in NODES.columns:  # one column: Python writes an empty cell as "" and a lone \. bare
        assert_same(staff_client, f"/nodes/?export=csv&cols={column.key}", monkeypatch, copies)


@pytest.mark.parametrize("query", [
    f"pool={ALPHA}",
    f"pool={BRAVO}&sort=-gpu_free",
    f"platform={ALPHA}/h100&sort=last_seen",
    f"platform={BRAVO}/h100&sort=-last_seen",
    "status=Not ready&sort=status",
    "status=attention&sort=-status",
    f"pool={ALPHA}&sort=-status",
    "status=Ready&gpu=NVIDIA-A100-SXM4-80GB&sort=-cpu_total",
    "q=plain&sort=backend",
    "q=ü",
    f"q={BRAVO}&sort=-node",
    "sort=-schedulable",
    "sort=sharing",
    "sort=-gpu_product",
])
def test_filtered_and_sorted_exports_are_the_reference(staff_client, awkward, monkeypatch, copies, query):
    assert_same(staff_client, f"/nodes/?export=csv&{query}&cols={EVERY_NODE_COLUMN}", monkeypatch, copies)


def test_a_filter_that_empties_the_table_gives_the_header_alone(staff_client, awkward, monkeypatch, copies):
    content = assert_same(staff_client, "/nodes/?export=csv&pool=no-such-pool", monkeypatch, copies, copy=False)

    assert content.count(b"\r\n") == 1


@pytest.mark.parametrize("query", ["", f"pool={ALPHA}", f"platform={ALPHA}/h100&sort=-gpu_free", "q=two",
                                   "q=pool&sort=-node", f"pool={BRAVO}"])
def test_a_members_export_is_the_reference_within_their_pools(member_client, awkward, monkeypatch, copies, query):
    content = assert_same(member_client, f"/nodes/?export=csv&{query}&cols={EVERY_NODE_COLUMN}", monkeypatch, copies,
                          copy=query != f"pool={BRAVO}")  # not theirs: the table is empty

    assert BRAVO.encode() not in content  # neither bravo's nodes nor its name in a shared node's cells
    if not query:
        assert b"two-pools" in content and b"bravo-only" not in content


def test_the_users_saved_columns_are_the_reference(staff_client, staff, awkward, monkeypatch, copies):
    assert staff_client.post("/tables/nodes/columns/", {"columns": ["taints", "node", "labels", "cpu_used"]}
                             ).status_code == 302  # the column chooser

    content = assert_same(staff_client, "/nodes/?export=csv&sort=-cpu_used", monkeypatch, copies)

    assert content.startswith(b"Taints,Node,Labels,CPU used (cores)\r\n")


def test_the_pools_table_stays_on_the_reference_writer(staff_client, member_client, awkward, monkeypatch, copies):
    """Its rows are summed in Python (usage.pool_rows): there is no queryset to COPY, and no need at 100 rows."""
    for url in ("/?export=csv", f"/?export=csv&cols={EVERY_POOL_COLUMN}&sort=-gpu_free", "/?export=csv&q=alpha"):
        fast = download(staff_client, url, fast=True, monkeypatch=monkeypatch)
        assert fast == download(staff_client, url, fast=False, monkeypatch=monkeypatch)
    assert copies["copy"] == 0
    assert f"{ALPHA},".encode() in fast


def test_the_copy_is_logged_as_a_query_and_streams_after_the_view(staff_client, awkward, monkeypatch):
    with CaptureQueriesContext(connection) as queries:
        response = staff_client.get("/nodes/?export=csv")
        in_view = len(queries.captured_queries)
        content = b"".join(response.streaming_content)
    copies = [query["sql"] for query in queries.captured_queries if query["sql"].startswith("COPY (")]
    assert not any(query["sql"].startswith("COPY (") for query in queries.captured_queries[:in_view])
    assert len(copies) == 1 and "TO STDOUT WITH (FORMAT csv)" in copies[0]  # Django's debug cursor logs it
    assert content.count(b"\r\n") > len(AWKWARD)


def test_a_download_abandoned_half_way_leaves_the_connection_usable(staff_client, awkward, monkeypatch):
    monkeypatch.setattr(pages_csv, "COPY_CHUNK_BYTES", 64)  # many small chunks
    response = staff_client.get(f"/nodes/?export=csv&cols={EVERY_NODE_COLUMN}")
    chunks = iter(response.streaming_content)
    next(chunks), next(chunks)  # the header and the first rows; the COPY is under way
    hang_up(response, monkeypatch)

    assert Node.objects.filter(name="alpha-plain").count() == 2  # the connection answers
    again = b"".join(staff_client.get("/nodes/?export=csv&cols=node").streaming_content)
    assert again.count(b"\r\n") == len(AWKWARD) + 3


@pytest.mark.django_db(transaction=True)
def test_in_autocommit_as_in_production_the_copy_commits_or_rolls_back_its_own_transaction(
        client, django_user_model, monkeypatch):
    """Outside a test transaction: the COPY's transaction ends with the download, finished or abandoned."""
    from pools.config.defaults import init_defaults

    init_defaults(author="tests")
    staff = django_user_model.objects.create_user("ops2", password="pw-ops-456", is_staff=True, is_superuser=True)
    client.force_login(staff)
    default = Backend.objects.get(name="default")
    for index in range(50):
        make_node(f"auto-{index:02d}", default, pools=["default"])
    monkeypatch.setattr(pages_csv, "COPY_CHUNK_BYTES", 64)

    response = client.get("/nodes/?export=csv")
    chunks = iter(response.streaming_content)
    next(chunks), next(chunks)
    assert connection.in_atomic_block  # the COPY's own transaction, open while it streams
    hang_up(response, monkeypatch)
    assert not connection.in_atomic_block
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE

    content = b"".join(client.get("/nodes/?export=csv").streaming_content)
    assert content.count(b"\r\n") == 51
    assert not connection.in_atomic_block
    assert connection.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
