"""Requests refused before any view reads them: a NUL character in the URL path or query string (400;
PostgreSQL cannot store one, so a lookup would fail as a 500) and a declared body over
`OSMO_JSON_MAX_BYTES` (413, before anything reads it). API paths answer JSON `{"detail", "field"}`."""

from urllib.parse import unquote

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.urls import Resolver404, resolve

from pools.engine import jsonread


def _refuse(request, status: int, detail: str, field: str) -> HttpResponse:
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": detail, "field": field}, status=status)
    return HttpResponse(detail, status=status, content_type="text/plain; charset=utf-8")


class InputLimitsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.path_info:
            return _refuse(request, 400, "The URL path contains a NUL character", "path")
        query = request.META.get("QUERY_STRING", "")
        if "%00" in query or "\x00" in unquote(query):
            return _refuse(request, 400, "The query string contains a NUL character", "query")
        limit = getattr(settings, "OSMO_JSON_MAX_BYTES", jsonread.MAX_BYTES)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > limit:
            return _refuse(request, 413, f"request body is larger than {limit} bytes", "request body")
        return self.get_response(request)


class ContentSecurityPolicyMiddleware:
    """`Content-Security-Policy: <OSMO_CSP>` on every response that sets none of its own (empty: no header).
    The pages load scripts and styles from our origin only and hold no inline script, handler or style
    attribute; htmx is told not to inject its indicator `<style>` nor to evaluate trigger filters
    (templates/pages/base.html), which the policy would refuse."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        policy = " ".join((getattr(settings, "OSMO_CSP", "") or "").split())
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response


def served_path(path: str, urlconf=None) -> str:
    """`path`, or its other form (with or without the trailing slash) when only that one is routed."""
    try:
        resolve(path, urlconf)
        return path
    except Resolver404:
        pass
    other = path[:-1] if path.endswith("/") else f"{path}/"
    try:
        resolve(other, urlconf)
    except Resolver404:
        return path
    return other


class SlashEitherWayMiddleware:
    """A write (POST, PUT, PATCH, DELETE) to a path routed only in its other form is served as that form.
    CommonMiddleware's APPEND_SLASH would answer it 301 (clients resend a POST as a GET, or not at all: a curl
    cancel did nothing) or, with DEBUG on, fail with a 500. Reads keep the redirect to the canonical page."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in ("GET", "HEAD", "OPTIONS"):
            path = served_path(request.path_info, getattr(request, "urlconf", None))
            if path != request.path_info:
                request.path = request.path[:len(request.path) - len(request.path_info)] + path
                request.path_info = path
        return self.get_response(request)
