"""CSV downloads: exactly the filtered rows and the chosen columns, in the order shown, streamed."""

import csv
import io
import re
from decimal import Decimal

import pytest
from django.http import StreamingHttpResponse

from pools.fleet import usage
from pools.models import Node
from pools.pages.csv import csv_value, neutralise
from pools.pages.tables import NODES, POOLS, RowContext
from tests.pages.conftest import body
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db


def read(response) -> list[list[str]]:
    return list(csv.reader(io.StringIO(body(response))))


def test_it_streams_utf8_csv_with_a_timestamped_filename(staff_client, fleet):
    make_nodes(2, [ALPHA])

    response = staff_client.get("/nodes/?export=csv")

    assert isinstance(response, StreamingHttpResponse)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert re.fullmatch(r'attachment; filename="nodes-\d{8}-\d{6}\.csv"', response["Content-Disposition"])
    text = body(response)
    assert text.startswith("Node,Status,Pools,")  # no byte-order mark
    assert text.count("\r\n") == 3


def test_the_csv_rows_are_the_filtered_database_rows_in_the_order_and_columns_shown(staff_client, staff, fleet):
    make_nodes(40, [ALPHA])
    make_nodes(10, [BRAVO], prefix="other")
    assert staff_client.post("/tables/nodes/columns/", {"columns": [  # the column chooser
        "gpu_free", "node", "status", "memory_total", "cpu_used", "last_seen"]}).status_code == 302
    query = f"pool={ALPHA}&status=Ready&sort=-gpu_free&per_page=25"

    shown = body(staff_client.get(f"/nodes/?{query}"))
    rows = read(staff_client.get(f"/nodes/?{query}&export=csv"))

    assert rows[0] == ["GPU free", "Node", "Status", "Memory total (bytes)", "CPU used (cores)", "Last seen"]
    expected = Node.objects.filter(memberships__pool__name=ALPHA, status="Ready").order_by("-gpu_free", "name")
    assert rows[1:] == [[str(n.gpu_free), n.name, n.status, str(n.memory_allocatable),
                         str(usage.cores(n.cpu_requested)),
                         usage.last_contact(n.last_seen, n.backend.last_sync_at).isoformat()] for n in expected]
    # Every filtered row, not only the page on screen, and in the same order as the screen.
    assert len(rows) - 1 == expected.count() > 25
    assert re.findall(r'<tr data-key="([^"]+)"', shown) == [row[1] for row in rows[1:26]]


def test_cols_in_the_url_choose_the_columns_and_their_order(staff_client, fleet):
    make_nodes(2, [ALPHA])

    rows = read(staff_client.get("/nodes/?export=csv&cols=storage,node,bogus,labels"))

    assert rows[0] == ["Storage (bytes)", "Node", "Labels"]
    assert rows[1] == ["3456067615356", "node-0000", "nvidia.com/gpu.present=true, rack=r0"]


def test_the_pool_csv_has_the_pool_rows_as_the_api_sums_them(staff_client, fleet):
    make_nodes(3, [ALPHA])

    rows = read(staff_client.get("/?export=csv&sort=-gpu_used"))

    assert rows[0] == ["Pool", "Description", "Status", "Backend", "GPU total", "GPU used", "GPU free",
                       "GPU unhealthy", "GPU guaranteed", "GPU borrowed", "Nodes", "CPU used (cores)",
                       "CPU total (cores)", "Memory used (bytes)", "Memory total (bytes)"]
    api = {row["name"]: row for row in usage.pool_rows()}
    assert [row[0] for row in rows[1:]] == [ALPHA, BRAVO, "default"]
    alpha = dict(zip(rows[0], rows[1], strict=True))
    assert alpha["GPU used"] == str(api[ALPHA]["gpu_used"]) == "3"
    assert alpha["CPU used (cores)"] == str(api[ALPHA]["cpu_used"])
    assert alpha["Description"] == "Alpha <b>team</b>"


def test_the_revision_csv_follows_the_history_filters(staff_client, fleet):
    rows = read(staff_client.get("/config/history/?export=csv&type=pool"))

    assert rows[0] == ["Revision", "Type", "Name", "Action", "Author", "Time", "Description"]
    assert {row[1] for row in rows[1:]} == {"pool"}
    assert {row[2] for row in rows[1:]} >= {ALPHA, BRAVO}


def test_the_platform_csv_of_a_pool_lists_its_effective_platforms(staff_client, fleet):
    rows = read(staff_client.get(f"/pools/{ALPHA}/?export=csv"))

    assert rows[0] == ["Platform", "Default", "Nodes", "GPU total", "GPU used", "GPU free", "Free, not ready",
                       "GPU unhealthy", "Node selector", "Tolerations"]
    assert rows[1] == ["h100", "true", "0", "0", "0", "0", "0", "0", "nvidia.com/gpu.present=true",
                       "nvidia.com/gpu Exists:NoSchedule"]
    assert rows[2][:3] == ["cpu", "false", "0"]


def test_it_neutralises_cells_that_a_spreadsheet_would_run_as_formulas(staff_client, fleet):
    make_nodes(1, [ALPHA], prefix="=HYPERLINK(\"http://x\")", gpu_product="+SUM(A1)", status="@cmd",
               labels={"-k": "v"}, taints=[{"key": "\tk", "effect": "NoSchedule"}])
    make_nodes(1, [ALPHA], prefix="\rcr", gpu_product="-1+2")

    rows = read(staff_client.get("/nodes/?export=csv&cols=node,gpu_product,status,labels,taints,gpu_free"))

    assert ["'=HYPERLINK(\"http://x\")-0000", "'+SUM(A1)", "'@cmd", "'-k=v", "'\tk:NoSchedule", "8"] in rows
    assert ["'\rcr-0000", "'-1+2"] in [row[:2] for row in rows]


# The characters that start a formula, as OWASP's "CSV Injection" lists them: equals, plus, minus, at, tab and
# carriage return; written out here, so that dropping one from the product fails this test instead of shrinking it.
@pytest.mark.parametrize("prefix", ["=", "+", "-", "@", "\t", "\r"])
def test_every_dangerous_first_character_gets_an_apostrophe(prefix):
    assert neutralise(f"{prefix}x") == f"'{prefix}x"


def test_harmless_text_is_left_alone():
    assert neutralise("node-1") == "node-1"
    assert neutralise("a=b") == "a=b"
    assert neutralise("") == ""


def test_figures_stay_numbers_even_when_negative():
    figure = POOLS.by_key["gpu_free"]

    assert csv_value(figure, -3) == -3
    assert csv_value(POOLS.by_key["cpu_used"], Decimal("-0.5")) == Decimal("-0.5")
    assert csv_value(POOLS.by_key["description"], "-3") == "'-3"  # text that merely looks like a number


def test_the_csv_reads_rows_lazily_in_batches(fleet):
    """A generator over an iterator: nothing is read until the response is consumed."""
    make_nodes(2500, [ALPHA])
    from pools.pages import csv as pages_csv

    columns = NODES.choose(["node", "gpu_free"])
    chunks = pages_csv.lines(columns, Node.objects.order_by("name").values(*NODES.fields(columns)).iterator(),
                             RowContext())

    sizes = [chunk.count("\r\n") for chunk in chunks]
    assert sizes == [1001, 1000, 500]
