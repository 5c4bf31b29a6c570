"""/api/docs/ (Swagger UI) and /api/docs/redoc/ in Chromium, under the site's content security policy, on a
laptop and a phone: the operations of /api/schema/ are rendered, from files our origin serves, with no refusal."""

import datetime as dt
import json

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import expect

from pools.models import AccessToken
from tests.browser.test_csp import RECORD_VIOLATIONS

pytestmark = pytest.mark.django_db(transaction=True)
SHOTS = "/tmp/shots-apidocs"
FUTURE = (timezone.now() + dt.timedelta(days=30)).date().isoformat()


@pytest.mark.parametrize("width,height", [(1440, 900), (390, 844)])
def test_the_api_docs_render_the_operations_within_the_policy(live_server, page, member, width, height,
                                                                screenshot):
    page.set_viewport_size({"width": width, "height": height})
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text)
            if "Content Security Policy" in message.text else None)
    foreign: list[str] = []
    page.on("request", lambda request: foreign.append(request.url)
            if not request.url.startswith(live_server.url) and not request.url.startswith("data:") else None)
    page.add_init_script(RECORD_VIOLATIONS)
    page.goto(f"{live_server.url}/accounts/login/?next=/api/docs/")
    page.fill("input[name=username]", "researcher")
    page.fill("input[name=password]", "pw-res-123")
    with page.expect_response(f"{live_server.url}/api/docs/") as docs:  # the page itself, after the sign-in
        page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/api/docs/")

    response = docs.value
    assert response.status == 200
    assert response.headers["content-security-policy"] == settings.OSMO_CSP
    operation = page.locator("#swagger-ui .opblock-summary-path", has_text="/api/pools/").first
    expect(operation).to_be_visible()
    assert page.locator("#swagger-ui .opblock").count() > 20
    page.screenshot(path=f"{SHOTS}/swagger-{width}.png")
    if width > 600:
        screenshot(page, "api-docs")  # the README's picture
    # An operation opens, and "Try it out" calls the API with the session.
    page.locator("#swagger-ui .opblock-summary", has_text="/api/pools/").first.click()
    page.locator("#swagger-ui .try-out__btn").first.click()
    page.locator("#swagger-ui .execute").first.click()
    expect(page.locator("#swagger-ui .live-responses-table tbody .response-col_status").first).to_have_text("200")
    page.screenshot(path=f"{SHOTS}/swagger-try-{width}.png")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    # A write through the session carries the CSRF token (DRF refuses it with 403 otherwise).
    token_path = "/api/auth/access_token/{name}"
    write = page.locator(f'#swagger-ui .opblock-post:has(.opblock-summary-path[data-path="{token_path}"])')
    write.locator(".opblock-summary").click()
    write.locator(".try-out__btn").click()
    write.locator("input[placeholder=name]").fill("from-swagger")
    write.locator("textarea.body-param__text").fill(json.dumps({"expires_at": FUTURE}))
    write.locator(".execute").click()
    expect(write.locator(".live-responses-table tbody .response-col_status").first).to_have_text("201")
    assert AccessToken.objects.filter(user=member, name="from-swagger").exists()

    page.click("#docs-redoc")
    page.wait_for_url(f"{live_server.url}/api/docs/redoc/")
    expect(page.locator("#redoc h2", has_text="api_root")).to_be_visible()  # a large bundle
    assert page.locator("#redoc [role=menuitem]", has_text="pools").count() > 0
    page.wait_for_load_state("networkidle")
    page.screenshot(path=f"{SHOTS}/redoc-{width}.png")

    assert page.evaluate("window.__violations") == []
    assert console == []
    assert foreign == []
