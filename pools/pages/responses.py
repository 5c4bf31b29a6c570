"""One URL, three answers: the page, the fragment an HTMX request targets, or the CSV download."""

from django.shortcuts import render
from django.utils.cache import patch_vary_headers


def respond(request, template: str, context: dict, fragments: dict[str, str]):
    """The page, or for HTMX the fragment of `request.htmx.target` (the first one when it names none).
    Both vary on the HTMX headers, so no cache hands a fragment to a full page load or the reverse."""
    if request.htmx:
        template = fragments.get(request.htmx.target or "", next(iter(fragments.values())))
    response = render(request, template, context)
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


def wants_csv(request) -> bool:
    return request.GET.get("export") == "csv"
