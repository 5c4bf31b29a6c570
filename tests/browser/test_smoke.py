import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_login_page_renders_in_chromium(live_server, page):
    page.goto(f"{live_server.url}/accounts/login/")
    assert page.locator("input[name=username]").count() == 1
