"""The site's error answers: JSON (`{"detail"}`, as every API error) under /api/, Django's pages elsewhere.

A URL that matches no route never reaches DRF, whose handler answers JSON for everything a view raises; the
404 and 500 handlers below answer those when DEBUG is off. With DEBUG on, Django answers its HTML debug pages
instead of calling the handlers (a 404's route list, a 500's traceback), and a plain Django view under /api/
can answer an HTML 403 or an empty 405: `ApiErrorsMiddleware` turns every such HTML error under /api/ into
the JSON one, whatever DEBUG says, so an API client never gets a page.

OSMO's own client (it sends `x-osmo-client-version` on every call) reads a 4xx body's `message` and `error_code`
and prints the whole body when they are missing; for it the middleware adds both to the JSON error (`message`
the `detail`; `error_code` as OSMO's service answers: `USAGE` for a refused workflow submission, which the CLI
prints as "Workflow submit failed:" and exits 1, `NOTFOUND` for a 404, `USER` for the rest)."""

import json
from http import HTTPStatus

from django.http import JsonResponse
from django.views import defaults

SERVER_ERROR = "Internal server error; the request id in X-Request-ID finds it in the log"


def _api(request) -> bool:
    return request.path_info.startswith("/api/")


def _not_found_detail(request) -> str:
    return f"No API endpoint or object at {request.path_info}"


def not_found(request, exception=None):
    if _api(request):
        return JsonResponse({"detail": _not_found_detail(request)}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _api(request):
        return JsonResponse({"detail": SERVER_ERROR}, status=500)
    return defaults.server_error(request)


def _detail(request, response) -> str:
    if response.status_code == 404:
        return _not_found_detail(request)
    if response.status_code == 405:
        allowed = response.get("Allow", "")
        return f"{request.method} is not allowed on {request.path_info}" + (f"; allowed: {allowed}" if allowed else "")
    if response.status_code >= 500:
        return SERVER_ERROR
    try:
        return HTTPStatus(response.status_code).phrase
    except ValueError:
        return f"HTTP {response.status_code}"


class ApiErrorsMiddleware:
    """Second in the chain (inside the request id): an error answer under /api/ that is not JSON (Django's
    debug pages, its HTML 403, an empty 405) becomes `{"detail"}` JSON with the same status and headers
    such as Allow. JSON and streamed answers pass untouched."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code < 400 or not _api(request) or getattr(response, "streaming", False):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return _osmo_shaped(request, response) if OSMO_CLIENT_HEADER in request.headers else response
        answer = JsonResponse({"detail": _detail(request, response)}, status=response.status_code)
        for header in ("Allow", "WWW-Authenticate", "Retry-After"):
            if header in response:
                answer[header] = response[header]
        return _osmo_shaped(request, answer) if OSMO_CLIENT_HEADER in request.headers else answer


OSMO_CLIENT_HEADER = "x-osmo-client-version"


def _osmo_code(request, status: int) -> str:
    if status == 404:
        return "NOTFOUND"
    if status == 400 and request.method == "POST" and request.path_info.rstrip("/").endswith("/workflow"):
        return "USAGE"
    return "USER"


def _osmo_shaped(request, response):
    """The error with OSMO's `message` and `error_code` beside our `detail` (5xx: the CLI prints status and body)."""
    if response.status_code >= 500:
        return response
    try:
        body = json.loads(response.content)
    except ValueError:
        return response
    if not isinstance(body, dict) or "detail" not in body or "error_code" in body:
        return response
    body.update(message=str(body["detail"]), error_code=_osmo_code(request, response.status_code))
    response.content = json.dumps(body).encode()
    if response.has_header("Content-Length"):
        response["Content-Length"] = str(len(response.content))
    return response
