"""One layout on every page (templates/pages/base.html): the permissions page has the whole nav, the sign-in page
shows its refusals in the site's style, and 404 and 500 answer styled pages (the 500 one without the database)."""

import re

import pytest
from django.test import Client, RequestFactory

from osmo_site.errors import server_error

NAV = ["nav-pools", "nav-nodes", "nav-quotas", "nav-projects", "nav-workloads", "nav-usage", "nav-history", "nav-user"]


def nav_ids(html: str) -> list[str]:
    return re.findall(r'<a id="(nav-[a-z]+)"', html)


@pytest.mark.django_db
def test_the_permissions_page_has_the_same_header_as_every_page(client, member):
    client.force_login(member)

    permissions = client.get("/profile/permissions/").content.decode()
    nodes = client.get("/nodes/").content.decode()

    assert nav_ids(permissions) == nav_ids(nodes) == NAV
    assert 'id="nav-user" href="/profile/permissions/" title="Effective permissions" aria-current="page"' in permissions
    assert 'id="sign-out"' in permissions and 'href="/static/osmo/site.css"' in permissions


@pytest.mark.django_db
def test_the_sign_in_page_shows_a_wrong_password_in_the_site_style(client, member):
    html = client.get("/accounts/login/").content.decode()
    assert "site.css" in html and nav_ids(html) == [] and 'id="sign-out"' not in html

    answer = client.post("/accounts/login/", {"username": "researcher", "password": "wrong"})

    assert answer.status_code == 200
    assert '<p role="alert" class="form-alert" id="signin-error">Your user name and password did not match.</p>' in (
        answer.content.decode())


@pytest.mark.django_db
def test_the_sign_in_lockout_answers_429_in_the_site_style(member):
    client = Client()
    for _ in range(5):
        client.post("/accounts/login/", {"username": "researcher", "password": "wrong"})

    answer = client.post("/accounts/login/", {"username": "researcher", "password": "pw-res-123"})

    assert answer.status_code == 429
    assert re.search(r'<p role="alert" class="form-alert" id="signin-refused">Too many failed sign-ins for this '
                     r'user name from your address: try again in (\d+ seconds|1 minute)\.</p>', answer.content.decode())


@pytest.mark.django_db
def test_a_page_that_is_not_there_answers_a_styled_404_with_the_path_escaped(client, member):
    answer = client.get("/no-such-page/<b>x</b>")
    html = answer.content.decode()

    assert answer.status_code == 404 and answer["Content-Type"].startswith("text/html")
    assert 'href="/static/osmo/site.css"' in html and 'id="error-404"' in html
    assert "<b>x</b>" not in html and "/no-such-page/%3Cb%3Ex%3C/b%3E" in html
    assert nav_ids(html) == []  # nobody signed in: the brand only

    client.force_login(member)
    html = client.get("/pools/bravo-secret/").content.decode()
    assert 'id="error-404"' in html and nav_ids(html) == NAV and 'id="sign-out"' in html


def test_a_server_error_answers_a_styled_page_without_the_database():
    # No django_db mark: a query here would fail the test.
    answer = server_error(RequestFactory().get("/nodes/"))
    html = answer.content.decode()

    assert answer.status_code == 500 and answer["Content-Type"].startswith("text/html")
    assert 'href="/static/osmo/site.css"' in html and 'id="error-500"' in html and "X-Request-ID" in html
    assert nav_ids(html) == [] and 'id="sign-out"' not in html
