"""The site's 404 and 500 answers: JSON (`{"detail"}`, as every API error) under /api/, Django's pages elsewhere.
A URL that matches no route never reaches DRF, whose handler answers JSON for everything a view raises."""

from django.http import JsonResponse
from django.views import defaults


def _api(request) -> bool:
    return request.path_info.startswith("/api/")


def not_found(request, exception=None):
    if _api(request):
        return JsonResponse({"detail": f"No API endpoint or object at {request.path_info}"}, status=404)
    return defaults.page_not_found(request, exception)


def server_error(request):
    if _api(request):
        return JsonResponse({"detail": "Internal server error; the request id in X-Request-ID finds it in the log"},
                            status=500)
    return defaults.server_error(request)
