"""The tables of the pages, declared once. A Column says where its value comes from, how it is shown,
how it sorts and what its CSV header is; the HTML table, the HTMX fragment and the CSV export all read
these declarations, so what is shown and what is downloaded cannot drift apart.

Rows are mappings: `QuerySet.values(*table.fields(columns))` for nodes and revisions (cheap at 150,000
rows, no model instances), `pools.usage.pool_rows()` for pools. Node figures mean what `usage.node_row`
means (cores from millicores, memory and storage allocatable in bytes); a test holds them equal.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from pools.fleet.usage import cores, last_contact, status_severity
from pools.models.inventory import last_contact_sql
from pools.models.visibility import redact

from . import formatting

NUMERIC_KINDS = frozenset({"number", "cores", "bytes", "measured"})


@dataclass(frozen=True, slots=True)
class RowContext:
    """What a cell may depend on besides its row: which pools the viewer may see (None: all of them,
    for staff; `Access.visible_pool_names`), whether they are staff, and one `now` for every relative time
    of the response."""

    visible_pools: frozenset[str] | None = None
    staff: bool = False
    now: datetime = field(default_factory=timezone.now)

    def pools(self, names: Iterable[str]) -> list[str]:
        # A node can sit in a pool the viewer may not see; that pool's name must not show (nor its platforms').
        return redact(names, self.visible_pools)

    def platforms(self, names: Iterable[str]) -> list[str]:
        return redact(names, self.visible_pools, platforms=True)


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    title: str = ""
    css: str = ""
    href: str = ""
    iso: str = ""
    items: tuple[tuple[str, str], ...] = ()  # (text, href) for list cells


@dataclass(frozen=True)
class Column:
    key: str  # in URLs (`sort=`, `cols=`), element ids and data-col attributes
    label: str
    value: Callable[[Mapping, RowContext], Any]
    kind: str = "text"  # text | number | measured (None: "not measured") | cores | bytes | status | time | list | bool
    fields: tuple[str, ...] = ()  # what `values()` must fetch for `value`
    sort: tuple = ()  # order_by fields or expressions (database tables); empty: not sortable
    default: bool = True  # shown until the user chooses columns
    unit: str = ""  # written into the CSV header, where figures are raw
    href: Callable[[Mapping, RowContext], str] | None = None
    item_href: Callable[[str], str] | None = None
    title: Callable[[Mapping], str] | None = None
    help: str = ""
    csv_fields: tuple[str, ...] | None = None  # when the CSV needs less than the page (no hover text)
    summable: bool = False  # a count (GPUs, cores, bytes, nodes): the table's totals row sums it
    compact: str = ""  # a list shown as a count of these ("2 taints"), opened on demand
    phone: bool = False  # shown on a phone; the row's other columns open from its first cell

    @property
    def export_fields(self) -> tuple[str, ...]:
        return self.fields if self.csv_fields is None else self.csv_fields

    @property
    def numeric(self) -> bool:
        return self.kind in NUMERIC_KINDS

    @property
    def sortable(self) -> bool:
        return bool(self.sort)

    @property
    def csv_header(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def cell(self, row: Mapping, ctx: RowContext) -> Cell:
        value = self.value(row, ctx)
        href = self.href(row, ctx) if self.href else ""
        title = self.title(row) if self.title else ""
        if self.kind == "number":
            return Cell(formatting.number(value), href=href, title=title)
        if self.kind == "measured":
            return Cell(formatting.measured(value), title=title)
        if self.kind == "cores":
            return Cell(formatting.cores(value, places=1), title=title or f"{formatting.cores(value)} cores")
        if self.kind == "bytes":
            return Cell(formatting.size(value), title=title or f"{formatting.number(value)} bytes")
        if self.kind == "time":
            return Cell(formatting.ago(value, ctx.now), title=formatting.absolute(value),
                        iso=value.isoformat() if value else "")
        if self.kind == "list":
            items = tuple((str(item), self.item_href(item) if self.item_href else "") for item in value)
            return Cell(", ".join(text for text, _ in items), items=items, title=title)
        if self.kind == "bool":
            return Cell("yes" if value else "no", title=title)
        if self.kind == "status":
            return Cell(str(value), css=status_css(str(value)), title=title, href=href)
        return Cell("" if value is None else str(value), href=href, title=title)


def status_css(status: str) -> str:
    if status in ("Ready", "ONLINE", "ADMITTED", "RUNNING", "COMPLETED"):
        return "status-ok"
    if status in ("PENDING", "SCHEDULING", "PREEMPTING"):
        return "status-warn"
    if status == "Cordoned":
        return "status-cordoned"
    if status in ("Unknown", "MAINTENANCE"):
        return "status-warn" if status == "MAINTENANCE" else "status-unknown"
    return "status-bad"


class Table:
    def __init__(self, name: str, title: str, columns: Iterable[Column], *, default_sort: str,
                 key: Callable[[Mapping], str], key_fields: tuple[str, ...] = ()):
        self.name = name  # the CSV file name, the preference row, the HTML ids ("nodes-table")
        self.title = title
        self.columns = tuple(columns)
        self.by_key = {column.key: column for column in self.columns}
        self.default_sort = default_sort
        self.key = key
        self.key_fields = key_fields
        assert len(self.by_key) == len(self.columns), f"duplicate column keys in {name}"
        assert not default_sort or default_sort.lstrip("-") in self.by_key, f"unknown default sort in {name}"

    @property
    def default_columns(self) -> list[Column]:
        return [column for column in self.columns if column.default]

    def choose(self, keys: Iterable[str] | None) -> list[Column]:
        """The known columns among `keys`, in that order; the defaults when none is known."""
        chosen, seen = [], set()
        for key in keys or ():
            column = self.by_key.get(key)
            if column is not None and key not in seen:
                chosen.append(column)
                seen.add(key)
        return chosen or self.default_columns

    def fields(self, columns: Iterable[Column], *, export: bool = False) -> list[str]:
        """What `values()` must fetch to show `columns` (or, with `export`, to write them to CSV)."""
        names = dict.fromkeys(() if export else self.key_fields)
        for column in columns:
            names.update(dict.fromkeys(column.export_fields if export else column.fields))
        return list(names)


def _get(name: str) -> Callable[[Mapping, RowContext], Any]:
    return lambda row, ctx: row[name]


def _pool_url(name: str) -> str:
    return reverse("pages:pool", args=[name])


def _taint(taint: Mapping) -> str:
    """As kubectl prints them: key=value:Effect, or key:Effect without a value."""
    value = taint.get("value")
    key = f"{taint.get('key', '')}={value}" if value else taint.get("key", "")
    return f"{key}:{taint.get('effect', '')}"


def _node_url(row: Mapping, ctx: RowContext) -> str:
    # Kubernetes names have no "/"; a row that has one anyway is shown, not linked.
    return "" if "/" in row["name"] else reverse("pages:node", args=[row["name"]])


def _cores_of(name: str) -> Callable[[Mapping, RowContext], Decimal]:
    return lambda row, ctx: cores(row[name])


def _figure(key: str, label: str, source: str, kind: str = "number", unit: str = "", help: str = "",
            phone: bool = False, default: bool = True) -> Column:
    return Column(key, label, _cores_of(source) if kind == "cores" else _get(source), kind=kind, fields=(source,),
                  sort=(source,), unit=unit, help=help, summable=True, phone=phone, default=default)


NODES = Table("nodes", "Nodes", key=lambda row: row["name"], key_fields=("pk", "name"), default_sort="node",
              columns=(
    Column("node", "Node", _get("name"), fields=("name",), sort=("name",), href=_node_url, phone=True),
    Column("status", "Status", _get("status"), kind="status", fields=("status", "reasons"),
           sort=(status_severity(), "status"), title=lambda row: "; ".join(row["reasons"]),
           help="Ready, Unknown, or Not ready with its first reason; sorts by severity: Ready, Not ready, Unknown "
                "(descending: worst first)",
           csv_fields=("status",), phone=True),
    Column("pools", "Pools", lambda row, ctx: ctx.pools(row["pool_names"]), kind="list", fields=("pool_names",),
           item_href=_pool_url),
    Column("platforms", "Platforms", lambda row, ctx: ctx.platforms(row["platform_names"]), kind="list",
           fields=("platform_names",), help="As pool/platform"),
    Column("gpu_product", "GPU type", _get("gpu_product"), fields=("gpu_product",), sort=("gpu_product",)),
    _figure("gpu_total", "GPU total", "gpu_total", help="Capacity"),
    _figure("gpu_used", "GPU used", "gpu_used", help="Requested by running pods"),
    _figure("gpu_free", "GPU free", "gpu_free", help="Allocatable minus used", phone=True),
    _figure("gpu_unhealthy", "GPU unhealthy", "gpu_unhealthy", help="Capacity minus allocatable"),
    _figure("cpu_used", "CPU used", "cpu_requested", "cores", "cores", help="Requested by pods"),
    _figure("cpu_total", "CPU total", "cpu_allocatable", "cores", "cores", help="Allocatable"),
    _figure("memory_used", "Memory used", "memory_requested", "bytes", "bytes", help="Requested by pods"),
    _figure("memory_total", "Memory total", "memory_allocatable", "bytes", "bytes", help="Allocatable"),
    _figure("storage", "Storage", "storage_allocatable", "bytes", "bytes", help="Allocatable ephemeral storage"),
    Column("taints", "Taints", lambda row, ctx: [_taint(t) for t in row["taints"]], kind="list", fields=("taints",),
           compact="taint"),
    Column("last_seen", "Last seen", lambda row, ctx: last_contact(row["last_seen"], row["backend__last_sync_at"]),
           kind="time", fields=("last_seen", "backend__last_sync_at"), sort=(last_contact_sql(),),
           help="The sync's last contact with the node's backend"),
    Column("labels", "Labels", lambda row, ctx: row["label_text"].split(", ") if row["label_text"] else [],
           kind="list", fields=("label_text",), default=False, help="key=value, sorted by key", compact="label"),
    Column("reasons", "Reasons", _get("reasons"), kind="list", fields=("reasons",), default=False),
    Column("backend", "Backend", _get("backend__name"), fields=("backend__name",), sort=("backend__name",),
           default=False),
    Column("sharing", "Sharing", _get("sharing"), fields=("sharing",), sort=("sharing",), default=False,
           help="RESERVED: one pool; SHARED: several; UNUSED: none besides default"),
    Column("schedulable", "Schedulable", lambda row, ctx: not row["unschedulable"], kind="bool",
           fields=("unschedulable",), sort=("unschedulable",), default=False, help="No when cordoned"),
    Column("last_change", "Last change", _get("last_seen"), kind="time", fields=("last_seen",), sort=("last_seen",),
           default=False, help="When the sync last wrote a change to the node, or listed it again"),
))

POOLS = Table("pools", "Pools", key=lambda row: row["name"], default_sort="name", columns=(
    Column("name", "Pool", _get("name"), sort=("name",), href=lambda row, ctx: _pool_url(row["name"]), phone=True),
    Column("description", "Description", _get("description"), sort=("description",)),
    Column("status", "Status", _get("status"), kind="status", sort=("status",),
           help="ONLINE: backend synced recently; OFFLINE: backend silent; MAINTENANCE: new work refused", phone=True),
    Column("backend", "Backend", _get("backend"), sort=("backend",)),
    _figure("gpu_total", "GPU total", "gpu_total"),
    _figure("gpu_used", "GPU used", "gpu_used"),
    _figure("gpu_free", "GPU free", "gpu_free", help="Free on Ready, uncordoned nodes: what new work can use now",
            phone=True),
    _figure("gpu_free_not_ready", "GPU free, not ready", "gpu_free_not_ready", default=False,
            help="Free on nodes that are not Ready, Unknown or cordoned: not usable now"),
    _figure("gpu_unhealthy", "GPU unhealthy", "gpu_unhealthy"),
    _figure("gpu_guaranteed", "GPU guaranteed", "gpu_guaranteed",
            help="Projects' use within what they deserve (pools.quotas.fairshare.split_use)"),
    _figure("gpu_borrowed", "GPU borrowed", "gpu_borrowed",
            help="Projects' use above what they deserve, low-priority work first (reclaimable)"),
    _figure("node_count", "Nodes", "node_count"),
    Column("cpu_used", "CPU used", _get("cpu_used"), kind="cores", sort=("cpu_used",), unit="cores", summable=True),
    Column("cpu_total", "CPU total", _get("cpu_total"), kind="cores", sort=("cpu_total",), unit="cores",
           summable=True),
    _figure("memory_used", "Memory used", "memory_used", "bytes", "bytes"),
    _figure("memory_total", "Memory total", "memory_total", "bytes", "bytes"),
    Column("platforms", "Platforms", _get("platforms"), kind="list", default=False),
))

PLATFORMS = Table("platforms", "Platforms", key=lambda row: row["name"], default_sort="", columns=(
    Column("name", "Platform", _get("name"), phone=True),
    Column("default", "Default", _get("default"), kind="bool"),
    Column("node_count", "Nodes", _get("node_count"), kind="number", href=lambda row, ctx: _platform_nodes(row)),
    *(Column(key, label, _get(key), kind="number", href=lambda row, ctx, extra=extra: _platform_nodes(row, **extra),
             help=help, phone=key == "gpu_free") for key, label, extra, help in (
        ("gpu_total", "GPU total", {"sort": "-gpu_total"}, "Capacity"),
        ("gpu_used", "GPU used", {"sort": "-gpu_used"}, "Requested by running pods"),
        ("gpu_free", "GPU free", {"status": "Ready", "sort": "-gpu_free"},
         "Free on Ready, uncordoned nodes: what new work can use now"),
        ("gpu_free_not_ready", "Free, not ready", {"status": "attention", "sort": "-gpu_free"},
         "Free on nodes that are not Ready, Unknown or cordoned: not usable now"),
        ("gpu_unhealthy", "GPU unhealthy", {"sort": "-gpu_unhealthy"}, "Capacity minus allocatable"),
    )),
    Column("node_selector", "Node selector", lambda row, ctx: [f"{k}={v}" for k, v in row["node_selector"].items()],
           kind="list", help="Effective, from the merged pod templates"),
    Column("tolerations", "Tolerations", lambda row, ctx: [_toleration(t) for t in row["tolerations"]], kind="list"),
    Column("validations", "Resource validations", lambda row, ctx: [rule.get("assert_message") or
                                                                    rule.get("operator", "") for rule in
                                                                    row["resource_validations"]], kind="list",
           default=False),
))


def _platform_nodes(row: Mapping, **extra: str) -> str:
    """The nodes table behind a platform's figure: its nodes, sorted by that figure."""
    platform = f"{row['pool']}/{row['name']}"
    return f"{reverse('pages:nodes')}?{urlencode({'platform': platform, **extra})}"


def _toleration(toleration: Mapping) -> str:
    key = toleration.get("key") or "*"
    operator = toleration.get("operator") or "Equal"
    text = f"{key}={toleration.get('value', '')}" if operator == "Equal" else f"{key} {operator}"
    return f"{text}:{toleration['effect']}" if toleration.get("effect") else text


REVISIONS = Table("revisions", "Configuration revisions", key=lambda row: f"{row['kind']}-{row['number']}",
                  key_fields=("kind", "number", "name", "action"), default_sort="-time", columns=(
    # Numbers count per kind and the list mixes kinds: "pool r12" says which count a number is in.
    Column("number", "Revision", lambda row, ctx: f"{row['kind'].lower().replace('_', ' ')} r{row['number']}",
           fields=("kind", "number"), sort=("number",), phone=True),
    Column("type", "Type", lambda row, ctx: row["kind"].lower().replace("_", " "), fields=("kind",),
           sort=("kind",), phone=True),
    Column("name", "Name", _get("name"), fields=("name",), sort=("name",), phone=True),
    Column("action", "Action", _get("action"), fields=("action",), sort=("action",)),
    Column("author", "Author", _get("author_name"), fields=("author_name",), sort=("author_name",)),
    Column("time", "Time", _get("created_at"), kind="time", fields=("created_at",), sort=("created_at",)),
    Column("description", "Description", _get("description"), fields=("description",)),
))

# ---- quotas and projects (rows: pools.pages.quota_pages) ----------------------------------------------

_RESOURCES = (("gpu", "GPU", "number", ""), ("cpu", "CPU", "cores", "cores"), ("memory", "Memory", "bytes", "bytes"))
_QUOTA_FIGURES = (
    ("deserved", "deserved", "Guaranteed to it (a department without a quota of its own: its projects' sum)"),
    ("limit", "limit", "At most this much, borrowing included (-1, shown as none: no limit)"),
    ("weight", "weight", "Over-quota weight: None (never above deserved), Lowest (borrows, no over-quota share), "
                         "Low, Medium, High"),
    ("allocated", "allocated", "Requested by its running pods in this pool"),
    ("pending", "pending", "Requested by its waiting workloads in this pool (STARVED: they wait while allocated is "
                           "under deserved)"),
    ("fair_share", "fair share", "What it would get now (deserved, then idle capacity by weight, by demand: "
                                 "allocated + pending)"),
    ("over_quota", "over quota", "Allocated above deserved: borrowed, and reclaimable"),
)


def _quota_columns(resource: str, label: str, kind: str, unit: str) -> tuple[Column, ...]:
    return tuple(Column(f"{resource}_{key}", f"{label} {text}", _get(f"{resource}_{key}"),
                        kind="text" if key == "weight" else kind, unit="" if key == "weight" else unit,
                        default=resource == "gpu", help=help)
                 for key, text, help in _QUOTA_FIGURES) + ((Column(
                     "starved", "Starved", _get("starved"), kind="bool",
                     help="Work of it waits in this pool while its GPUs allocated are under its deserved quota"),)
                     if resource == "gpu" else ())


def _quota_key(row: Mapping) -> str:
    return f"{row['pool']}/{row['department']}/{row['project'] or ''}"


QUOTA_IDENTITY = ("pool", "department", "project")  # the CSV's first columns, whatever is chosen
QUOTA_SHARED = "shared_usage"  # the CSV's last column, whatever is chosen (the page says it beside the name)
QUOTAS = Table("quotas", "Quotas", key=_quota_key, default_sort="", columns=(
    Column("unit", "Department / project", lambda row, ctx: row["project"] or row["department"],
           help="Each department, then its projects"),
    Column("pool", "Pool", _get("pool"), default=False),
    Column("department", "Department", _get("department"), default=False),
    Column("project", "Project", _get("project"), default=False, help="Empty on the department's own row"),
    *(column for resource in _RESOURCES for column in _quota_columns(*resource)),
    Column("shared_usage", "Shared usage", _get("shared_usage"), kind="bool", default=False,
           help="Some of its pods have no pool label and run on nodes of several pools: they count in each"),
))


def _gpus(name: str) -> Callable[[Mapping, RowContext], Any]:
    """A sum of GPU quotas as a figure: 8, not 8.00."""
    def value(row, ctx):
        number = row[name]
        if number is None:
            return 0
        number = Decimal(number)
        return number.quantize(Decimal(1)) if number == number.to_integral_value() else number.normalize()
    return value


def _project_url(name: str) -> str:
    return reverse("pages:project", args=[name])


PROJECTS = Table("projects", "Projects", key=lambda row: row["name"], key_fields=("name",), default_sort="name",
                 columns=(
    Column("name", "Project", _get("name"), fields=("name",), sort=("name",),
           href=lambda row, ctx: _project_url(row["name"]), phone=True),
    Column("department", "Department", _get("department__name"), fields=("department__name",),
           sort=("department__name",)),
    Column("namespace", "Namespace", _get("namespace"), fields=("namespace",), sort=("namespace",)),
    Column("gpu_deserved", "GPU deserved", _gpus("gpu_deserved"), kind="number", fields=("gpu_deserved",),
           sort=("gpu_deserved",), help="Over the pools you may use", phone=True, summable=True),
    # Not sortable: summed per page from the pods of the rows shown (quota_pages.with_allocated), since a sum
    # per project in the database would read the pods once per project.
    Column("gpu_allocated", "GPU allocated", _get("gpu_allocated"), kind="number", fields=("namespace",),
           help="Requested by its running pods, each pod counted once", summable=True),
    Column("members", "Members", _get("member_count"), kind="number", fields=("member_count",),
           sort=("member_count",), help="Users and roles its document names"),
    Column("description", "Description", _get("description"), fields=("description",), default=False),
    Column("default_pools", "Default pools", lambda row, ctx: ctx.pools(row["default_node_pools"]), kind="list",
           fields=("default_node_pools",), item_href=_pool_url, default=False,
           help="Its own list (empty: its department's, then default)"),
))

MEMBERS = Table("members", "Members", key=lambda row: f"{row['kind']}:{row['name']}", default_sort="", columns=(
    Column("member", "Member", lambda row, ctx: row["name"] or "everyone"),
    Column("kind", "Kind", _get("kind"), help="user, role, pool (its users) or everyone"),
    Column("how", "How", _get("how")),
))

# ---- the audit log (rows: pools.pages.audit_page) ----------------------------------------------------------

def _actor(row, ctx) -> str:
    name = row["actor"] or row["actor_kind"]
    return f"{name} (token {row['token']})" if row["token"] else name


AUDIT = Table("audit", "Audit log", key=lambda row: str(row["id"]), key_fields=("id",), default_sort="-time",
              columns=(
    Column("time", "Time", _get("at"), kind="time", fields=("at",), sort=("at",), phone=True),
    Column("actor", "Who", _actor, fields=("actor", "actor_kind", "token"), sort=("actor",), phone=True),
    Column("kind", "Kind", _get("kind"), fields=("kind",), sort=("kind",)),
    Column("object", "Object", _get("object"), fields=("object",), sort=("object",), phone=True),
    Column("action", "Action", _get("action"), fields=("action",), sort=("action",), phone=True),
    Column("summary", "Change", _get("summary"), fields=("summary",)),
    Column("address", "From", _get("address"), fields=("address",), sort=("address",)),
    Column("request", "Request id", _get("request_id"), fields=("request_id",), default=False),
))

TABLES = {table.name: table for table in (NODES, POOLS, PLATFORMS, REVISIONS, QUOTAS, PROJECTS, MEMBERS, AUDIT)}
