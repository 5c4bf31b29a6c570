"""Every write route under /api/ answers with and without its trailing slash, and never with a redirect: a
client that posts to the path as printed (`curl -X POST .../cancel`) reaches the view (a 301 would make it
resend the POST as a GET, or give up)."""

import re
import uuid

import pytest
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, resolve

from osmo_site.middleware import served_path

pytestmark = pytest.mark.django_db
WRITES = ("post", "put", "patch", "delete")
SAMPLES = ("x1", str(uuid.uuid4()), "1")


def _patterns(resolvers, prefix=""):
    for entry in resolvers:
        if isinstance(entry, URLResolver):
            yield from _patterns(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix, entry


def _writes(callback) -> list[str]:
    if getattr(callback, "actions", None):
        return [method for method in callback.actions if method in WRITES]
    view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    return [method for method in WRITES if view is not None and hasattr(view, method)]


def _example(prefix: str, pattern: URLPattern) -> str | None:
    """A concrete path that the pattern routes, found by trying sample values for its parameters."""
    names = list(pattern.pattern.regex.groupindex)
    for sample in SAMPLES:
        path = "/" + prefix + pattern.pattern.describe().split("'")[1].lstrip("^").rstrip("$").removesuffix("/?")
        for name in names:
            path = path.replace(f"<str:{name}>", sample).replace(f"<slug:{name}>", sample)
        path = _fill_regex(path, names, sample)
        try:
            if resolve(path).func is pattern.callback:
                return path
        except Resolver404:  # a sample the pattern does not take: try the next
            continue
    return None


def _fill_regex(path: str, names: list[str], sample: str) -> str:
    for name in names:
        path = re.sub(rf"\(\?P<{name}>(?:[^()]|\([^()]*\))*\)", sample, path)
    return path


def write_routes():
    routes = []
    for prefix, pattern in _patterns(get_resolver().url_patterns):
        if not prefix.startswith("api/"):
            continue
        methods = _writes(pattern.callback)
        if methods:
            routes.append((prefix, pattern, methods))
    return routes


def test_the_walk_finds_the_write_routes_of_every_router():
    names = {pattern.name for _, pattern, _ in write_routes()}
    assert {"api-workload-cancel", "api-node-cordon", "api-node-uncordon", "osmo-workflow-cancel",
            "config-document", "auth-user-roles", "config-rollback"} <= names


@pytest.mark.parametrize("debug", [False, True])
def test_every_write_route_answers_with_and_without_the_trailing_slash_and_never_redirects(api, settings, debug):
    settings.DEBUG = debug
    redirected, unrouted, missing = [], [], []
    for prefix, pattern, methods in write_routes():
        path = _example(prefix, pattern)
        if path is None:
            missing.append(pattern.name)
            continue
        bare = path.rstrip("/")
        for form in (bare, f"{bare}/"):
            if resolve(served_path(form)).func is not pattern.callback:
                unrouted.append(form)
            for method in methods:
                response = getattr(api, method)(form, {}, format="json")
                if 300 <= response.status_code < 400 or response.status_code >= 500:
                    redirected.append((method.upper(), form, response.status_code))

    assert not missing, missing
    assert not unrouted, unrouted
    assert not redirected, redirected
