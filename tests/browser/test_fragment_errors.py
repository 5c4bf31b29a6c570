"""A fragment's error stays inside the fragment, under DEBUG=1 as under DEBUG=0: on the new-workload form, Project,
Priority and the first candidate pool changed before Name is filled (in several orders, on a laptop and a phone)
each get the dry run's 400 ("name: This field is required") in the pane beside the form, and the page around it
(header, navigation, the form) stays. Under DEBUG=1, django-htmx's debug script replaced the whole document with
the fragment's answer at the first such change (issue 44)."""

from itertools import permutations

import pytest
from playwright.sync_api import expect

from pools.quotas.writes import ensure_defaults
from tests.support.browser import csp_refusals, sign_in
from tests.support.simulated import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)

FIELDS = {"project": "#id_project", "priority": "#id_priority", "pool": "#id_pool_1"}
ALL_ORDERS = list(permutations(FIELDS))
ROTATIONS = [("project", "priority", "pool"), ("priority", "pool", "project"), ("pool", "project", "priority")]


def is_dry_run(response) -> bool:
    return response.request.method == "POST" and response.url.endswith("/workloads/new/dry-run/")


def change(page, selector: str) -> None:
    """Chooses another option of `selector` and waits for the dry run that answers the change."""
    current = page.input_value(selector)
    options = page.locator(f"{selector} option").evaluate_all("options => options.map(o => o.value)")
    assert any(option != current for option in options), (selector, options)
    value = next(option for option in options if option != current)
    with page.expect_response(is_dry_run) as answer:
        page.select_option(selector, value)
    assert answer.value.status == 400, answer.value.status


def the_page_stays(page, live_server) -> None:
    assert page.url == f"{live_server.url}/workloads/new/"
    expect(page.locator("header.osmo-header nav.osmo-nav")).to_be_visible()
    expect(page.locator("#nav-menu")).to_be_attached()
    expect(page.locator("#submit-form")).to_be_visible()
    expect(page.locator("#dry-run #dry-run-result")).to_have_attribute("data-status", "400")
    expect(page.locator("#dry-run #dry-run-errors")).to_contain_text("name")


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "nodebug"])
@pytest.mark.parametrize("width, height, orders", [(1440, 900, ALL_ORDERS), (390, 844, ROTATIONS)],
                         ids=["laptop", "phone"])
def test_changes_before_name_keep_the_page_and_show_the_refusal_in_the_pane(live_server, page, simulated, settings,
                                                                           debug, width, height, orders):
    settings.DEBUG = debug
    ensure_defaults()  # the open `default` project beside llm-research: two projects to change between
    refused = csp_refusals(page)
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, live_server, "/workloads/new/", username="alice", password=PASSWORD)
    expect(page.locator("#dry-run-empty")).to_be_visible()
    assert page.input_value("#id_name") == ""
    for order in orders:
        for field in order:
            change(page, FIELDS[field])
            the_page_stays(page, live_server)
    # The rest filled, Name last: the same pane now says what each pool would do.
    page.fill("#id_image", "nvcr.io/nvidia/pytorch:24.05-py3")
    page.fill("#id_command", "python train.py")
    with page.expect_response(lambda response: is_dry_run(response) and response.status == 200) as answer:
        page.fill("#id_name", f"late-name-{width}")
        page.press("#id_name", "Tab")
    assert answer.value.status == 200
    expect(page.locator("#dry-run .dry-run-pool").first).to_be_visible()
    expect(page.locator("header.osmo-header nav.osmo-nav")).to_be_visible()
    assert refused == []


@pytest.mark.parametrize("debug", [True, False], ids=["debug", "nodebug"])
def test_a_fragment_answered_with_an_error_says_so_in_place_and_the_page_stays(live_server, page, simulated, staff,
                                                                            settings, debug):
    """Any fragment's error, not only the dry run's: a quota cell posted with a cell key the server cannot read
    (a page older than the server, a hand-edited form) answers 400; one line before the cell says so, the page
    stays, and the next good answer for that cell takes the line away."""
    settings.DEBUG = debug
    sign_in(page, live_server, "/quotas/")
    cell = page.locator("form.quota-cell").first
    box = cell.locator("input[name=value]")
    cell.locator("input[name=cell]").evaluate("input => { input.dataset.key = input.value; input.value = 'bogus'; }")
    with page.expect_response(lambda response: response.url.endswith("/quotas/edit/")) as answer:
        box.fill("3")
        box.press("Tab")
    assert answer.value.status == 400
    notice = page.locator(".fragment-error")
    expect(notice).to_contain_text("the server answered 400")
    expect(page.locator("header.osmo-header nav.osmo-nav")).to_be_visible()
    assert page.url == f"{live_server.url}/quotas/"
    cell.locator("input[name=cell]").evaluate("input => { input.value = input.dataset.key; }")
    with page.expect_response(lambda response: response.url.endswith("/quotas/edit/")) as answer:
        box.fill("2")
        box.press("Tab")
    assert answer.value.status == 200
    expect(notice).to_have_count(0)
