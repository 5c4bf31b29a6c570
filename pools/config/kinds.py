"""The registry of configuration kinds. Each kind (pools, pod templates, resource validations here;
roles from `pools.access`; later departments and projects) tells the one write path how to read,
write, export and guard its documents. Kinds and write hooks are registered from
`PoolsConfig.ready()`, so `pools.config.writes` never imports the concerns that use it."""

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pools.inventory.impact import Impact


@dataclass
class WriteResult:
    kind: str
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    revisions: list[int] = field(default_factory=list)
    backends_created: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # accepted, but worth the writer's attention
    # Pools and pod templates: the nodes and GPUs the write moves between pools (None for other kinds).
    impact: Impact | None = None

    @property
    def changed(self) -> bool:
        return bool(self.created or self.updated or self.deleted)

    def summary(self) -> str:
        parts = [f"{label} {', '.join(names)}" for label, names in (
            ("created", self.created), ("updated", self.updated), ("deleted", self.deleted),
            ("unchanged", self.unchanged)) if names]
        text = f"{self.kind}: " + "; ".join(parts)
        if self.revisions:
            first, last = self.revisions[0], self.revisions[-1]
            text += f" (revision {first})" if first == last else f" (revisions {first}-{last})"
        if self.backends_created:
            text += (f". Registered backend {', '.join(self.backends_created)} (not connected yet: "
                     "set its kubeconfig in the admin)")
        for warning in self.warnings:
            text += f". Warning: {warning}"
        return text

    def impact_lines(self) -> list[str]:
        """What the write does to the fleet, for people: a headline, then one line per pool it changes; nothing
        when no node changes pools."""
        if self.impact is None or not self.impact.moves_nodes:
            return []
        return [f"Nodes: {self.impact.headline()}", *(f"  {line}" for line in self.impact.lines())]

    def impact_text(self) -> str:
        """The impact in one paragraph, for a message; empty when no node changes pools."""
        if self.impact is None or not self.impact.moves_nodes:
            return ""
        return f"Nodes: {self.impact.headline()} {'; '.join(self.impact.lines())}."

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "impact": self.impact.as_dict() if self.impact else None}


@dataclass(frozen=True)
class Kind:
    """How the write path handles one kind of document."""

    kind: str
    model: type  # rows named by `name`: existence and deletion
    documents: Callable[[Any, str | None], dict[str, Any]]  # input in any accepted shape -> {name: document}
    write: Callable[[dict[str, Any], Any, str], WriteResult]  # (documents, author, description)
    export: Callable[[str | None], dict[str, Any]]  # all objects, or one, as `documents` accepts back
    one_document: Callable[[dict[str, Any], str], Any] = lambda exported, name: exported[name]
    as_import: Callable[[str, Any], Any] = lambda name, document: document  # a revision's document, to import
    deletion_blockers: Callable[[str], list[str]] = lambda name: []
    # A refusal lists every blocker and asks to remove references (templates, validations), or states the first.
    blockers_are_references: bool = False


_KINDS: dict[str, Kind] = {}
_AFTER_WRITE: list[Callable[[str, WriteResult], None]] = []
_DELETION_CHECKS: list[Callable[[str, str], list[str]]] = []


def register(kind: Kind) -> None:
    _KINDS[kind.kind] = kind


def after_write(callback: Callable[[str, WriteResult], None]) -> None:
    """`callback(kind, result)` runs inside the write's transaction after every import or delete."""
    if callback not in _AFTER_WRITE:
        _AFTER_WRITE.append(callback)


def deletion_check(callback: Callable[[str, str], list[str]]) -> None:
    """`callback(kind, name)` says why that object cannot be deleted now (empty: it may be). An app whose rows
    refer to pools' objects (scheduling's live workloads) registers one, so that pools need not know it."""
    if callback not in _DELETION_CHECKS:
        _DELETION_CHECKS.append(callback)


def referrers(kind: str, name: str) -> list[str]:
    """What the registered checks say holds `name`."""
    return [reason for check in _DELETION_CHECKS for reason in check(kind, name)]


def deletion_blockers(kind: str, name: str) -> list[str]:
    """The kind's own reasons not to delete `name`, then what the registered checks say holds it."""
    return [*get(kind).deletion_blockers(name), *referrers(kind, name)]


def get(kind: str) -> Kind:
    return _KINDS[kind]


def run_after_write(kind: str, result: WriteResult) -> None:
    for callback in _AFTER_WRITE:
        callback(kind, result)
