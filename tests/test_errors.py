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


# ---- with DEBUG on (the demo): Django's debug pages are never served under /api/ ---------------------------

DEBUG_ON = {"DEBUG": True, "ROOT_URLCONF": "tests.support.error_urls"}


@pytest.mark.django_db
def test_with_debug_on_an_api_url_that_matches_no_route_answers_json_not_the_debug_page(client, settings):
    settings.DEBUG = True
    answered = client.get("/api/no-such-thing")
    assert answered.status_code == 404 and answered["Content-Type"] == "application/json"
    assert answered.json() == {"detail": "No API endpoint or object at /api/no-such-thing"}
    page = client.get("/no-such-page/")  # pages keep Django's debug page, which lists the routes
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


@pytest.mark.django_db
def test_with_debug_on_an_api_server_error_answers_json_with_the_request_id(settings):
    from django.test import Client

    settings.DEBUG, settings.ROOT_URLCONF = True, DEBUG_ON["ROOT_URLCONF"]
    answered = Client(raise_request_exception=False).get("/api/test-boom")
    assert answered.status_code == 500 and answered["Content-Type"] == "application/json"
    assert answered.json() == {"detail": "Internal server error; the request id in X-Request-ID finds it in the log"}
    assert answered["X-Request-ID"]
    assert b"Traceback" not in answered.content and b"RuntimeError" not in answered.content


@pytest.mark.django_db
def test_with_debug_on_a_method_a_plain_view_does_not_answer_is_json_with_allow(client, settings):
    settings.DEBUG, settings.ROOT_URLCONF = True, DEBUG_ON["ROOT_URLCONF"]
    answered = client.delete("/api/test-only-get")
    assert answered.status_code == 405 and answered["Content-Type"] == "application/json"
    assert answered["Allow"] == "GET, HEAD, OPTIONS"
    assert answered.json() == {"detail": "DELETE is not allowed on /api/test-only-get; allowed: GET, HEAD, OPTIONS"}
    drf = client.delete("/api/pools/")  # DRF's own 405 was JSON already, and stays as it was
    assert drf.status_code in (401, 403, 405) and drf["Content-Type"] == "application/json"
