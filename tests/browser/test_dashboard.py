"""The dashboard in Chromium, against pytest-django's live server: sign in through the form, filter, sort,
choose columns, download the CSV, watch the live refresh, follow a pool to its history, and capture each page
for the README (`docs/screenshots/`). Every expectation is read back from the database."""

import csv
import io
import re

import pytest
from playwright.sync_api import expect

from pools.fleet.usage import last_contact
from pools.models import ConfigKind, ConfigRevision, Node, NodeMembership, Pool, TablePreference
from tests.support.browser import HANG_MS, PASSWORD, USERNAME, sign_in
from tests.support.fleet_with_history import POOLS
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)

# ---- helpers ---------------------------------------------------------------------------------------------

def shown_keys(page, table: str = "nodes") -> list[str]:
    return page.locator(f"#{table}-table tr[data-testid=row]").evaluate_all("rows => rows.map(r => r.dataset.key)")


def shown_cells(page, key: str, table: str = "nodes") -> list[str]:
    return [text.strip() for text in
            page.locator(f"#{table}-table tr[data-testid=row] [data-col={key}]").all_inner_texts()]


def header_keys(page, table: str = "nodes") -> list[str]:
    return page.locator(f"#{table}-table thead th[data-col]").evaluate_all("cells => cells.map(c => c.dataset.col)")


def rows_become(page, expected: list[str], table: str = "nodes", timeout: float = 60) -> list[str]:
    """The row keys once they equal `expected` (within `timeout` seconds, else the test fails saying what it saw)."""
    until(lambda: shown_keys(page, table) == expected, f"the {table} rows to become {expected}", seconds=timeout,
          detail=lambda: f"shown: {shown_keys(page, table)}")
    return expected


def pool_nodes(pool: str, *order: str, **filters) -> list[Node]:
    return list(Node.objects.filter(memberships__pool__name=pool, **filters).order_by(*order, "name"))


def names(nodes) -> list[str]:
    return [node.name for node in nodes]


def choose_columns(page, *, hide: list[str], show: list[str]) -> None:
    page.click("#nodes-columns-toggle")
    for key in hide:
        page.uncheck(f"#col-nodes-{key}")
    for key in show:
        page.check(f"#col-nodes-{key}")
    with page.expect_navigation():
        page.click("#nodes-columns-save")


DEFAULT_COLUMNS = ["node", "status", "pools", "platforms", "gpu_product", "gpu_total", "gpu_used", "gpu_free",
                   "gpu_unhealthy", "cpu_used", "cpu_total", "memory_used", "memory_total", "storage", "taints",
                   "last_seen"]


# ---- tests -----------------------------------------------------------------------------------------------

def test_a_staff_user_signs_in_through_the_login_form_and_sees_every_pool(live_server, page, fleet_with_history,
        screenshot):
    page.goto(f"{live_server.url}/")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/$"))  # the pages need a signed-in user
    screenshot(page, "login")

    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", "not-the-password")
    page.click("button[type=submit]")
    expect(page.get_by_role("alert")).to_contain_text("did not match")

    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator("#nav-user")).to_have_text(USERNAME)

    pools = list(Pool.objects.order_by("name"))
    assert shown_keys(page, "pools") == [pool.name for pool in pools]
    for pool in pools:
        members = Node.objects.filter(memberships__pool=pool)
        row = page.locator(f"#pools-table tr[data-key='{pool.name}']")
        expect(row.locator("[data-col=node_count]")).to_have_text(str(members.count()))
        expect(row.locator("[data-col=gpu_total]")).to_have_text(str(sum(n.gpu_total for n in members)))
        # Free means usable: only Ready, uncordoned nodes' free GPUs.
        expect(row.locator("[data-col=gpu_free]")).to_have_text(
            str(sum(n.gpu_free for n in members if n.status == "Ready" and not n.unschedulable)))
        expect(row.locator("[data-col=status]")).to_have_text("ONLINE")
    nodes = Node.objects.all()
    expect(page.locator("[data-testid=card-nodes] .figure")).to_have_text(str(nodes.count()))
    expect(page.locator("[data-testid=card-nodes]")).to_contain_text(
        f"{nodes.exclude(status='Ready').count()} not ready")  # Unknown included, as ?status=attention lists them
    expect(page.locator("[data-testid=card-gpus] .figure")).to_have_text(
        f"{sum(n.gpu_used for n in nodes)} of {sum(n.gpu_total for n in nodes)} GPUs used")  # each node once
    expect(page.locator("#pool-charts svg").first).to_be_visible()
    screenshot(page, "overview", full_page=True)

    page.click("#nav-user")
    page.wait_for_url(f"{live_server.url}/profile/permissions/")
    expect(page.locator("h1")).to_have_text("Effective permissions")
    expect(page.locator("main")).to_contain_text(f"Signed in as {USERNAME}")
    screenshot(page, "permissions")


def test_filtering_the_nodes_by_pool_shows_exactly_the_nodes_of_that_pool(live_server, page, fleet_with_history,
        screenshot):
    sign_in(page, live_server, "/nodes/")
    assert shown_keys(page) == names(Node.objects.order_by("name"))
    screenshot(page, "nodes")  # the default columns fit 1440 px (tests/browser/test_layout.py)

    page.select_option("#filter-pool", "inference")
    page.wait_for_url(re.compile(r"/nodes/\?pool=inference$"))
    expected = pool_nodes("inference")
    assert rows_become(page, names(expected)) == names(expected)
    assert shown_cells(page, "status") == [node.status for node in expected]
    assert shown_cells(page, "gpu_product") == [node.gpu_product for node in expected]
    assert [re.split(r"\s*[\n,]\s*", cell) for cell in shown_cells(page, "pools")] == [node.pool_names
                                                                                     for node in expected]
    assert all("inference" in node.pool_names for node in expected)
    expect(page.locator("#nodes-count")).to_have_text(f"{len(expected)} rows (filtered)")

    # A node shared with another pool is listed under both, and a second filter narrows the first.
    page.select_option("#filter-pool", "simulation")
    page.select_option("#filter-status", "Ready")
    page.wait_for_url(re.compile(r"pool=simulation&status=Ready$"))
    expected = pool_nodes("simulation", status="Ready")
    assert expected and len(expected) < len(pool_nodes("simulation"))
    assert rows_become(page, names(expected)) == names(expected)


def test_sorting_by_gpu_free_orders_the_rows_as_the_database_does_both_ways(live_server, page, fleet_with_history):
    sign_in(page, live_server, "/nodes/?pool=training")
    assert shown_keys(page) == names(pool_nodes("training"))

    page.click("#sort-nodes-gpu_free")  # a figure sorts largest first on the first click
    page.wait_for_url(re.compile(r"sort=-gpu_free"))
    expect(page.locator("#nodes-table th[data-col=gpu_free]")).to_have_attribute("aria-sort", "descending")
    expected = pool_nodes("training", "-gpu_free")
    assert rows_become(page, names(expected)) == names(expected)
    free = [int(cell) for cell in shown_cells(page, "gpu_free")]
    assert free == [node.gpu_free for node in expected] and free == sorted(free, reverse=True)
    assert len(set(free)) > 3  # the order means something

    page.click("[data-testid=sort-gpu_free]")
    page.wait_for_url(re.compile(r"sort=gpu_free"))
    expect(page.locator("#nodes-table th[data-col=gpu_free]")).to_have_attribute("aria-sort", "ascending")
    expected = pool_nodes("training", "gpu_free")
    assert rows_become(page, names(expected)) == names(expected)
    free = [int(cell) for cell in shown_cells(page, "gpu_free")]
    assert free == [node.gpu_free for node in expected] and free == sorted(free)
    assert "pool=training" in page.url  # the filter survives the sort
    expect(page.locator("#filter-pool")).to_have_value("training")


def test_the_column_chooser_changes_the_header_and_is_remembered_after_a_reload(live_server, page, fleet_with_history,
        staff):
    sign_in(page, live_server, "/nodes/")
    assert header_keys(page) == DEFAULT_COLUMNS
    page.select_option("#filter-pool", "simulation")
    page.wait_for_url(re.compile(r"pool=simulation$"))
    assert rows_become(page, names(pool_nodes("simulation"))) == names(pool_nodes("simulation"))

    hide = ["platforms", "cpu_used", "memory_used", "storage", "taints", "last_seen"]
    choose_columns(page, hide=hide, show=["backend", "schedulable"])
    chosen = [key for key in DEFAULT_COLUMNS if key not in hide] + ["backend", "schedulable"]
    assert header_keys(page) == chosen
    assert "pool=simulation" in page.url  # saving went back to the view it was chosen in
    assert TablePreference.objects.get(user=staff, table="nodes").columns == chosen
    expected = pool_nodes("simulation")
    assert shown_cells(page, "schedulable") == ["no" if node.unschedulable else "yes" for node in expected]
    assert "no" in shown_cells(page, "schedulable")

    page.reload()
    assert header_keys(page) == chosen
    page.goto(f"{live_server.url}/nodes/")
    assert header_keys(page) == chosen
    expect(page.locator("#col-nodes-taints")).not_to_be_checked()

    page.click("#nodes-columns-toggle")
    with page.expect_navigation():
        page.click("#nodes-columns-reset")
    assert header_keys(page) == DEFAULT_COLUMNS
    assert not TablePreference.objects.filter(user=staff, table="nodes").exists()


def test_the_csv_download_holds_the_filtered_rows_and_chosen_columns_in_the_order_shown(live_server, page,
        fleet_with_history):
    sign_in(page, live_server, "/nodes/")
    choose_columns(page, hide=["platforms", "gpu_total", "gpu_used", "gpu_unhealthy", "cpu_used", "cpu_total",
                               "memory_used", "storage", "taints"], show=["sharing"])
    page.select_option("#filter-pool", "training")
    page.select_option("#filter-status", "Ready")
    page.wait_for_url(re.compile(r"pool=training&status=Ready$"))
    page.click("#sort-nodes-gpu_free")
    page.wait_for_url(re.compile(r"sort=-gpu_free"))
    expected = pool_nodes("training", "-gpu_free", status="Ready")
    assert rows_become(page, names(expected)) == names(expected)

    with page.expect_download() as info:
        page.click("#nodes-csv")
    download = info.value
    assert re.fullmatch(r"nodes-\d{8}-\d{6}\.csv", download.suggested_filename)
    with open(download.path(), "rb") as file:
        data = file.read()
    assert not data.startswith(b"\xef\xbb\xbf")
    table = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))

    assert table[0] == ["Node", "Status", "Pools", "GPU type", "GPU free", "Memory total (bytes)", "Last seen",
                        "Sharing"]
    assert table[1:] == [[node.name, node.status, ", ".join(node.pool_names), node.gpu_product, str(node.gpu_free),
                          str(node.memory_allocatable),
                          last_contact(node.last_seen, node.backend.last_sync_at).isoformat(), node.sharing]
                         for node in expected]
    assert [row[0] for row in table[1:]] == shown_keys(page)
    assert {"SHARED", "RESERVED"} <= {row[-1] for row in table[1:]}


def test_a_status_change_in_the_database_shows_in_the_open_page_without_a_reload(live_server, page, fleet_with_history):
    sign_in(page, live_server, "/nodes/")
    page.select_option("#filter-pool", "training")
    page.wait_for_url(re.compile(r"pool=training$"))
    page.click("#sort-nodes-gpu_free")
    page.wait_for_url(re.compile(r"pool=training&sort=-gpu_free$"))
    before = pool_nodes("training", "-gpu_free")
    assert rows_become(page, names(before)) == names(before)
    page.evaluate("window.__samePage = true")  # gone if anything reloads the page

    target = next(node for node in before if node.status == "Ready")
    status = page.locator(f"#nodes-table tr[data-key='{target.name}'] [data-col=status]")
    expect(status).to_have_text("Ready")
    # By hand, as the sync would write them: fleet_with_history's nodes are rows with no cluster behind them.
    Node.objects.filter(pk=target.pk).update(status="Not ready (Memory pressure)", reasons=["Memory pressure"],
                                             gpu_used=0, gpu_free=target.gpu_allocatable)
    newcomer = Node.objects.get(name="hgx-a100-06")  # a simulation node joins the training pool
    NodeMembership.objects.create(node=newcomer, pool=fleet_with_history["training"], platforms=["hgx-a100"])

    expect(status).to_have_text("Not ready (Memory pressure)")
    expect(status.locator(".status")).to_have_class(re.compile(r"status-bad"))
    expect(status.locator(".status")).to_have_attribute("title", "Memory pressure")
    after = pool_nodes("training", "-gpu_free")
    assert newcomer.name in names(after)
    assert rows_become(page, names(after)) == names(after)  # the filter and the sort were kept

    assert page.evaluate("window.__samePage") is True
    assert page.url.endswith("/nodes/?pool=training&sort=-gpu_free")
    expect(page.locator("#filter-pool")).to_have_value("training")
    expect(page.locator("#nodes-table th[data-col=gpu_free]")).to_have_attribute("aria-sort", "descending")


def test_a_pool_leads_to_its_nodes_its_revisions_a_diff_and_a_confirmed_rollback(live_server, page, fleet_with_history,
                                                                                   screenshot):
    sign_in(page, live_server, "/")
    page.click("#pools-table tr[data-key=training] [data-col=name] a")
    page.wait_for_url(f"{live_server.url}/pools/training/")
    expect(page.locator("h1")).to_contain_text("Pool training")
    expect(page.locator("#pool-status")).to_have_text("ONLINE")
    assert shown_keys(page) == names(pool_nodes("training"))
    assert shown_keys(page, "platforms") == list(POOLS["training"][1])
    platform_counts = shown_cells(page, "node_count", "platforms")
    assert platform_counts == [str(NodeMembership.objects.filter(pool__name="training", platforms__contains=[p])
                                   .count()) for p in POOLS["training"][1]]
    revisions = list(ConfigRevision.objects.filter(kind=ConfigKind.POOL, name="training").order_by("-number"))
    assert len(revisions) == 2
    shown = page.locator("#pool-revisions tr[data-testid=revision]")
    assert shown.evaluate_all("rows => rows.map(r => Number(r.dataset.number))") == [r.number for r in revisions]
    expect(page.locator("#pool-figures [data-col=node_count] dd")).to_have_text(str(len(pool_nodes("training"))))
    screenshot(page, "pool")

    newer, older = revisions
    shown.first.get_by_role("link", name="Diff").click()
    page.wait_for_url(re.compile(rf"/config/history/diff/\?type=pool&revision={newer.number}$"))
    expect(page.locator("h1")).to_have_text(f"Pool training: r{older.number} → r{newer.number}")
    diff = page.locator("#diff-table")
    expect(diff).to_contain_text(f'"description": "{older.document["description"]}"')
    expect(diff).to_contain_text(f'"description": "{newer.document["description"]}"')
    expect(diff).to_contain_text('"max_exec_timeout": "7d"')
    screenshot(page, "diff")

    page.click("#rollback-older")
    page.wait_for_url(re.compile(rf"/config/history/rollback/\?type=pool&revision={older.number}$"))
    expect(page.locator("h1")).to_have_text(f"Restore pool training to revision {older.number}?")
    expect(page.locator("#rollback-confirm")).not_to_be_checked()
    screenshot(page, "rollback")
    page.click("#rollback-submit")  # not ticked: the browser holds the form back
    expect(page.locator("h1")).to_have_text(f"Restore pool training to revision {older.number}?")
    assert page.locator("#rollback-confirm").evaluate("box => box.validity.valueMissing") is True
    assert ConfigRevision.objects.filter(kind=ConfigKind.POOL, name="training").count() == 2
    assert Pool.objects.get(name="training").max_exec_timeout == "7d"

    page.click("#nav-history")
    page.wait_for_url(f"{live_server.url}/config/history/")
    every = list(ConfigRevision.objects.order_by("-created_at", "kind", "-number"))
    assert shown_keys(page, "revisions") == [f"{r.kind}-{r.number}" for r in every][:50]
    screenshot(page, "history")


def test_without_javascript_the_nodes_filters_sorting_and_pages_work_through_links_and_forms(live_server, browser,
                                                                                           fleet_with_history):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1440, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(HANG_MS)
        sign_in(page, live_server, "/nodes/")
        assert shown_keys(page) == names(Node.objects.order_by("name"))

        page.click("#sort-nodes-gpu_free")
        page.wait_for_url(f"{live_server.url}/nodes/?sort=-gpu_free")
        expected = list(Node.objects.order_by("-gpu_free", "name"))
        assert shown_keys(page) == names(expected)

        page.select_option("#filter-pool", "simulation")  # no request until the form is submitted
        assert page.url == f"{live_server.url}/nodes/?sort=-gpu_free"
        page.click("#nodes-apply")
        page.wait_for_url(re.compile(r"pool=simulation"))
        assert "sort=-gpu_free" in page.url  # the sort rides along with the filter form
        assert shown_keys(page) == names(pool_nodes("simulation", "-gpu_free"))

        page.click("#sort-nodes-gpu_free")
        page.wait_for_url(re.compile(r"sort=gpu_free"))
        assert "pool=simulation" in page.url
        assert shown_keys(page) == names(pool_nodes("simulation", "gpu_free"))

        page.goto(f"{live_server.url}/nodes/")
        page.select_option("#filter-per-page", "25")
        page.click("#nodes-apply")
        page.wait_for_url(re.compile(r"per_page=25"))
        everything = names(Node.objects.order_by("name"))
        assert shown_keys(page) == everything[:25]
        page.click("#nodes-page-next")
        page.wait_for_url(re.compile(r"page=2"))
        assert shown_keys(page) == everything[25:]
    finally:
        context.close()
