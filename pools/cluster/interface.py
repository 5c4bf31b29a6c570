"""The small, typed interface through which everything else talks to a cluster.

Objects are the API server's JSON decoded into plain dicts (never the client's model classes), so the
inventory code reads `node["metadata"]["labels"]` the same way whichever implementation produced it.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

DEFAULT_PAGE_SIZE = 500


class ClusterError(Exception):
    """Any failure talking to a cluster. `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        self.status = status


class Expired(ClusterError):
    """410 Gone: the resourceVersion or continue token is too old; list again from scratch."""


class NotFound(ClusterError):
    pass


class Conflict(ClusterError):
    """409: the object already exists (create) or changed under us."""


class Unavailable(ClusterError):
    """Connection refused, timed out, stalled, or a 5xx: worth retrying after a back-off."""


@dataclass(frozen=True)
class ObjectKind:
    """A resource the cluster serves from a CRD (KAI's and Kueue's kinds), or a core one (group ""): enough to
    build its REST paths."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def scope(self, namespace: str | None, *, listing: bool = False) -> str | None:
        """`namespace` checked against the kind's scope: one object of a namespaced kind needs one (a list may
        span them all), a cluster-scoped kind takes none. A mistake here is the caller's bug, not the cluster's."""
        if not self.namespaced:
            if namespace is not None:
                raise ValueError(f"{self.kind} is cluster-scoped: it has no namespace (got {namespace!r})")
            return None
        if namespace is None and not listing:
            raise ValueError(f"{self.kind} is namespaced: a namespace is required")
        return namespace


@dataclass
class ListPage:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None = None


@dataclass
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED or BOOKMARK
    object: dict[str, Any] = field(default_factory=dict)

    @property
    def resource_version(self) -> str:
        return self.object.get("metadata", {}).get("resourceVersion", "")


@dataclass(frozen=True)
class LogQuery:
    """What to read of one container's log (the pods/log subresource's parameters). `since_time` is RFC 3339;
    `timestamps` prefixes each line with its RFC 3339 time (nanoseconds) and a space, as the kubelet does."""

    container: str | None = None
    tail_lines: int | None = None
    previous: bool = False
    since_time: str | None = None
    limit_bytes: int | None = None
    timestamps: bool = False

    def params(self) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        if self.container:
            found.append(("container", self.container))
        if self.tail_lines is not None:
            found.append(("tailLines", str(int(self.tail_lines))))
        if self.previous:
            found.append(("previous", "true"))
        if self.since_time:
            found.append(("sinceTime", self.since_time))
        if self.limit_bytes is not None:
            found.append(("limitBytes", str(int(self.limit_bytes))))
        if self.timestamps:
            found.append(("timestamps", "true"))
        return found


WHOLE_LOG = LogQuery()  # the default: every line, no timestamps


class Cluster(Protocol):
    """What the rest of the code may ask of a cluster."""

    def list_nodes(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage: ...

    def list_pods(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage: ...

    def watch_nodes(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """Events after `resource_version`, bookmarks included, until the server ends the stream.
        Raises Expired (HTTP 410 or an ERROR event with code 410) and Unavailable."""
        ...

    def watch_pods(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]: ...

    def read_pod_log(self, namespace: str, name: str, query: LogQuery = WHOLE_LOG) -> bytes:
        """A container's log as it is now. NotFound for an unknown pod; ClusterError (status 400) for a container
        the pod has not, or one that has not started (the API server's own words)."""
        ...

    def follow_pod_log(self, namespace: str, name: str, query: LogQuery = WHOLE_LOG, *,
                       timeout_seconds: float = 300) -> Iterator[bytes]:
        """The log, then its new lines as they are written, in chunks of whole lines as they arrive, until the
        container ends, or `timeout_seconds` have passed (a quiet end: the caller resumes with `since_time`).
        Errors before the first byte as read_pod_log."""
        ...

    def patch_node_labels(self, name: str, labels: dict[str, str | None]) -> dict[str, Any]:
        """Merge-patch labels (None removes a key); returns the node as now stored."""
        ...

    def set_unschedulable(self, name: str, unschedulable: bool) -> dict[str, Any]: ...

    def ensure_namespace(self, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> bool:
        """Create the namespace with `labels` (and `annotations`) unless it exists (its own are then left alone);
        True when it was created here."""
        ...

    def namespace_uid(self, name: str) -> str:
        """The namespace's metadata.uid (NotFound when there is none): kube-system's names the cluster."""
        ...

    def create_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """Raises Conflict when a Job of that name exists."""
        ...

    def get_job(self, namespace: str, name: str) -> dict[str, Any]: ...

    def list_jobs(self, label_selector: str, *, limit: int = DEFAULT_PAGE_SIZE,
                  continue_token: str | None = None) -> ListPage:
        """Jobs of every namespace matching `label_selector` (`key=value,...`), paged like nodes and pods."""
        ...

    def watch_jobs(self, label_selector: str, resource_version: str, *,
                   timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """As watch_nodes, for the Jobs matching `label_selector`."""
        ...

    def delete_job(self, namespace: str, name: str, *, propagation_policy: str = "Background") -> None: ...

    def list_events(self, field_selector: str, *, limit: int = DEFAULT_PAGE_SIZE,
                    continue_token: str | None = None) -> ListPage:
        """core/v1 Events of every namespace matching `field_selector` (`reason=FailedCreate,...`), paged."""
        ...

    def watch_events(self, field_selector: str, resource_version: str, *,
                     timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """As watch_nodes, for the Events matching `field_selector`."""
        ...

    # Custom objects (ObjectKind): one generic set of calls rather than a method per KAI or Kueue kind. For a
    # namespaced kind `namespace` is required on single objects; None on a list or watch means every namespace.

    def list_objects(self, kind: ObjectKind, *, label_selector: str = "", namespace: str | None = None,
                     limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage: ...

    def watch_objects(self, kind: ObjectKind, resource_version: str, *, label_selector: str = "",
                      namespace: str | None = None, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        """As watch_nodes: Expired when `resource_version` is too old, Unavailable when the stream breaks."""
        ...

    def get_object(self, kind: ObjectKind, name: str, *, namespace: str | None = None) -> dict[str, Any]: ...

    def create_object(self, kind: ObjectKind, body: dict[str, Any], *,
                      namespace: str | None = None) -> dict[str, Any]:
        """Raises Conflict when an object of that name exists. apiVersion and kind default to `kind`'s, and the
        namespace to the body's metadata.namespace."""
        ...

    def patch_object(self, kind: ObjectKind, name: str, patch: dict[str, Any], *,
                     namespace: str | None = None) -> dict[str, Any]:
        """JSON merge patch (None removes a key); a metadata.resourceVersion in it makes the patch conditional
        (Conflict if the object changed since). Returns the object as now stored."""
        ...

    def delete_object(self, kind: ObjectKind, name: str, *, namespace: str | None = None) -> None:
        """An object with finalizers is only marked (deletionTimestamp) until its controller removes them."""
        ...
