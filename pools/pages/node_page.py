"""`describe node` as a page (`/nodes/<name>/`): status and every reason, conditions, taints, labels, the
pods on it with their requests and workloads, its pools and platforms, its recent events; for staff a
cordon/uncordon button. A member sees a node only through a pool they may use (otherwise 404), and only the
names of those pools and their platforms (`RowContext`)."""

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from pools.access.scoping import access_required
from pools.cluster import ClusterError
from pools.engine import ConfigError
from pools.fleet import node_history, usage
from pools.fleet.cordon import cordon_node
from pools.fleet.node_pods import pods_on
from pools.models import Node, SyncLog
from pools.models.dbwrites import NotRecorded

from .formatting import cores, moment, number, size
from .hooks import workload_links
from .tables import NODES, _taint, status_css
from .views import row_context

FIGURES = ("gpu_total", "gpu_used", "gpu_free", "gpu_unhealthy", "cpu_used", "cpu_total", "memory_used",
           "memory_total", "storage")
RECENT_SYNC_LOGS = 5


def node_url(name: str, backend: str = "") -> str:
    url = reverse("pages:node", args=[name])
    return f"{url}?{urlencode({'backend': backend})}" if backend else url


def find_visible_node(request, name: str) -> tuple[Node, list[str]]:
    """The node of that name the viewer may see (of `?backend=` when given), and the other backends that have
    a node of that name the viewer may see; 404 when there is none."""
    nodes = list(Node.objects.visible_to(request).select_related("backend").filter(name=name)
                 .order_by("backend__name"))
    backend = request.GET.get("backend") or request.POST.get("backend")
    chosen = [node for node in nodes if not backend or node.backend.name == backend]
    if not chosen:
        raise Http404(f"No node named {name!r}")
    return chosen[0], [node.backend.name for node in nodes if node is not chosen[0]]


def _links(request, ids: set[str]) -> dict[str, str]:
    links: dict[str, str] = {}
    if ids:
        for _receiver, answer in workload_links.send(sender=Node, request=request, ids=ids):
            links.update(answer or {})
    return links


def _conditions(node: Node, now) -> list[dict]:
    rows = []
    for condition in node.conditions:
        when = parse_datetime(condition.get("last_transition_time") or "")
        # Ready should be True; every other condition (DiskPressure, NetworkUnavailable...) False.
        healthy = condition.get("status") == ("True" if condition.get("type") == "Ready" else "False")
        rows.append({**condition, "when": moment(when, now) if when else None,
                     "css": "status-ok" if healthy else "status-bad"})
    return rows


def node_context(request, node: Node) -> dict:
    ctx = row_context(request, nodes=True)
    row = {name: getattr(node, name) for column in NODES.columns if column.key in FIGURES for name in column.fields}
    pods = pods_on(node, ctx.visible_pools)
    links = _links(request, {pod.workload for pod in pods.pods if pod.workload})
    staff = ctx.staff
    return {
        "node": node,
        "status_css": status_css(node.status),
        "figures": [(column, column.cell(row, ctx)) for column in NODES.columns if column.key in FIGURES],
        "pools": [(name, reverse("pages:pool", args=[name])) for name in ctx.pools(node.pool_names)],
        "platforms": [(name, reverse("pages:pool", args=[name.split("/", 1)[0]]) + "#platforms-region")
                      for name in ctx.platforms(node.platform_names)],
        "conditions": _conditions(node, ctx.now),
        "taints": [_taint(taint) for taint in node.taints],
        "labels": sorted(node.labels.items()),
        "components": sorted(node.components.items()),
        "pods": [{"pod": pod, "cpu": cores(pod.cpu), "memory": size(pod.memory), "gpu": number(pod.gpu),
                  "workload_url": links.get(pod.workload, "")} for pod in pods.pods],
        "hidden_pods": pods.hidden,
        "hidden_gpu": pods.hidden_gpu,
        "last_seen": moment(node.last_seen, ctx.now),
        "updated_at": moment(node.updated_at, ctx.now),
        "last_sync": moment(node.backend.last_sync_at, ctx.now),
        "backend_online": usage.backend_online(node.backend, ctx.now),
        "events": [(row["kind"], row["event"], moment(row["at"], ctx.now))
                   for row in node_history.described(node, ctx.pools)],
        "events_days": settings.OSMO_NODE_EVENTS_KEEP_DAYS,
        "sync_logs": [(log, moment(log.at, ctx.now)) for log in
                      SyncLog.objects.filter(backend=node.backend)[:RECENT_SYNC_LOGS]] if staff else [],
        "may_cordon": staff,
        "nav": "nodes",
    }


@access_required()
def node_detail(request, name: str):
    node, others = find_visible_node(request, name)
    context = node_context(request, node)
    context["others"] = [(backend, node_url(name, backend)) for backend in others]
    context["backend_param"] = request.GET.get("backend", "")
    return render(request, "pages/node.html", context)


@access_required()
@require_POST
def node_cordon(request, name: str):
    node, _ = find_visible_node(request, name)
    cordon = request.POST.get("cordon")
    back = node_url(name, request.POST.get("backend", ""))
    if cordon not in ("true", "false"):
        messages.error(request, "cordon must be true or false.")
        return HttpResponseRedirect(back)
    try:
        stored = cordon_node(name, cordon == "true", backend=node.backend.name)
    except (ConfigError, ClusterError, NotRecorded) as exc:
        messages.error(request, f"Node {name}: {exc.message}")
    else:
        messages.success(request, f"Node {name} {'cordoned' if stored.unschedulable else 'uncordoned'}: "
                                  f"{stored.status}.")
    return HttpResponseRedirect(back)
