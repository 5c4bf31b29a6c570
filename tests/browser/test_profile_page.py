"""The profile page in Chromium, as a researcher uses it: a token created (its secret shown once), used by the API,
listed with its last use and revoked; notification choices saved and read back; at a laptop's and a phone's
width (the README's screenshot `profile.png` comes from here)."""

import pytest
from rest_framework.test import APIClient

from pools.models import AccessToken
from scheduling.models import NotificationPreference
from tests.support.browser import HANG_MS, sign_in

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("size", [(1440, 900), (390, 844)], ids=["laptop", "phone"])
def test_a_researcher_makes_a_token_and_chooses_notifications_on_the_profile_page(
        live_server, browser, world, screenshot, size):
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    page = context.new_page()
    page.set_default_timeout(HANG_MS)
    try:
        sign_in(page, live_server, "/profile/", username="researcher", password="pw-res-123")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        page.fill("#token-form input[name=name]", "laptop")
        page.fill("#token-form input[name=days]", "7")
        page.click("#token-create")
        secret = page.locator("#new-token-secret").inner_text()
        assert secret.startswith("osmo_")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert client.get("/api/profile/").json()["id"] == "researcher"

        page.goto(f"{live_server.url}/profile/")
        assert page.locator("#new-token-secret").count() == 0 and secret not in page.content()
        assert page.locator("#token-laptop").count() == 1 and "never" not in page.locator("#token-laptop").inner_text()

        page.check("#notifications-form input[value=failed]")
        page.check("#notifications-form input[value=pending]")
        page.fill("#notifications-form input[name=pending_minutes]", "45")
        page.fill("#notifications-form input[name=webhook_url]", "https://chat.example.org/hooks/alice")
        page.click("#notifications-save")
        page.wait_for_url(f"{live_server.url}/profile/")
        row = NotificationPreference.objects.get(user=world["researcher"])
        assert (row.transitions, row.pending_minutes, row.webhook_url) == (
            ["failed", "pending"], 45, "https://chat.example.org/hooks/alice")
        assert page.locator("#notifications-form input[value=failed]").is_checked()
        assert not page.locator("#notifications-form input[value=completed]").is_checked()
        if size[0] == 1440:
            screenshot(page, "profile", full_page=True)

        page.click("#token-laptop button[type=submit]")
        page.wait_for_url(f"{live_server.url}/profile/")
        assert page.locator("#token-laptop").count() == 0 and "Token laptop revoked" in page.content()
        assert not AccessToken.objects.filter(user=world["researcher"]).exists()
        assert client.get("/api/profile/").status_code == 401
    finally:
        context.close()
