"""The log panel of a workload's page (issue 26): `/workloads/<id>/logs/` answers the panel's fragment (where each
replica of each attempt ran, and one replica's log: tail, attempt and replica pickers, a download link), and, for a
followed log, `?since=TOKEN` answers only the new lines, appended to the shown log, with the poller that asks
again (htmx polling every settings.LOG_POLL_MS: no script of ours, so it works under the Content-Security-Policy).
Who may read: as the API (`scheduling.api.logs.readable`): 404 for a workload one may not see, 403 for one whose
request one may not read. Every line is escaped by the template."""

from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse

from pools.access.scoping import access_required
from pools.engine import ConfigError
from pools.models.visibility import access_for
from pools.pages.polls import htmx_interval
from scheduling.listing import bodies
from scheduling.listing.log_params import REFUSED, log_params
from scheduling.models import ALIVE, Workload
from scheduling.run import logs

DEFAULT_TAIL = 200


def _workload(request, pk) -> Workload:
    workload = Workload.objects.visible_to(request).select_related("pool").filter(pk=pk).first()
    if workload is None:
        raise Http404("No such workload, or it is not yours to see.")
    if not bodies.may_read_request(workload, access_for(request)):
        raise PermissionDenied(REFUSED)
    return workload


@access_required()
def workload_logs(request, pk):
    workload = _workload(request, pk)
    try:
        params = log_params(request.GET)
    except ConfigError as exc:
        return render(request, "workloads/_log_view.html", {"error": exc.message}, status=400)
    places = logs.replicas(workload)
    attempt = params.attempt or workload.attempt
    tail = DEFAULT_TAIL if params.tail is None and not params.since else params.tail
    base = reverse("workloads:logs", args=[workload.pk])
    picked = {"attempt": attempt, "replica": params.replica, **({"container": params.container}
                                                                 if params.container else {})}
    context = {"workload": workload, "places": [p.as_dict() for p in places], "attempt": attempt,
               "replica": params.replica, "tail": tail if tail is not None else "", "follow": params.follow,
               "attempts": range(1, workload.attempt + 1), "replicas": range(workload.replicas),
               "download": reverse("api-workload-logs", args=[workload.pk]) + "?" + urlencode(
                   {**picked, "download": 1}),
               "poll_every": htmx_interval(settings.LOG_POLL_MS)}
    try:
        source = logs.choose(workload, attempt=attempt, replica=params.replica, container=params.container)
        found = logs.read(source, tail=tail, since=params.since)
    except logs.LogUnavailable as exc:
        context["error"] = exc.message
        if params.since:  # a poll: say nothing new, ask again while the workload lives
            context.update(text="", poll=_poll(base, picked, params.since, workload))
            return render(request, "workloads/_log_more.html", context)
        if workload.status in ALIVE:
            # No pod yet (or not there yet): ask again, so the log shows once the workload runs.
            context.update(_wait(request, base, picked, tail, params.follow))
        return render(request, _template(request), context)
    context.update(text=found.text.decode("utf-8", "replace"), source=found.source.kind,
                   pod=found.source.replica.pod, node=found.source.replica.node, container=found.source.container,
                   truncated=found.truncated)
    if params.follow and found.source.kind == logs.LIVE:
        context["poll"] = _poll(base, picked, found.position.token or params.since, workload, tail=params.tail)
    if params.since:
        return render(request, "workloads/_log_more.html", context)
    return render(request, _template(request), context)


def _template(request) -> str:
    """The pickers' change asks for the view alone; the page's first load for the whole panel."""
    return "workloads/_log_view.html" if request.GET.get("part") == "view" else "workloads/_log_panel.html"


def _wait(request, base: str, picked: dict, tail, follow: bool) -> dict:
    """The waiter of a view with no log yet: the first load waits for the whole panel, a view the reader chose
    waits for that view with the reader's choices (follow included)."""
    query = {**picked, "tail": tail if tail is not None else ""}
    if _template(request).endswith("_log_panel.html"):
        return {"wait": f"{base}?{urlencode(query)}", "wait_every": htmx_interval(settings.LOG_WAIT_MS),
                "wait_target": "#log-panel-body", "wait_swap": "outerHTML"}
    query.update({"part": "view", **({"follow": 1} if follow else {})})
    return {"wait": f"{base}?{urlencode(query)}", "wait_every": htmx_interval(settings.LOG_WAIT_MS),
            "wait_target": "#log-view", "wait_swap": "innerHTML"}


def _poll(base: str, picked: dict, since: str, workload: Workload, tail=None) -> str:
    """The next poll's URL, while the workload may still write (a finished one's log is whole)."""
    if workload.status not in ALIVE:
        return ""
    query = {**picked, "follow": 1, "since": since} if since else {**picked, "follow": 1, "tail": 0}
    return f"{base}?{urlencode(query)}"
