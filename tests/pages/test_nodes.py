"""`/nodes/`: columns, filters, sort and pages in the URL, the live fragment, and what a reader notices."""

import re

import pytest
from django.utils import timezone

from pools.models import Backend, Node
from pools.pages.tables import NODES
from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db


def row_keys(text: str) -> list[str]:
    return re.findall(r'<tr data-key="([^"]+)"', text)


def test_it_shows_every_default_column_with_a_node_row(staff_client, fleet):
    make_nodes(1, [ALPHA])

    text = body(staff_client.get("/nodes/"))

    headers = re.findall(r'<th scope="col" data-col="([^"]+)"', text)
    assert headers == ["node", "status", "pools", "platforms", "gpu_product", "gpu_total", "gpu_used", "gpu_free",
                       "gpu_unhealthy", "cpu_used", "cpu_total", "memory_used", "memory_total", "storage", "taints",
                       "last_seen"]
    assert row_keys(text) == ["node-0000"]
    assert "Not ready (Disk pressure)" in text
    assert 'title="Disk pressure; Memory pressure"' in text  # every reason on hover
    assert "nvidia.com/gpu=present:NoSchedule" in text
    assert "1.97 TiB" in text and 'title="2,162,836,901,888 bytes"' in text
    assert "191.45" in text


def test_it_shows_status_as_text_and_colour(staff_client, fleet):
    make_nodes(2, [ALPHA])

    text = body(staff_client.get("/nodes/"))

    assert '<span class="status status-bad" title="Disk pressure; Memory pressure">Not ready (Disk pressure)' in text
    assert '<span class="status status-ok">Ready' in text


def test_it_shows_relative_times_with_the_absolute_time_on_hover(staff_client, fleet):
    # Seen now, not at conftest's import (NOW), which is minutes ago late in a full run.
    make_nodes(1, [ALPHA], prefix="fresh", last_seen=timezone.now())
    make_nodes(1, [ALPHA], prefix="never", last_seen=None)
    # By hand: a backend never synced that has a node is a state only a sync cut short leaves.
    Node.objects.filter(name="never-0000").update(backend=Backend.objects.create(name="never-synced"))

    text = body(staff_client.get("/nodes/"))

    assert re.search(r'<time datetime="[^"]+" title="\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC">'
                     r'(just now|\d+\xa0s ago)</time>', text)
    assert '<span class="muted">never</span>' in text


def test_taints_and_labels_show_as_a_count_that_opens_into_the_list(staff_client, fleet):
    taints = [{"key": "a", "effect": "NoSchedule"}, {"key": "b", "value": "1", "effect": "NoExecute"}]
    make_nodes(1, [ALPHA], taints=taints, labels={"zone": "z1"})
    make_nodes(1, [ALPHA], prefix="bare", taints=[], labels={})

    text = body(staff_client.get("/nodes/?cols=node,taints,labels"))

    assert re.search(r'<td data-col="taints"[^>]*><details class="cell-more"><summary>2 taints</summary>'
                     r'<ul class="chips"><li>a:NoSchedule</li><li>b=1:NoExecute</li></ul></details></td>', text)
    assert '<summary>1 label</summary><ul class="chips"><li>zone=z1</li></ul>' in text
    assert len(re.findall(r'<td data-col="(?:taints|labels)"[^>]*><span class="muted">—</span>', text)) == 2  # none


def test_on_a_phone_a_row_shows_its_key_columns_and_opens_the_others_from_its_name(staff_client, fleet):
    make_nodes(1, [ALPHA])

    text = body(staff_client.get("/nodes/"))

    wide = re.findall(r'<th scope="col" data-col="([a-z_]+)" class="[^"]*wide-only', text)
    assert "node" not in wide and "status" not in wide and "gpu_free" not in wide and len(wide) == 13
    cells = re.findall(r'<td data-col="([a-z_]+)" class="[^"]*wide-only" data-label="([^"]+)"', text)
    assert cells == [(key, NODES.by_key[key].label) for key in wide]  # each labelled for its line under "More"
    assert re.search(r'<th scope="row" data-col="node">.*?<details class="row-more"><summary>More</summary>'
                     r'</details></th>', text)
    assert text.count("NVIDIA-A100-SXM4-80GB</td>") == 1  # the cell itself, not a copy


def test_it_filters_by_pool_platform_status_gpu_type_and_text_from_the_url(staff_client, fleet):
    make_nodes(4, [ALPHA], prefix="alpha")
    make_nodes(4, [BRAVO], prefix="bravo")
    # By hand: make_nodes' rows have no cluster behind them, which `label node` writes first.
    Node.objects.filter(name="bravo-0001").update(labels={"team": "vision"})

    def keys(query):
        return row_keys(body(staff_client.get(f"/nodes/?{query}")))

    assert keys(f"pool={ALPHA}") == ["alpha-0000", "alpha-0001", "alpha-0002", "alpha-0003"]
    assert keys(f"platform={BRAVO}/h100") == ["bravo-0000", "bravo-0001", "bravo-0002", "bravo-0003"]
    assert keys(f"pool={ALPHA}&status=Not+ready") == ["alpha-0000"]
    assert keys("status=Ready&gpu=NVIDIA-A100-SXM4-80GB") == ["alpha-0002", "bravo-0002"]
    assert keys("q=vision") == ["bravo-0001"]
    assert keys("q=team%3Dvision") == ["bravo-0001"]  # as the Labels column shows it: key=value
    assert keys("q=ALPHA-00") == ["alpha-0000", "alpha-0001", "alpha-0002", "alpha-0003"]
    assert keys(f"q={BRAVO[:5]}") == ["bravo-0000", "bravo-0001", "bravo-0002", "bravo-0003"]


def test_it_offers_only_known_filter_values_and_keeps_the_chosen_ones(staff_client, fleet):
    make_nodes(2, [ALPHA])

    text = body(staff_client.get(f"/nodes/?pool={ALPHA}&gpu=NVIDIA-A100-SXM4-80GB"))

    assert f'<option value="{ALPHA}" selected>{ALPHA}</option>' in text
    assert '<option value="NVIDIA-A100-SXM4-80GB" selected>' in text
    assert '<option value="NVIDIA-H100-80GB-HBM3">' in text
    assert f'<optgroup label="{ALPHA}">' in text and f'<option value="{ALPHA}/h100">{ALPHA} / h100</option>' in text
    for control in ("filter-q", "filter-pool", "filter-platform", "filter-status", "filter-gpu", "filter-per-page"):
        assert f'<label for="{control}">' in text and f'id="{control}"' in text


def test_it_sorts_by_any_sortable_column_both_ways_from_the_url(staff_client, fleet):
    make_nodes(6, [ALPHA])
    by_free = list(Node.objects.order_by("-gpu_free", "name").values_list("name", flat=True))

    assert row_keys(body(staff_client.get("/nodes/?sort=-gpu_free"))) == by_free
    assert row_keys(body(staff_client.get("/nodes/?sort=gpu_free"))) == list(
        Node.objects.order_by("gpu_free", "name").values_list("name", flat=True))
    assert row_keys(body(staff_client.get("/nodes/?sort=-node"))) == sorted(by_free, reverse=True)


def test_it_marks_the_sorted_column_and_links_the_other_direction(staff_client, fleet):
    make_nodes(2, [ALPHA])

    text = body(staff_client.get(f"/nodes/?pool={ALPHA}&sort=-gpu_free"))

    assert re.search(r'data-col="gpu_free" class="num"\s+aria-sort="descending"', text)
    assert f'href="/nodes/?pool={ALPHA}&amp;sort=gpu_free"' in text
    # A figure's first click shows the largest first.
    assert f'href="/nodes/?pool={ALPHA}&amp;sort=-gpu_used"' in text
    assert f'href="/nodes/?pool={ALPHA}&amp;sort=status"' in text


def test_it_ignores_an_unknown_sort_and_sorts_by_name(staff_client, fleet):
    make_nodes(3, [ALPHA])

    assert row_keys(body(staff_client.get("/nodes/?sort=-labels;drop"))) == ["node-0000", "node-0001", "node-0002"]


def test_it_pages_through_the_rows_from_the_url(staff_client, fleet):
    make_nodes(60, [ALPHA])

    first = body(staff_client.get("/nodes/?sort=-node&per_page=25"))
    third = body(staff_client.get("/nodes/?sort=-node&per_page=25&page=3"))

    assert row_keys(first)[0] == "node-0059" and len(row_keys(first)) == 25
    assert row_keys(third) == [f"node-{n:04d}" for n in range(9, -1, -1)]
    assert "1\u201325 of 60 rows" in first and "Page 1 of 3" in first
    assert 'rel="next" href="/nodes/?sort=-node&amp;per_page=25&amp;page=2"' in first
    assert 'rel="prev" href="/nodes/?sort=-node&amp;per_page=25&amp;page=2"' in third
    assert "51\u201360 of 60 rows" in third


def test_a_page_past_the_end_shows_the_last_page(staff_client, fleet):
    make_nodes(3, [ALPHA])

    assert row_keys(body(staff_client.get("/nodes/?per_page=25&page=99"))) == ["node-0000", "node-0001", "node-0002"]


def test_an_htmx_request_gets_only_the_table_fragment_and_responses_vary_on_it(staff_client, fleet):
    make_nodes(2, [ALPHA])

    full = staff_client.get(f"/nodes/?pool={ALPHA}")
    part = fragment(staff_client, f"/nodes/?pool={ALPHA}", target="nodes-table")

    assert "<html" in body(full) and "HX-Request" in full["Vary"]
    text = body(part).strip()
    assert text.startswith('<div id="nodes-table"') and text.endswith("</div>")
    assert "<html" not in text and "nodes-filters\" class=" not in text
    assert "HX-Request" in part["Vary"]
    assert row_keys(text) == ["node-0000", "node-0001"]


def test_the_fragment_refreshes_itself_with_its_filters_sort_and_columns(staff_client, fleet):
    make_nodes(2, [ALPHA])

    text = body(fragment(staff_client, f"/nodes/?pool={ALPHA}&sort=-gpu_free&cols=node,gpu_free&page=1&q="))

    assert f'hx-get="/nodes/?pool={ALPHA}&amp;sort=-gpu_free&amp;cols=node%2Cgpu_free"' in text
    assert 'hx-trigger="every 5s"' in text  # static/osmo/pages.js pauses it while the tab is hidden
    assert 'hx-swap="outerHTML"' in text
    # The filter form outside the fragment picks up the current sort and columns from inside it.
    assert '<input type="hidden" form="nodes-filters" name="sort" value="-gpu_free">' in text
    assert '<input type="hidden" form="nodes-filters" name="cols" value="node,gpu_free">' in text


def test_a_history_restore_gets_the_whole_page(staff_client, fleet):
    response = staff_client.get("/nodes/", HTTP_HX_REQUEST="true", HTTP_HX_HISTORY_RESTORE_REQUEST="true")

    assert "<html" in body(response)


def test_a_filter_change_pushes_a_tidy_url(staff_client, fleet):
    response = staff_client.get(f"/nodes/?q=&pool={ALPHA}&platform=&status=&gpu=&per_page=50",
                                HTTP_HX_REQUEST="true", HTTP_HX_TRIGGER="nodes-filters")

    assert response["HX-Push-Url"] == f"/nodes/?pool={ALPHA}"


def test_it_says_when_there_are_no_nodes_and_when_filters_match_none(staff_client, fleet):
    assert "No nodes yet" in body(staff_client.get("/nodes/"))
    make_nodes(1, [ALPHA])
    text = body(staff_client.get("/nodes/?q=nothing-like-this"))
    assert "No node matches these filters." in text and 'href="/nodes/">Clear the filters' in text


def test_it_escapes_text_from_the_cluster(staff_client, fleet):
    make_nodes(1, [ALPHA], prefix="<script>alert(1)</script>", gpu_product="<b>gpu</b>",
               labels={"x": "<img src=x onerror=alert(1)>"})

    text = body(staff_client.get("/nodes/?cols=node,gpu_product,labels"))

    assert "<script>alert(1)" not in text and "<img src=x" not in text and "<b>gpu</b>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;-0000" in text


def test_staff_reach_each_node_in_the_admin_through_its_page(staff_client, fleet):
    node = make_nodes(1, [ALPHA])[0]

    assert f'href="/nodes/{node.name}/"' in body(staff_client.get("/nodes/"))
    assert f'href="/admin/pools/node/{node.pk}/change/"' in body(staff_client.get(f"/nodes/{node.name}/"))


def test_members_get_no_admin_links(member_client, fleet):
    node = make_nodes(1, [ALPHA])[0]

    text = body(member_client.get("/nodes/"))

    assert f"/admin/pools/node/{node.pk}/" not in text and 'id="nav-admin"' not in text


def test_free_text_finds_nodes_by_the_platforms_of_visible_pools_only(client, alpha_member, fleet):
    from pools.models import NodeMembership

    make_nodes(2, [ALPHA], prefix="alpha")
    make_nodes(1, [ALPHA, BRAVO], prefix="shared")
    # By hand: the sync derives platforms from a cluster's labels, and make_nodes' rows have no cluster.
    NodeMembership.objects.filter(node__name="alpha-0001").update(platforms=["cpu"])
    # In bravo the shared node is on "cpu"; the member may not see bravo, so that must not match.
    NodeMembership.objects.filter(node__name="shared-0000", pool__name=BRAVO).update(platforms=["cpu"])
    client.force_login(alpha_member)

    assert row_keys(body(client.get("/nodes/?q=cpu"))) == ["alpha-0001"]


def test_every_write_keeps_the_shown_label_text_in_step_with_the_labels(fleet):
    # The ORM's writes are what this test is about (every one keeps label_text), so they are made by hand.
    created = Node.objects.create(backend=Backend.objects.get(name="default"), name="n-create",
                                  labels={"b": "2", "a": "1"})
    bulk = make_nodes(1, [ALPHA], prefix="bulk", labels={"rack": "r9", "B": "x"})[0]
    assert Node.objects.get(pk=created.pk).label_text == "a=1, b=2"
    assert Node.objects.get(pk=bulk.pk).label_text == "B=x, rack=r9"
    created.labels = {"z": "0"}
    created.save(update_fields=["labels"])
    assert Node.objects.get(pk=created.pk).label_text == "z=0"
    Node.objects.filter(pk=bulk.pk).update(labels={})
    assert Node.objects.get(pk=bulk.pk).label_text == ""


def test_needs_attention_lists_every_node_that_is_not_ready_unknown_included(staff_client, fleet):
    make_nodes(4, [ALPHA])  # node-0000 is Not ready (Disk pressure), the others Ready
    make_nodes(1, [ALPHA], prefix="lost", status="Unknown", reasons=["Kubelet status unknown"])

    text = body(staff_client.get("/nodes/?status=attention"))

    assert row_keys(text) == ["lost-0000", "node-0000"]
    assert '<option value="attention" selected>Needs attention</option>' in text
    assert row_keys(body(staff_client.get("/nodes/?status=Not+ready"))) == ["node-0000"]


def test_status_sorts_by_severity_in_the_page_and_the_csv(staff_client, fleet):
    make_nodes(3, [ALPHA], prefix="a", status="Unknown", reasons=["Kubelet status unknown"])
    make_nodes(2, [ALPHA], prefix="b")  # b-0000 Not ready (Disk pressure), b-0001 Ready
    make_nodes(1, [ALPHA], prefix="c", status="Cordoned", reasons=["Scheduling disabled"])

    worst_first = row_keys(body(staff_client.get("/nodes/?sort=-status")))
    best_first = row_keys(body(staff_client.get("/nodes/?sort=status")))
    csv_rows = body(staff_client.get("/nodes/?sort=-status&export=csv&cols=node,status")).splitlines()[1:]

    # Unknown, then Not ready, then Cordoned (Ready but closed to new work), then Ready.
    assert worst_first == ["a-0000", "a-0001", "a-0002", "b-0000", "c-0000", "b-0001"]
    assert best_first == ["b-0001", "c-0000", "b-0000", "a-0000", "a-0001", "a-0002"]
    assert [line.split(",")[0] for line in csv_rows] == worst_first
