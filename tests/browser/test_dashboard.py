"""The dashboard in Chromium, against pytest-django's live server: sign in through the form, filter, sort,
choose columns, download the CSV, watch the live refresh, follow a pool to its history, and capture each page
for the README (`docs/screenshots/`). Every expectation is read back from the database."""

import csv
import datetime as dt
import io
import math
import re
import time

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from pools.config import writes
from pools.fleet.usage import last_contact
from pools.models import Backend, ConfigKind, ConfigRevision, Node, NodeMembership, Pool, TablePreference, UsageSnapshot
from tests.pages.conftest import pool_document

pytestmark = pytest.mark.django_db(transaction=True)

USERNAME, PASSWORD = "ops", "pw-ops-123"  # the `staff` fixture of tests/conftest.py
TiB, GiB = 2**40, 2**30

# GPU type: (GPUs per node, CPU millicores, memory bytes, storage bytes, GPU memory MiB, family)
HARDWARE = {
    "NVIDIA-H100-80GB-HBM3": (8, 223_000, 2 * TiB - 64 * GiB, 28 * 10**12, 81_559, "hopper"),
    "NVIDIA-A100-SXM4-80GB": (8, 254_000, 2 * TiB - 96 * GiB, 15 * 10**12, 81_920, "ampere"),
    "NVIDIA-L40S": (4, 126_000, 1 * TiB - 32 * GiB, 7 * 10**12, 46_068, "ada-lovelace"),
    "": (0, 94_000, 384 * GiB, 2 * 10**12, 0, ""),
}
# Pool: (description, {platform: description}, default platform)
POOLS = {
    "training": ("Pre-training and fine-tuning on DGX H100, with A100 overflow",
                 {"dgx-h100": "DGX H100, 8 GPUs, NVLink", "hgx-a100": "HGX A100 80GB, 8 GPUs"}, "dgx-h100"),
    "inference": ("Online inference and batch scoring", {"l40s": "L40S, 4 GPUs"}, "l40s"),
    "simulation": ("Isaac Sim and physics workloads", {"hgx-a100": "HGX A100 80GB, 8 GPUs", "l40s": "L40S, 4 GPUs"},
                   "hgx-a100"),
    "dev": ("Notebooks and debugging, small requests", {"l40s": "L40S, 4 GPUs", "cpu": "CPU only"}, "l40s"),
}
GPU_USE = (8, 6, 8, 3, 7, 8, 5, 2, 8, 6, 4, 8, 1)  # GPUs used, cycled over the nodes
NOT_READY = {  # node: (status, reasons)
    "dgx-h100-004": ("Not ready (Disk pressure)", ["Disk pressure"]),
    "dgx-h100-011": ("Not ready (Missing NVIDIA DCGM Exporter)", ["Missing NVIDIA DCGM Exporter"]),
    "hgx-a100-03": ("Not ready (Scheduling disabled)", ["Scheduling disabled"]),
    "l40s-07": ("Unknown", []),
}


def node_specs() -> list[tuple[str, str, dict[str, list[str]]]]:
    """(name, GPU type, {pool: [platforms]}) for 30 nodes; some A100, L40S and CPU nodes are shared."""
    specs = [(f"dgx-h100-{i:03d}", "NVIDIA-H100-80GB-HBM3", {"training": ["dgx-h100"]}) for i in range(1, 13)]
    specs += [(f"hgx-a100-{i:02d}", "NVIDIA-A100-SXM4-80GB",
               {"training": ["hgx-a100"], "simulation": ["hgx-a100"]} if i <= 4 else {"simulation": ["hgx-a100"]})
              for i in range(1, 7)]
    specs += [(f"l40s-{i:02d}", "NVIDIA-L40S",
               {"inference": ["l40s"]} if i <= 6 else {"inference": ["l40s"], "simulation": ["l40s"]})
              for i in range(1, 9)]
    specs += [(f"l40s-dev-{i:02d}", "NVIDIA-L40S", {"dev": ["l40s"]}) for i in range(1, 3)]
    specs += [(f"cpu-{i:02d}", "", {"dev": ["cpu"], "default": []}) for i in range(1, 3)]
    return specs


def build_node(backend: Backend, index: int, name: str, product: str, pools: dict[str, list[str]], now) -> Node:
    gpus, cpu, memory, storage, gpu_memory, family = HARDWARE[product]
    status, reasons = NOT_READY.get(name, ("Ready", []))
    unhealthy = 1 if name == "dgx-h100-009" else 0
    allocatable = gpus - unhealthy
    used = 0 if status != "Ready" else min(allocatable, (GPU_USE[index % len(GPU_USE)] * gpus + 4) // 8)
    cordoned = reasons == ["Scheduling disabled"]
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}] if gpus else []
    if cordoned:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"us-west-2{'abc'[index % 3]}",
              "node.kubernetes.io/instance-type": {"hopper": "p5.48xlarge", "ampere": "p4de.24xlarge",
                                                   "ada-lovelace": "g6e.12xlarge"}.get(family, "m7i.24xlarge")}
    if gpus:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                       "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.family": family})
    return Node(
        backend=backend, name=name, uid=f"5c0ffee0-0000-4000-8000-{index:012d}", labels=labels, taints=taints,
        unschedulable=cordoned, cpu_capacity=cpu + 1_000, cpu_allocatable=cpu,
        cpu_requested=cpu * (35 + 7 * (index % 9)) // 100, memory_capacity=memory + 16 * GiB,
        memory_allocatable=memory, memory_requested=memory * (20 + 9 * (index % 7)) // 100,
        storage_capacity=storage, storage_allocatable=storage * 9 // 10, pods_capacity=110, pods_allocatable=110,
        gpu_product=product, gpu_count=gpus, gpu_memory_mib=gpu_memory, gpu_family=family, gpu_total=gpus,
        gpu_allocatable=allocatable, gpu_used=used, gpu_free=allocatable - used, gpu_unhealthy=unhealthy,
        status=status, reasons=reasons, pool_names=sorted(pools),
        platform_names=[f"{pool}/{platform}" for pool, names in sorted(pools.items()) for platform in names],
        sharing=Node.Sharing.SHARED if len([p for p in pools if p != "default"]) > 1 else Node.Sharing.RESERVED,
        last_seen=now - (dt.timedelta(minutes=14) if status == "Unknown" else dt.timedelta(seconds=5 + index)),
        updated_at=now,
    )


@pytest.fixture
def fleet(defaults, staff):
    """Four pools on one synced backend, 30 nodes with memberships, 24 hours of usage snapshots, and a few
    revisions per pool (so the history has diffs to show)."""
    now = timezone.now()
    documents = {name: pool_document(description=description, default_platform=default,
                                     platforms={platform: {"description": text,
                                                           **({"override_pod_template": ["gpu_toleration"]}
                                                              if platform != "cpu" else {})}
                                                for platform, text in platforms.items()})
                 for name, (description, platforms, default) in POOLS.items()}
    writes.import_document(ConfigKind.POOL, {"pools": documents}, author=staff,
                            description="Pools of the us-west-2 GPU cluster")
    documents["training"].update(description="Pre-training and fine-tuning on DGX H100 (7-day runs allowed)",
                                 default_exec_timeout="2d", max_exec_timeout="7d")
    writes.import_document(ConfigKind.POOL, {"pools": {"training": documents["training"]}}, author=staff,
                            description="Allow week-long pre-training runs")
    documents["inference"]["common_default_variables"]["USER_GPU"] = 1
    writes.import_document(ConfigKind.POOL, {"pools": {"inference": documents["inference"]}}, author=staff,
                            description="Inference jobs get one GPU by default")

    backend = Backend.objects.get(name="default")
    backend.last_sync_at = now
    backend.save(update_fields=["last_sync_at"])
    pools = {pool.name: pool for pool in Pool.objects.all()}
    specs = node_specs()
    nodes = Node.objects.bulk_create(build_node(backend, index, name, product, memberships, now)
                                     for index, (name, product, memberships) in enumerate(specs))
    NodeMembership.objects.bulk_create(NodeMembership(node=node, pool=pools[pool], platforms=platforms)
                                       for node, (_, _, memberships) in zip(nodes, specs, strict=True)
                                       for pool, platforms in memberships.items())
    snapshots = []
    for phase, pool in enumerate(pools.values()):
        members = list(Node.objects.filter(memberships__pool=pool))
        total, now_used = sum(node.gpu_total for node in members), sum(node.gpu_used for node in members)
        unhealthy = sum(node.gpu_unhealthy for node in members)

        def wave(step, phase=phase):
            return 0.22 * math.sin(2 * math.pi * step / 144 + phase) + 0.05 * math.sin(step * 1.7)

        for step in range(144):  # every 10 minutes over the last 24 hours, ending at today's figures
            used = min(total - unhealthy, max(0, round(now_used + total * (wave(step) - wave(143)))))
            snapshots.append(UsageSnapshot(pool=pool, at=now - dt.timedelta(minutes=10 * (143 - step)),
                                           node_count=len(members), gpu_total=total, gpu_used=used,
                                           gpu_free=total - unhealthy - used, gpu_unhealthy=unhealthy))
    UsageSnapshot.objects.bulk_create(snapshots)
    return pools


# ---- helpers ---------------------------------------------------------------------------------------------

def sign_in(page, live_server, path: str = "/") -> None:
    page.goto(f"{live_server.url}/accounts/login/?next={path}")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}{path}")


def shown_keys(page, table: str = "nodes") -> list[str]:
    return page.locator(f"#{table}-table tr[data-testid=row]").evaluate_all("rows => rows.map(r => r.dataset.key)")


def shown_cells(page, key: str, table: str = "nodes") -> list[str]:
    return [text.strip() for text in
            page.locator(f"#{table}-table tr[data-testid=row] [data-col={key}]").all_inner_texts()]


def header_keys(page, table: str = "nodes") -> list[str]:
    return page.locator(f"#{table}-table thead th[data-col]").evaluate_all("cells => cells.map(c => c.dataset.col)")


def rows_become(page, expected: list[str], table: str = "nodes", timeout: float = 10) -> list[str]:
    """The row keys once they equal `expected`, or as they are when `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while (keys := shown_keys(page, table)) != expected and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    return keys


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

def test_a_staff_user_signs_in_through_the_login_form_and_sees_every_pool(live_server, page, fleet, screenshot):
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
        expect(row.locator("[data-col=gpu_free]")).to_have_text(str(sum(n.gpu_free for n in members)))
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


def test_filtering_the_nodes_by_pool_shows_exactly_the_nodes_of_that_pool(live_server, page, fleet, screenshot):
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


def test_sorting_by_gpu_free_orders_the_rows_as_the_database_does_both_ways(live_server, page, fleet):
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


def test_the_column_chooser_changes_the_header_and_is_remembered_after_a_reload(live_server, page, fleet, staff):
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


def test_the_csv_download_holds_the_filtered_rows_and_chosen_columns_in_the_order_shown(live_server, page, fleet):
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


def test_a_status_change_in_the_database_shows_in_the_open_page_without_a_reload(live_server, page, fleet):
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
    Node.objects.filter(pk=target.pk).update(status="Not ready (Memory pressure)", reasons=["Memory pressure"],
                                             gpu_used=0, gpu_free=target.gpu_allocatable)
    newcomer = Node.objects.get(name="hgx-a100-06")  # a simulation node joins the training pool
    NodeMembership.objects.create(node=newcomer, pool=fleet["training"], platforms=["hgx-a100"])

    expect(status).to_have_text("Not ready (Memory pressure)", timeout=15_000)
    expect(status.locator(".status")).to_have_class(re.compile(r"status-bad"))
    expect(status.locator(".status")).to_have_attribute("title", "Memory pressure")
    after = pool_nodes("training", "-gpu_free")
    assert newcomer.name in names(after)
    assert rows_become(page, names(after)) == names(after)  # the filter and the sort were kept

    assert page.evaluate("window.__samePage") is True
    assert page.url.endswith("/nodes/?pool=training&sort=-gpu_free")
    expect(page.locator("#filter-pool")).to_have_value("training")
    expect(page.locator("#nodes-table th[data-col=gpu_free]")).to_have_attribute("aria-sort", "descending")


def test_a_pool_leads_to_its_nodes_its_revisions_a_diff_and_a_confirmed_rollback(live_server, page, fleet,
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
    expect(page.locator("h1")).to_have_text(f"Roll back pool training to revision {older.number}?")
    expect(page.locator("#rollback-confirm")).not_to_be_checked()
    screenshot(page, "rollback")
    page.click("#rollback-submit")  # not ticked: the browser holds the form back
    expect(page.locator("h1")).to_have_text(f"Roll back pool training to revision {older.number}?")
    assert page.locator("#rollback-confirm").evaluate("box => box.validity.valueMissing") is True
    assert ConfigRevision.objects.filter(kind=ConfigKind.POOL, name="training").count() == 2
    assert Pool.objects.get(name="training").max_exec_timeout == "7d"

    page.click("#nav-history")
    page.wait_for_url(f"{live_server.url}/config/history/")
    every = list(ConfigRevision.objects.order_by("-created_at", "kind", "-number"))
    assert shown_keys(page, "revisions") == [f"{r.kind}-{r.number}" for r in every][:50]
    screenshot(page, "history")


def test_without_javascript_the_nodes_filters_sorting_and_pages_work_through_links_and_forms(live_server, browser,
                                                                                           fleet):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1440, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(10_000)
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
