"""The content security policy (OSMO_CSP, osmo_site.middleware) holds on every page in Chromium: no inline
script, handler or style, no eval (htmx's trigger filters included), on our pages, their htmx fragments and the
admin. Chromium reports each refusal as a `securitypolicyviolation` event and a console message; htmx, told not
to eval, reports what would have needed it as an error event."""

import pytest
from django.conf import settings
from playwright.sync_api import expect

from pools.models import Node, Pool
from scheduling.models import Workload
from scheduling.run.cycle import run_cycle
from scheduling.submit.submission import submit
from tests.scheduling.conftest import body
from tests.support.browser import htmx_answered, htmx_settled, sign_in

pytestmark = pytest.mark.django_db(transaction=True)

# Runs before any script of the page, outside the policy (Playwright injects it).
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__violations.push(`${event.violatedDirective} refused ${event.blockedURI || "inline"} `
                           + `at ${event.sourceFile}:${event.lineNumber} (${event.sample})`);
});
// htmx is configured not to eval (templates/pages/base.html): what would need it fails quietly otherwise.
for (const name of ["htmx:evalDisallowedError", "htmx:syntax:error", "htmx:eventFilter:error"]) {
  document.addEventListener(name, (event) => window.__violations.push(`${name} on ${event.target.id || event.target}`));
}
"""


def test_every_page_passes_the_content_security_policy(live_server, page, world, staff):
    submit(world["researcher"], body(name="csp-check", resources={"gpu": 2, "cpu": "2", "memory": "8Gi"}))
    run_cycle()
    workload = Workload.objects.get(name="csp-check")
    pool = Pool.objects.get(name="training")
    node = Node.objects.filter(memberships__pool=pool).order_by("name").first()
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text)
            if "Content Security Policy" in message.text else None)
    page.add_init_script(RECORD_VIOLATIONS)

    def visit(path: str) -> None:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        assert response.headers["content-security-policy"] == settings.OSMO_CSP
        htmx_settled(page)  # htmx's `load` requests, swapped in
        assert page.evaluate("window.__violations") == [], path
        assert console == [], path

    visit("/accounts/login/")
    page.fill("input[name=username]", "ops")
    page.fill("input[name=password]", "pw-ops-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    for path in ("/", "/nodes/", f"/nodes/{node.name}/", "/pools/training/", "/quotas/", "/projects/",
                 "/projects/vision/", "/workloads/",
                 f"/workloads/{workload.pk}/", "/workloads/new/", f"/workloads/new/?from={workload.pk}",
                 "/config/history/", "/profile/permissions/", "/profile/", "/admin/",
                 "/admin/pools/pool/", f"/admin/pools/pool/{pool.pk}/change/", "/admin/auth/user/add/",
                 "/api/workloads/"):  # JSON to a browser too: DRF's browsable API would need inline styles
        visit(path)
    # A fragment swapped in by htmx: the nodes table, filtered.
    page.goto(f"{live_server.url}/nodes/")
    page.locator("input[type=search]").first.fill("h100")
    expect(page.locator("[data-testid=nodes-table] tbody tr")).to_have_count(2)
    htmx_settled(page)
    assert page.evaluate("window.__violations") == [] and console == []

    # The watch itself: a style attribute written into the page is refused and reported.
    page.evaluate("document.body.insertAdjacentHTML('beforeend', '<b style=\"color: red\">x</b>')")
    page.wait_for_function("window.__violations.length > 0")
    assert page.evaluate("window.__violations")[0].startswith("style-src-attr refused inline")


# Every request htmx sends (after static/osmo/pages.js had its say), by the id of the element that sent it.
RECORD_REQUESTS = """
window.__requests = [];
document.addEventListener("htmx:beforeRequest", (event) => window.__requests.push(event.detail.elt.id));
"""
HIDE = "Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'})"
SHOW = "Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'visible'})"


def test_polls_pause_while_the_tab_is_hidden_or_a_quota_cell_has_the_focus(live_server, page, world, staff, settings):
    """What htmx's trigger filters did before the policy refused their eval: the page's clock is Playwright's,
    moved by hand, over the site's own 5 s period (conftest.py's short_polls undone: the clock costs no time)."""
    settings.LIVE_POLL_MS = 5_000
    page.clock.install()
    page.add_init_script(RECORD_REQUESTS)
    page.goto(f"{live_server.url}/accounts/login/?next=/nodes/")
    page.fill("input[name=username]", "ops")
    page.fill("input[name=password]", "pw-ops-123")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/nodes/")

    def polls(after_ms: int) -> list[str]:
        page.evaluate("window.__requests = []")
        page.clock.run_for(after_ms)
        htmx_answered(page)
        return page.evaluate("window.__requests")

    assert polls(5_100) == ["nodes-table"]
    page.evaluate(HIDE)
    assert polls(10_100) == []
    page.evaluate(SHOW)
    assert polls(5_100) == ["nodes-table"]

    page.goto(f"{live_server.url}/quotas/")
    htmx_answered(page)
    listing = page.locator("[data-testid=quotas-table]").get_attribute("id")
    page.locator(".quota-cell input:not([type=hidden])").first.focus()
    assert polls(10_100) == []  # a refresh would replace the cell being typed in
    page.evaluate("document.activeElement.blur()")
    assert polls(5_100) == [listing]

    # A region that loads itself (hx-trigger "load") still does in a hidden tab: that is no poll.
    hidden = page.context.new_page()
    hidden.add_init_script(HIDE)
    hidden.goto(f"{live_server.url}/pools/training/")
    expect(hidden.locator("#queue-summary")).to_contain_text("0 pending, 0 admitted or running.")


def test_a_live_region_swapped_after_a_style_was_set_through_the_cssom_breaks_no_policy(live_server, page, world,
                                                                                       staff, settings):
    """A style set through the CSSOM (a screenshot hiding the caret, an extension, a reader's own tool) is allowed;
    htmx settling a swapped region copied it back as a `style` attribute, which the policy refuses. CI saw that when
    a workload page's poll came between a screenshot and the next click."""
    settings.LIVE_POLL_MS = 5_000  # the site's own: a poll of ours between the style and the swap below would drop it
    submit(world["researcher"], body(name="csp-settle", resources={"gpu": 2, "cpu": "2", "memory": "8Gi"}))
    workload = Workload.objects.get(name="csp-settle")
    page.add_init_script(RECORD_VIOLATIONS)
    sign_in(page, live_server, f"/workloads/{workload.pk}/", username="ops", password="pw-ops-123")
    expect(page.locator("#cancel-message")).to_be_visible()
    page.evaluate("document.getElementById('cancel-message').style.setProperty('caret-color', 'transparent')")
    page.evaluate("""() => new Promise((settled) => {
        document.body.addEventListener("htmx:afterSettle", settled, {once: true});
        htmx.ajax("GET", location.pathname, {source: "#workload-live", target: "#workload-live", swap: "outerHTML"});
    })""")
    expect(page.locator("#cancel-message")).to_be_visible()
    assert page.evaluate("window.__violations") == []
