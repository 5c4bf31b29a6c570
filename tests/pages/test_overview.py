"""`/`: the pool table, the fleet cards, the 24-hour charts; and `/pools/<name>/`, describe pool."""

import datetime as dt
import re

import pytest
from django.utils import timezone

from pools.fleet import snapshots
from pools.models import Backend, Node, NodeMembership, Pool
from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA, BRAVO, make_nodes, pool_document
from tests.support.journey import config

pytestmark = pytest.mark.django_db


def row_keys(text: str) -> list[str]:
    return re.findall(r'<tr data-key="([^"]+)"', text)


def test_the_overview_lists_pools_with_their_figures(staff_client, fleet):
    make_nodes(3, [ALPHA])

    text = body(staff_client.get("/"))

    assert row_keys(text) == [ALPHA, BRAVO, "default"]
    assert re.findall(r'<th scope="col" data-col="([^"]+)"', text) == [
        "name", "description", "status", "backend", "gpu_total", "gpu_used", "gpu_free", "gpu_unhealthy",
        "gpu_guaranteed", "gpu_borrowed", "node_count", "cpu_used", "cpu_total", "memory_used", "memory_total"]
    assert f'<a href="/pools/{ALPHA}/">{ALPHA}</a>' in text
    assert "Alpha &lt;b&gt;team&lt;/b&gt;" in text
    assert '<span class="status status-ok">ONLINE' in text


def test_the_fleet_cards_count_each_node_once(staff_client, fleet):
    make_nodes(4, [ALPHA, BRAVO])  # shared: counted in both pool rows, once in the fleet

    text = body(staff_client.get("/"))

    cards = fleet_cards(text)
    assert '<a href="/nodes/" data-testid="card-nodes-figure">4</a>' in cards
    assert "3 ready" in cards and "1 not ready" in cards and "0 of them unknown" in cards
    assert '6</a> <small>of 32 GPUs used</small>' in cards
    usable = sum(n.gpu_free for n in Node.objects.filter(status="Ready", unschedulable=False))
    assert usable < 26  # the not-ready node's free GPUs are shown apart, never as free
    assert f">{usable} free</a>" in cards and ">0 unhealthy</a>" in cards
    assert f">{26 - usable} free on nodes not ready</a>" in cards


def fleet_cards(text: str) -> str:
    return text[text.index('id="fleet-summary"'):text.index("</section>", text.index('id="fleet-summary"'))]


def test_the_fleet_cards_read_whole_numbers_with_their_unit_and_link_to_their_tables(staff_client, fleet):
    make_nodes(3, [ALPHA], cpu_requested=6_674_250, cpu_allocatable=13_863_333, status="Unknown")

    cards = fleet_cards(body(staff_client.get("/")))

    assert '20,023</a> <small>of 41,590 cores requested</small>' in cards
    links = dict((label.strip(), href) for href, label in re.findall(r'<a [^>]*href="([^"]+)"[^>]*>([^<]+)</a>', cards))
    assert '<a href="/nodes/" data-testid="card-nodes-figure">3</a>' in cards
    assert links["3 not ready"] == "/nodes/?status=attention"  # Unknown included, as that filter lists them
    assert links["3 of them unknown"] == "/nodes/?status=Unknown"
    assert links["0 ready"] == "/nodes/?status=Ready"
    # Every node is Unknown: nothing is free to use (their free GPUs are counted apart).
    assert links["H100-80GB-HBM3 0 free"] == "/nodes/?gpu=NVIDIA-H100-80GB-HBM3&amp;sort=-gpu_free"
    assert "A100-SXM4-80GB 0 free" in links
    assert links["21 free on nodes not ready"] == "/nodes/?status=attention&amp;sort=-gpu_free"
    assert links["20,023"] == "/nodes/?sort=-cpu_used"


def test_the_fleet_cards_are_a_live_region_that_answers_the_new_figures(staff_client, fleet):
    nodes = make_nodes(4, [ALPHA])

    def cards():
        response = fragment(staff_client, "/", "fleet-summary")
        assert response.status_code == 200 and "HX-Target" in response["Vary"]
        text = body(response)
        assert text.lstrip().startswith('<section id="fleet-summary"') and 'id="pools-table"' not in text
        return text

    assert "1 not ready" in cards() and 'hx-trigger="every 5s"' in cards()
    Node.objects.filter(pk=nodes[1].pk).update(status="Not ready (Disk pressure)")  # the sync's; no cluster here
    assert "2 not ready" in cards()


def test_pool_status_shows_offline_and_maintenance(staff_client, fleet):
    Backend.objects.update(last_sync_at=timezone.now() - dt.timedelta(days=1))  # by hand: no door dates a sync back
    config("POOL", {"pools": {BRAVO: pool_document(description="Secret", enable_maintenance=True)}})

    text = body(staff_client.get("/"))

    assert '<span class="status status-bad">OFFLINE' in text
    assert '<span class="status status-warn">MAINTENANCE' in text


def test_the_default_pool_is_online_while_every_backend_of_its_nodes_syncs(fleet):
    from pools.fleet.usage import pool_rows

    def default_status():
        return next(row["status"] for row in pool_rows() if row["name"] == "default")

    # By hand: a backend never synced, then silent for a day, then synced, each with a node of the default pool:
    # states of time, which the doors cannot date back.
    other = Backend.objects.create(name="zeta", kind=Backend.objects.get(name="default").kind)
    assert default_status() == "ONLINE"  # no nodes: its own backend, synced
    make_nodes(2, ["default"], prefix="spare")
    Node.objects.create(backend=other, name="zeta-0", status="Ready")
    NodeMembership.objects.create(node=Node.objects.get(name="zeta-0"), pool=Pool.objects.get(name="default"))
    assert default_status() == "OFFLINE"  # zeta never synced
    Backend.objects.filter(pk=other.pk).update(last_sync_at=timezone.now() - dt.timedelta(days=1))
    assert default_status() == "OFFLINE"  # zeta is silent
    Backend.objects.filter(pk=other.pk).update(last_sync_at=timezone.now())
    assert default_status() == "ONLINE"


def test_the_pool_table_filters_and_sorts_from_the_url(staff_client, fleet):
    make_nodes(2, [BRAVO])

    assert row_keys(body(staff_client.get("/?sort=-gpu_used"))) == [BRAVO, ALPHA, "default"]
    assert row_keys(body(staff_client.get("/?q=secret"))) == [BRAVO]
    assert row_keys(body(staff_client.get("/?status=MAINTENANCE"))) == []
    assert "No pool matches these filters." in body(staff_client.get("/?status=MAINTENANCE"))


def test_a_member_without_pools_is_told_so(client, django_user_model, fleet):
    client.force_login(django_user_model.objects.create_user("newcomer"))

    assert "You may not use any pool yet." in body(client.get("/"))


def test_the_overview_fragment_is_the_pool_table_and_the_charts_have_their_own(staff_client, fleet):
    table = body(fragment(staff_client, "/", target="pools-table")).strip()
    charts = body(fragment(staff_client, "/?q=alpha", target="pool-charts")).strip()

    assert table.startswith('<div id="pools-table"') and "fleet-summary" not in table
    assert charts.startswith('<section id="pool-charts"') and "pools-table" not in charts
    assert re.findall(r'data-pool="([^"]+)"', charts) == [ALPHA]


def test_each_pool_has_a_sparkline_of_the_last_24_hours(staff_client, fleet):
    make_nodes(2, [ALPHA])
    now = timezone.now()
    for minutes in (30 * 60, 20, 10, 0):  # one of them older than the window
        snapshots.record(now - dt.timedelta(minutes=minutes))

    text = body(staff_client.get("/"))

    charts = re.findall(r'<li data-testid="chart" data-pool="([^"]+)"', text)
    assert charts == [ALPHA, BRAVO, "default"]
    assert f'<svg class="sparkline" viewBox="0 0 120 28" role="img" aria-label="{ALPHA}: Now 1 of 16 GPUs used and ' \
        "7 free" in text  # node-0001 is not Ready: its 8 free GPUs are not free to use
    assert text.count('<path class="used"') == 3 and 'class="gpu-chart"' not in text  # the large one: pool page


@pytest.mark.parametrize(("interval", "minutes"), [(300, "5 minutes"), (60, "1 minute"), (90, "2 minutes")])
def test_a_pool_without_two_snapshots_says_when_its_first_point_comes(staff_client, fleet, settings, interval,
                                                                        minutes):
    settings.OSMO_USAGE_SNAPSHOT_INTERVAL = interval

    text = body(staff_client.get("/"))

    assert f"Collecting, first point in {minutes}." in text and "record_usage_snapshots" not in text
    assert f"Collecting, first point in {minutes}." in body(staff_client.get(f"/pools/{ALPHA}/"))


def test_a_pool_with_one_snapshot_says_when_the_next_comes(staff_client, fleet, settings):
    settings.OSMO_USAGE_SNAPSHOT_INTERVAL = 600
    snapshots.record(timezone.now() - dt.timedelta(minutes=3, seconds=30))

    assert "Collecting, one point so far; the next in 7 minutes." in body(staff_client.get("/"))


def test_describe_pool_shows_platforms_with_effective_selector_tolerations_and_counts(staff_client, fleet):
    make_nodes(3, [ALPHA])

    text = body(staff_client.get(f"/pools/{ALPHA}/"))

    platforms = text[text.index('id="platforms-table"'):text.index('id="nodes-region"')]
    assert row_keys(platforms) == ["h100", "cpu"]
    assert "nvidia.com/gpu.present=true" in platforms
    assert "nvidia.com/gpu Exists:NoSchedule" in platforms
    assert re.search(rf'data-col="node_count" class="num[^"]*"[^>]*>'
                     rf'<a href="/nodes/\?platform={ALPHA}%2Fh100">3</a><', platforms)


def test_describe_pool_lists_its_nodes_live_its_document_and_recent_revisions(staff_client, fleet):
    make_nodes(2, [ALPHA])
    make_nodes(2, [BRAVO], prefix="other")

    text = body(staff_client.get(f"/pools/{ALPHA}/"))

    nodes = text[text.index('id="nodes-table"'):]
    assert row_keys(nodes)[:2] == ["node-0000", "node-0001"] and "other-0000" not in text
    assert f'hx-get="/nodes/?pool={ALPHA}"' in nodes
    assert "&quot;default_platform&quot;: &quot;h100&quot;" in text
    assert re.search(r'<a href="/config/history/diff/\?type=pool&amp;revision=\d+">Diff</a>', text)
    assert f'href="/config/history/?type=pool&amp;name={ALPHA}"' in text
    assert f'href="/admin/pools/pool/{fleet["alpha"].pk}/change/"' in text


def test_describe_pool_still_opens_when_its_configuration_is_broken(staff_client, fleet):
    Pool.objects.filter(name=ALPHA).update(common_pod_template=["gone"])  # broken on purpose: the door refuses it

    response = staff_client.get(f"/pools/{ALPHA}/")

    assert response.status_code == 200
    assert "The effective configuration cannot be computed" in body(response)


def test_an_unknown_pool_is_404(staff_client, fleet):
    assert staff_client.get("/pools/nope/").status_code == 404


def test_the_snapshot_task_is_scheduled_and_idempotent(fleet, settings):
    from pools.models import UsageSnapshot
    from pools.tasks import record_usage_snapshots

    make_nodes(2, [ALPHA])
    schedule = settings.CELERY_BEAT_SCHEDULE["record-usage-snapshots"]

    assert schedule["task"] == "pools.tasks.record_usage_snapshots"
    assert schedule["schedule"] == float(settings.OSMO_USAGE_SNAPSHOT_INTERVAL)
    assert record_usage_snapshots.apply().get() == 3
    assert record_usage_snapshots.apply().get() == 0  # a doubled or redelivered run writes nothing
    alpha = UsageSnapshot.objects.get(pool__name=ALPHA)
    assert (alpha.node_count, alpha.gpu_total, alpha.gpu_used, alpha.gpu_free) == (2, 16, 1, 7)


def test_old_snapshots_are_dropped(fleet, settings):
    from pools.models import UsageSnapshot

    now = timezone.now()
    snapshots.record(now - dt.timedelta(days=settings.OSMO_USAGE_SNAPSHOT_KEEP_DAYS, hours=1))
    snapshots.record(now)

    assert set(UsageSnapshot.objects.values_list("at", flat=True)) == {now}


def test_a_large_fleets_charts_follow_the_page(staff_client, fleet):
    config("POOL", {"pools": {f"alpha-{index:02d}": {"backend": "default"} for index in range(12)}})

    page = body(staff_client.get("/?status=ONLINE"))
    charts = body(fragment(staff_client, "/?status=ONLINE", target="pool-charts"))
    without_js = body(staff_client.get("/?status=ONLINE&charts=all"))

    assert 'data-testid="chart"' not in page and 'hx-trigger="load, every 60s' in page
    assert 'href="/?status=ONLINE&amp;charts=all#pool-charts">Show the charts</a>' in page
    assert charts.count('data-testid="chart"') == 15 and "load, every" not in charts
    assert without_js.count('data-testid="chart"') == 15
