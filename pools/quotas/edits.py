"""One quota figure changed at a time (the quota pages edit a cell at a time): the owner's document is
exported, that one value replaced, and the whole document written back through the configuration write path,
so the change is checked like an import, recorded as a revision, and refused with the same messages.

A cell is (department or project, pool, resource, field), field being `deserved`, `limit` or
`over_quota_weight`. Values are typed as the documents take them: GPUs as numbers, CPU as cores ("8",
"0.5", "500m"), memory as bytes or a quantity ("512Gi"); a limit of "-1", "none" or nothing is no limit.

Where the owner has no quota for that pool and resource yet, the edit creates it from what the pages show:
a project then deserves 0 (no limit, weight Medium), a department the sum of its projects' (so setting only
its limit or weight does not change what it deserves). The own project of an OSMO pool is edited through the
pool's `resources.gpu` (guarantee, maximum, weight), which it mirrors: GPUs only, in that pool only.
"""

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db.models import Sum

from pools.config import writes
from pools.config.kinds import WriteResult
from pools.engine import ConfigError, check_name
from pools.models import ConfigKind, Project, Quota
from pools.quotas.documents import DEFAULT_WEIGHT, NO_LIMIT, RESOURCES, WEIGHTS

FIELDS = ("deserved", "limit", "over_quota_weight")
KINDS = {"project": ConfigKind.PROJECT, "department": ConfigKind.DEPARTMENT}
_NO_LIMIT_WORDS = ("", "-1", "none", "no limit", "unlimited")
_OSMO_WEIGHTS = {"Lowest": 0, "Low": 1, "Medium": 2, "High": 3}
_PLAIN_NUMBER = re.compile(r"-?\d+(\.\d+)?", re.ASCII)
_LABELS = {"gpu": "GPU", "cpu": "CPU", "memory": "Memory", "deserved": "deserved", "limit": "limit",
           "over_quota_weight": "weight"}


@dataclass(frozen=True)
class Cell:
    kind: str  # project | department
    name: str
    pool: str
    resource: str  # gpu | cpu | memory
    field: str  # deserved | limit | over_quota_weight

    @classmethod
    def parse(cls, text: str) -> "Cell":
        """`kind:name:pool:resource:field`, as the pages write it (names hold no colon)."""
        parts = (text or "").split(":")
        if len(parts) != 5 or parts[0] not in KINDS or parts[3] not in RESOURCES or parts[4] not in FIELDS:
            raise ConfigError(f"{text!r} does not name a quota figure", field="cell")
        kind, name, pool, resource, field = parts
        check_name(name, kind.capitalize())
        check_name(pool, "Pool")
        return cls(kind, name, pool, resource, field)

    @property
    def key(self) -> str:
        return ":".join((self.kind, self.name, self.pool, self.resource, self.field))

    @property
    def label(self) -> str:
        """"GPU deserved of project vision in pool training"."""
        return f"{_LABELS[self.resource]} {_LABELS[self.field]} of {self.kind} {self.name} in pool {self.pool}"


def document_value(cell: Cell, text: str) -> Any:
    """The typed text as the document takes it; refused when it is not a value of that field at all (the
    write path refuses the rest: negative, above the limit, too many decimals...)."""
    text = (text or "").strip()
    if cell.field == "over_quota_weight":
        for name in WEIGHTS:
            if name.lower() == text.lower():
                return name
        raise ConfigError(f"{cell.label}: {text!r} is not an over-quota weight; use one of {', '.join(WEIGHTS)}",
                          field=cell.field)
    if cell.field == "limit" and text.lower() in _NO_LIMIT_WORDS:
        return NO_LIMIT
    if not text:
        raise ConfigError(f"{cell.label}: enter a number", field=cell.field)
    return text  # a quantity string: GPUs, cores or bytes, parsed (and refused) by the document rules


def set_figure(cell: Cell, text: str, *, author=None) -> WriteResult:
    """Write `text` into the cell's document; ConfigError (nothing written) when refused."""
    value = document_value(cell, text)
    project = Project.objects.select_related("pool").filter(name=cell.name).first() if cell.kind == "project" else None
    if project is not None and project.pool_id is not None:
        return _set_pool_gpu(project, cell, value, author)
    document = writes.export(KINDS[cell.kind], cell.name)  # ConfigNotFound when there is none
    entry = next((quota for quota in document["resources"] if quota["node_pool"] == cell.pool), None)
    if entry is None:
        entry = {"node_pool": cell.pool}
        document["resources"].append(entry)
    if cell.resource not in entry:
        entry[cell.resource] = {"deserved": _implicit_deserved(cell), "limit": NO_LIMIT,
                                "over_quota_weight": DEFAULT_WEIGHT}
    entry[cell.resource][cell.field] = value
    return writes.import_document(KINDS[cell.kind], document, name=cell.name, author=author,
                                  description=f"{cell.label} set to {text.strip() or 'no limit'} (quotas page)")


def _implicit_deserved(cell: Cell):
    """What the owner deserves without a quota of its own: 0 for a project, its projects' sum for a
    department (in stored units: GPUs, millicores, bytes)."""
    if cell.kind == "project":
        return 0
    column = f"{cell.resource}_deserved"
    total = Quota.objects.filter(project__department__name=cell.name, pool__name=cell.pool).aggregate(
        total=Sum(column))["total"] or 0
    return float(total) if cell.resource == "gpu" and total != int(total) else int(total)


def _set_pool_gpu(project: Project, cell: Cell, value: Any, author) -> WriteResult:
    pool = project.pool
    if cell.resource != "gpu" or cell.pool != pool.name:
        raise ConfigError(f"Project {project.name} is pool {pool.name}'s own project: its quota is the pool's "
                          f"resources.gpu, GPUs in pool {pool.name} only", field=cell.field)
    document = writes.export(ConfigKind.POOL, pool.name)["pools"][pool.name]
    resources = dict(document.get("resources") or {})
    gpu = dict(resources.get("gpu") or {})
    if cell.field == "deserved":
        gpu["guarantee"] = value
    elif cell.field == "limit":
        if value == NO_LIMIT:
            gpu.pop("maximum", None)
        else:
            gpu["maximum"] = value
    else:
        gpu["weight"] = _OSMO_WEIGHTS.get(value, value)  # OSMO's numbers; "None" stays a name
    resources["gpu"] = {key: _number(item) for key, item in gpu.items()}
    document["resources"] = resources
    return writes.import_document(ConfigKind.POOL, {"pools": {pool.name: document}}, author=author,
                                  description=f"{cell.label} set to {value} (quotas page, resources.gpu)")


def _number(value):
    """OSMO's pool documents hold numbers: "8" typed in a cell is written as 8 (anything else is left for
    the pool's project rules to refuse)."""
    if isinstance(value, str) and _PLAIN_NUMBER.fullmatch(value):
        number = Decimal(value)
        return int(number) if number == number.to_integral_value() else float(number)
    return value
