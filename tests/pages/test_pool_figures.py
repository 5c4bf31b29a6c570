"""Per-platform GPU figures, one computation (`usage.platform_figures`) behind the pool page, `describe pool`
and `GET /api/pools/{name}/`; the pool page's figures as links and as a live region."""

import io
import json
import re

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.models import Node, NodeMembership, Pool
from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db
H100 = "NVIDIA-H100-80GB-HBM3"


@pytest.fixture
def mixed(fleet):
    """alpha: 12 nodes, the odd ones H100 on platform h100, the even ones on cpu; some not ready, one cordoned."""
    nodes = make_nodes(12, [ALPHA])
    make_nodes(4, [BRAVO], prefix="other")
    # By hand: make_nodes' rows have no cluster behind them, from whose labels the sync derives platforms and which
    # `cordon` writes first.
    for node in nodes[::2]:
        NodeMembership.objects.filter(node=node).update(platforms=["cpu"])
    Node.objects.filter(name="node-0005").update(unschedulable=True, status="Cordoned")
    return nodes


def expected(platform: str) -> dict:
    """The figures as a Python sum over the nodes: what an admin would add up by hand."""
    nodes = [m.node for m in NodeMembership.objects.filter(pool__name=ALPHA).select_related("node")
             if platform in m.platforms]
    return {"name": platform, "node_count": len(nodes), "gpu_total": sum(n.gpu_total for n in nodes),
            "gpu_used": sum(n.gpu_used for n in nodes), "gpu_unhealthy": sum(n.gpu_unhealthy for n in nodes),
            "gpu_free": sum(n.gpu_free for n in nodes if n.status == "Ready" and not n.unschedulable),
            "gpu_free_not_ready": sum(n.gpu_free for n in nodes if n.status != "Ready" or n.unschedulable)}


def test_the_api_answers_how_many_h100_gpus_are_free_per_platform(api, mixed):
    detail = api.get(f"/api/pools/{ALPHA}/").json()

    platforms = {row["name"]: row for row in detail["platforms"]}
    assert platforms == {"h100": expected("h100"), "cpu": expected("cpu")}
    free_h100 = sum(n.gpu_free for n in Node.objects.filter(memberships__pool__name=ALPHA, gpu_product=H100))
    # Free means usable: the not-ready nodes' free GPUs are counted apart, never in gpu_free.
    assert platforms["h100"]["gpu_free"] + platforms["h100"]["gpu_free_not_ready"] == free_h100
    assert platforms["h100"]["gpu_free"] > 0 and platforms["h100"]["gpu_free_not_ready"] > 0
    assert sum(row["node_count"] for row in detail["platforms"]) == detail["node_count"] == 12


def test_describe_pool_prints_the_same_figures_per_platform(api, mixed):
    out = io.StringIO()
    call_command("describe", "pool", ALPHA, stdout=out)
    lines = out.getvalue().splitlines()
    header = lines.index("Platforms:") + 1
    assert lines[header].split() == ["PLATFORM", "NODES", "GPU", "TOTAL", "USED", "FREE", "FREE", "NOT", "READY",
                                     "UNHEALTHY"]
    h100 = expected("h100")
    assert lines[header + 1].split() == ["h100", *map(str, (h100["node_count"], h100["gpu_total"], h100["gpu_used"],
                                                            h100["gpu_free"], h100["gpu_free_not_ready"],
                                                            h100["gpu_unhealthy"]))]
    out = io.StringIO()
    call_command("describe", "pool", ALPHA, "--format", "json", stdout=out)
    assert json.loads(out.getvalue())["platforms"] == api.get(f"/api/pools/{ALPHA}/").json()["platforms"]


def test_the_pool_page_shows_each_platforms_gpus_linked_to_its_nodes(staff_client, mixed):
    text = body(staff_client.get(f"/pools/{ALPHA}/"))

    platforms = text[text.index('id="platforms-table"'):text.index('id="nodes-region"')]
    h100 = expected("h100")
    assert re.search(rf'<tr data-key="h100".*?data-col="gpu_free" class="num[^"]*"[^>]*><a href="/nodes/\?platform='
                     rf'{ALPHA}%2Fh100&amp;status=Ready&amp;sort=-gpu_free">{h100["gpu_free"]}</a>', platforms, re.S)
    assert re.search(rf'<tr data-key="h100".*?data-col="gpu_free_not_ready" class="num[^"]*"[^>]*>'
                     rf'<a href="/nodes/\?platform='
                     rf'{ALPHA}%2Fh100&amp;status=attention&amp;sort=-gpu_free">{h100["gpu_free_not_ready"]}</a>',
                     platforms, re.S)


def test_every_pool_figure_links_to_the_nodes_table_behind_it(staff_client, mixed):
    text = body(staff_client.get(f"/pools/{ALPHA}/"))
    figures = dict(re.findall(r'<div data-col="([a-z_]+)"><dt>[^<]*</dt><dd><a href="([^"]+)"', text))

    assert figures["node_count"] == f"/nodes/?pool={ALPHA}"
    assert figures["not_ready"] == f"/nodes/?pool={ALPHA}&amp;status=attention"
    assert figures["gpu_free"] == f"/nodes/?pool={ALPHA}&amp;status=Ready&amp;sort=-gpu_free"
    assert figures["gpu_free_not_ready"] == f"/nodes/?pool={ALPHA}&amp;status=attention&amp;sort=-gpu_free"
    # The links' own tables agree with the figures.
    ready = body(staff_client.get(f"/nodes/?pool={ALPHA}&status=Ready&per_page=100"))
    assert f'data-total="{Node.objects.filter(memberships__pool__name=ALPHA, status="Ready").count()}"' in ready


def test_the_live_region_answers_the_new_figures_after_a_node_changes(staff_client, mixed):
    def free_ready() -> str:
        response = fragment(staff_client, f"/pools/{ALPHA}/", "pool-live")
        assert response.status_code == 200 and "Vary" in response
        text = body(response)
        assert text.lstrip().startswith('<div id="pool-live"')
        assert 'id="nodes-table"' not in text  # the region alone
        return re.search(r'data-col="gpu_free"><dt>[^<]*</dt><dd><a [^>]*>([\d,]+)</a>', text).group(1)

    before = int(free_ready())
    Node.objects.filter(name="node-0001").update(status="Not ready (Disk pressure)")  # the sync's, by hand as above

    assert int(free_ready()) == before - Node.objects.get(name="node-0001").gpu_free < before
    # By hand: the pool's configuration write would re-derive make_nodes' memberships from the platforms.
    Pool.objects.filter(name=ALPHA).update(enable_maintenance=True)
    text = body(fragment(staff_client, f"/pools/{ALPHA}/", "pool-live"))
    assert '<span class="status status-warn" id="pool-status" hx-swap-oob="true">MAINTENANCE</span>' in text
    assert 'hx-swap-oob' not in body(staff_client.get(f"/pools/{ALPHA}/"))


def test_a_member_gets_no_live_region_of_a_pool_they_may_not_see(member_client, mixed):
    assert fragment(member_client, f"/pools/{BRAVO}/", "pool-live").status_code == 404
    assert fragment(member_client, f"/pools/{ALPHA}/", "pool-live").status_code == 200


def queries(client, url: str, target: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert fragment(client, url, target).status_code == 200
    return len(captured.captured_queries)


def test_the_live_regions_take_as_many_queries_for_many_nodes_as_for_few(staff_client, fleet):
    make_nodes(2, [ALPHA])
    few = queries(staff_client, f"/pools/{ALPHA}/", "pool-live"), queries(staff_client, "/", "fleet-summary")
    make_nodes(60, [ALPHA, BRAVO], prefix="more")
    many = queries(staff_client, f"/pools/{ALPHA}/", "pool-live"), queries(staff_client, "/", "fleet-summary")
    assert many == few
