"""A browser signs in through the stand-in OpenID Connect provider (tests/oidc_provider.py), at laptop and phone
widths: the sign-in page's button, the provider's redirect back, the page asked for, signed in."""

import pytest

from tests.oidc_provider import Provider
from tests.support.browser import HANG_MS
from tests.support.journey import config

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)])
def test_sign_in_through_the_provider(browser, live_server, settings, width, height):
    config("ROLE", {"name": "osmo-ml", "external_roles": ["ml-team"]})
    with Provider() as provider:
        settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID = provider.issuer, provider.client_id
        settings.OIDC_CLIENT_SECRET, settings.OIDC_PROVIDER_NAME = provider.client_secret, "Example SSO"
        provider.user.update(preferred_username="grace", groups=["ml-team"])
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(HANG_MS)
        try:
            page.goto(f"{live_server.url}/accounts/login/?next=/profile/permissions/")
            button = page.locator("#oidc-sign-in")
            assert button.inner_text() == "Sign in with Example SSO"
            assert button.is_visible()
            button.click()
            page.wait_for_url(f"{live_server.url}/profile/permissions/")
            assert "grace" in page.content()
            assert "osmo-ml" in page.content()
        finally:
            context.close()
    assert provider.token_requests and provider.token_requests[-1]["code_verifier"]
