"""osmo_site.errors: JSON 404 and 500 under /api/, Django's pages elsewhere."""

import json

import pytest
from django.test import RequestFactory

from osmo_site.errors import server_error


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/workloads/000000000000000000000000000000000000/", "/api/no-such-thing/"])
def test_an_api_url_that_matches_no_route_answers_json(client, path):
    answered = client.get(path)
    assert answered.status_code == 404 and answered["Content-Type"] == "application/json"
    assert answered.json() == {"detail": f"No API endpoint or object at {path}"}


@pytest.mark.django_db
def test_a_page_url_that_matches_no_route_answers_the_html_page(client):
    answered = client.get("/no-such-page/")
    assert answered.status_code == 404 and answered["Content-Type"].startswith("text/html")


@pytest.mark.parametrize(("path", "json_body"), [("/api/pools/", True), ("/nodes/", False)])
def test_a_server_error_answers_json_under_the_api_only(path, json_body):
    answered = server_error(RequestFactory().get(path))
    assert answered.status_code == 500
    if json_body:
        assert "X-Request-ID" in json.loads(answered.content)["detail"]
    else:
        assert answered["Content-Type"].startswith("text/html")
