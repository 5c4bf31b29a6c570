"""One URL, three answers: the page, the fragment an HTMX request targets, or the CSV download."""

from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django_htmx.http import push_url


def is_fragment(request) -> bool:
    # A boosted link or a history restore (the back button on a cache miss) wants the whole page.
    return bool(request.htmx) and not request.htmx.boosted and not request.htmx.history_restore_request


def fragment_target(request) -> str | None:
    return request.htmx.target if is_fragment(request) else None


def respond(request, template: str, context: dict, fragments: dict[str, str]):
    """The page, or for HTMX the fragment of `request.htmx.target` (the first one when it names none).
    Both vary on the HTMX headers, so no cache hands a fragment to a full page load or the reverse."""
    if is_fragment(request):
        template = fragments.get(request.htmx.target or "", next(iter(fragments.values())))
    response = render(request, template, context)
    listing = context.get("listing")
    if is_fragment(request) and listing and (request.htmx.trigger or "").endswith("-filters"):
        # The filter form would push its raw query ("q=&pool=a&status="); push the tidy one instead.
        push_url(response, listing.url)
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


def wants_csv(request) -> bool:
    return request.GET.get("export") == "csv"
