"""A stand-in Kubernetes API server speaking real HTTP, for tests and benchmarks.

It serves the slice of the API that `pools.cluster` uses, with the semantics that matter to a list-and-watch
client: one global resourceVersion counter, consistent paged lists (continue tokens pin a snapshot), chunked
watch streams replaying history after a resourceVersion, bookmarks, 410 Expired once history is compacted,
label and field selectors (tests/kube_selectors.py), merge and strategic merge patches (tests/kube_patches.py),
replace (PUT) with optimistic concurrency (409 Conflict on a stale resourceVersion), Jobs with AlreadyExists and
propagationPolicy, and any custom resource (KAI's, Kueue's) under
/apis/{group}/{version}/..., cluster-scoped or namespaced, with finalizers holding deletions. Faults are
injected on demand, and every request is logged so tests can assert what the client did (for example that it
did not list again).

    server = KubeStandin()
    server.add_node(make_node("gpu-1"))
    cluster = KubeCluster.from_kubeconfig(server.kubeconfig(tmp_path / "kubeconfig"))
    ...
    server.close()

Objects are serialized once per version and list pages are joined from those bytes, so thousands of nodes
and a hundred thousand pods page out in seconds. Objects handed to add_*() are not mutated; read the stored
state back with node()/pod()/job()/object()/objects().
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import itertools
import json
import select
import socket
import struct
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from pools.cluster.interface import ObjectKind
from tests import kube_logs, kube_rules
from tests.kube_patches import PatchError, merge_patch, strategic_merge_patch
from tests.kube_selectors import SelectorError, field_selector, label_selector

# How long a wait on the stand-in may last before it fails: the waits end on the event they wait for, and this
# ceiling only turns a hang into a failure (a loaded machine must never reach it).
HANG = 60

REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "AlreadyExists",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


# Objects are trees built by json.loads or our builders, never cyclic: skipping the check saves a fifth.
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)


_CORE_KINDS = {"services": "Service", "configmaps": "ConfigMap", "secrets": "Secret"}
_NAMESPACED_BUILT_IN = ("pods", "jobs", "events", *_CORE_KINDS)


def _dumps(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode()


def status_body(code: int, message: str, reason: str | None = None, details: dict | None = None) -> dict[str, Any]:
    """A metav1.Status as the API server sends it with errors (and inside ERROR watch events)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason if reason is not None else REASONS.get(code, ""),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def _join(thread: threading.Thread) -> None:
    """Waits for one of the stand-in's own threads to end (at once, in practice); one still running is a hang."""
    thread.join(timeout=HANG)
    if thread.is_alive():
        raise TimeoutError(f"the stand-in's thread {thread.name} did not end within {HANG:.0f} s")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    path: str
    query: dict[str, str]

    @property
    def watch(self) -> bool:
        return self.query.get("watch", "").lower() in ("true", "1")


@dataclass(frozen=True)
class JobDeletion:
    namespace: str
    name: str
    propagation_policy: str | None


@dataclass
class _Fault:
    action: str  # "status" or "hold" for any request; "stall", "end" or "error" for watches
    count: int
    path_prefix: str | None = None
    method: str | None = None
    status: int = 500
    message: str = ""
    after: int = 0

    def matches(self, method: str, path: str, watch: bool) -> bool:
        if self.action not in ("status", "hold") and not watch:
            return False
        if self.method and self.method != method:
            return False
        return self.path_prefix is None or path.startswith(self.path_prefix)


@dataclass
class _Collection:
    """One resource type: current objects as JSON bytes, and the event history a watch replays."""

    kind: str
    list_kind: str
    api_version: str = "v1"
    # Custom resources: whether the kind is namespaced, once a write or the test declared it (None: not yet).
    namespaced: bool | None = None
    objects: dict[str, bytes] = field(default_factory=dict)
    # (rv, type, object bytes, the bytes it replaced): a selective watch needs both to tell entering from leaving.
    history: list[tuple[int, bytes, bytes, bytes | None]] = field(default_factory=list)
    history_rvs: list[int] = field(default_factory=list)
    # A watch from an older resourceVersion than this gets 410: the events after it are gone.
    compacted: int = 0
    # Streams already open only fail if events they had not sent yet were dropped.
    last_dropped: int = 0
    changed: int = 0
    sorted_at: int = -1
    sorted_items: list[bytes] = field(default_factory=list)

    def snapshot(self) -> list[bytes]:
        """Objects in key order (as etcd returns them), rebuilt only after a change."""
        if self.sorted_at != self.changed:
            self.sorted_items = [self.objects[key] for key in sorted(self.objects)]
            self.sorted_at = self.changed
        return self.sorted_items


class KubeStandin:
    """The server. Start it by constructing it; `url` is where it listens; `close()` stops it."""

    def __init__(
        self,
        *,
        history_limit: int = 200_000,
        bookmark_interval: float | None = None,
        snapshot_limit: int = 32,
        default_watch_timeout: float = 60.0,
        strict_namespaces: bool = False,
        crds: Iterable[str] | str | None = "all",
        schemaless_custom_resources: bool = False,
    ):
        self.history_limit = history_limit
        self.bookmark_interval = bookmark_interval
        self.snapshot_limit = snapshot_limit
        self.default_watch_timeout = default_watch_timeout
        # As the API server: a Job in a namespace that does not exist is refused (404). Off by default, so that
        # tests of other things need not create namespaces.
        self.strict_namespaces = strict_namespaces
        # Custom resources are served only for installed CRDs, and checked against their schemas and CEL rules
        # (tests/kube_rules.py), as a real server does. `crds` names those installed now ("all" of the published
        # ones in tests/crds, or none); schemaless_custom_resources serves any kind unchecked, for a test that asks
        # for it.
        self.schemaless_custom_resources = schemaless_custom_resources
        self._crds: dict[tuple[str, str], kube_rules.CustomResource] = {}
        self.requests: list[LoggedRequest] = []
        self.job_deletions: list[JobDeletion] = []
        self.server_errors: list[str] = []
        self._cond = threading.Condition()
        self._rv = 0
        self._collections = {"nodes": _Collection("Node", "NodeList"), "pods": _Collection("Pod", "PodList"),
                             "jobs": _Collection("Job", "JobList", "batch/v1"),
                             "namespaces": _Collection("Namespace", "NamespaceList"),
                             "events": _Collection("Event", "EventList"),
                             "services": _Collection("Service", "ServiceList"),
                             "configmaps": _Collection("ConfigMap", "ConfigMapList"),
                             "secrets": _Collection("Secret", "SecretList")}

        # kube-system's uid names the cluster (`backend add`); served on GET only, out of the stored namespaces.
        self.kube_system_uid = str(uuid.uuid4())
        self._kube_system = _dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": "kube-system", "uid": self.kube_system_uid, "resourceVersion": "1"}})
        self._snapshots: OrderedDict[int, tuple[int, list[bytes]]] = OrderedDict()
        self._snapshot_ids = 0
        self._faults: list[_Fault] = []
        self._bookmark_generation = 0
        self._end_generation = 0
        self._stall_release = threading.Event()
        self._hold_release = threading.Event()
        self.held = 0  # requests waiting for release_holds()
        # Seconds each write (POST, PUT, PATCH, DELETE) waits before it is answered, as a real API server's writes
        # wait for etcd (benchmarks/dispatch.py --api-latency-ms); the GIL is free meanwhile. 0 in the tests.
        self.write_latency = 0.0
        self._open_watches = 0
        self._watches_opened: dict[str, int] = {}  # collection name -> watch streams opened so far
        self._logs: dict[tuple[str, str], dict[str, kube_logs.ContainerLog]] = {}  # (namespace, pod) -> container
        self.open_log_follows = 0
        self._closing = False
        self._connections: set[socket.socket] = set()
        if crds == "all":
            self.install_crds()
        elif crds:
            self.install_crds(*crds)
        self._serve()

    def _serve(self) -> None:
        standin = self

        class Handler(_Handler):
            server_state = standin

        self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.state = self
        self._port = self._server.server_address[1]
        self._refuser: threading.Thread | None = None
        self._refusing = threading.Event()
        self._listen()

    def _listen(self) -> None:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="kube-standin", daemon=True
        )
        self._thread.start()

    # Lifecycle and plumbing

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: str | Path, *, context: str = "standin") -> str:
        """Writes a kubeconfig (plain http, no credentials) pointing at this server; returns its path."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "standin", "user": {}}],
            "contexts": [{"name": context, "context": {"cluster": "standin", "user": "standin"}}],
            "current-context": context,
        }
        Path(path).write_text(json.dumps(config, indent=2))
        return str(path)

    def close(self) -> None:
        self.stop()
        self._stop_refusing()
        self._server.server_close()

    def stop(self) -> None:
        """The API server goes down: open watches end, every connection is dropped and every new one is reset until
        start(). The stored objects and their history stay (as etcd keeps them)."""
        if self._closing:
            return
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._stall_release.set()
        self._hold_release.set()
        self._server.shutdown()
        # Kept-alive connections would otherwise go on being served by their handler threads.
        with self._cond:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        _join(self._thread)
        self._refusing.clear()
        self._refuser = threading.Thread(target=self._refuse, name="kube-standin-down", daemon=True)
        self._refuser.start()

    def _refuse(self) -> None:
        """While down, the port stays this server's: it keeps listening and resets every connection at once, so a
        client fails as against a server that is gone. Closing the socket instead would free the port for another
        xdist worker's server, which could then answer this one's clients (a port with connections in TIME_WAIT
        cannot even be held by a bound, unlistening socket)."""
        listener = self._server.socket
        while not self._refusing.is_set():
            ready, _, _ = select.select([listener], [], [], 0.02)
            if not ready:
                continue
            with contextlib.suppress(OSError):
                connection, _ = listener.accept()
                connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                connection.close()

    def _stop_refusing(self) -> None:
        if self._refuser is not None:
            self._refusing.set()
            _join(self._refuser)
            self._refuser = None

    def start(self) -> None:
        """The API server is back, on the same port, with the same objects."""
        if not self._closing:
            return
        self._stop_refusing()
        with self._cond:
            self._closing = False
            self._stall_release.clear()
        self._listen()

    @property
    def running(self) -> bool:
        return not self._closing

    def __enter__(self) -> KubeStandin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    @property
    def open_watches(self) -> int:
        return self._open_watches

    def watches_opened(self, collection: str) -> int:
        """How many watch streams of `collection` ("nodes", "pods", ...) were opened so far: counted when a stream
        is registered, never taken back, so a count that grew means a new stream is open (or was)."""
        with self._cond:
            return self._watches_opened.get(collection, 0)

    def requests_to(self, path: str, *, watch: bool | None = None, method: str = "GET") -> list[LoggedRequest]:
        return [
            r
            for r in list(self.requests)
            if r.path == path and r.method == method and (watch is None or r.watch == watch)
        ]

    def clear_requests(self) -> None:
        self.requests.clear()

    def install_crds(self, *names: str, directory: str | Path | None = None) -> list[str]:
        """Installs CRDs from `directory` (KUBE_CRD_DIR, or tests/crds, the published ones): all of them, or those
        `names` (`queues.scheduling.run.ai`, as `kubectl get crd` names them). Returns the names installed; raises
        kube_rules.CRDsMissing when the directory holds none, KeyError for an unknown name."""
        available = kube_rules.load_crds(Path(directory) if directory else None)
        by_name = {crd.name: crd for crd in available.values()}
        missing = [name for name in names if name not in by_name]
        if missing:
            raise KeyError(f"no such CRD: {', '.join(missing)} (known: {', '.join(sorted(by_name))})")
        chosen = [by_name[name] for name in names] if names else list(available.values())
        with self._cond:
            for crd in chosen:
                self._crds[(crd.group, crd.plural)] = crd
        return [crd.name for crd in chosen]

    def _served_crd(self, group: str, version: str, plural: str) -> kube_rules.CustomResource | None:
        """The installed CRD serving group/version/plural, or None (a 404 on a real server); the built-in kinds of
        long-running workloads (Deployment, StatefulSet, Service, Ingress) are always served, by their rules."""
        crd = self._crds.get((group, plural)) or _BUILTIN.get((group, plural))
        return crd if crd is not None and crd.serves(version) else None

    # Objects

    def add_node(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._add("nodes", obj)

    def add_nodes(self, objs: Iterable[dict[str, Any]]) -> None:
        self._add_many("nodes", objs)

    def modify_node(self, name: str, change: Callable[[dict], dict | None] | dict[str, Any]) -> dict[str, Any]:
        """`change` is a merge patch, or a function that edits the node in place (or returns a new one)."""
        return self._modify("nodes", name, change)

    def delete_node(self, name: str) -> dict[str, Any]:
        return self._delete("nodes", name)

    def node(self, name: str) -> dict[str, Any]:
        return json.loads(self._collections["nodes"].objects[name])

    def node_names(self) -> list[str]:
        return sorted(self._collections["nodes"].objects)

    def add_pod(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self._add("pods", obj)

    def add_pods(self, objs: Iterable[dict[str, Any]]) -> None:
        self._add_many("pods", objs)

    def modify_pod(
        self, name: str, change: Callable[[dict], dict | None] | dict[str, Any], *, namespace: str = "default"
    ) -> dict[str, Any]:
        return self._modify("pods", f"{namespace}/{name}", change)

    def delete_pod(self, name: str, *, namespace: str = "default") -> dict[str, Any]:
        return self._delete("pods", f"{namespace}/{name}")

    def pod(self, name: str, *, namespace: str = "default") -> dict[str, Any]:
        return json.loads(self._collections["pods"].objects[f"{namespace}/{name}"])

    def pods(self) -> list[dict[str, Any]]:
        return [json.loads(data) for data in self._collections["pods"].objects.values()]

    # Pod logs (tests/kube_logs.py): what the kubelet would serve for each container.

    def append_log(self, pod: str, *lines: str | bytes, namespace: str = "default", container: str | None = None,
                   at: float | None = None) -> None:
        """Lines the container writes now (or at `at`, seconds since the epoch); a newline is added where missing.
        `container` defaults to the pod's only (or first) one."""
        with self._cond:
            log = self._container_log(pod, namespace, container)
            for line in lines:
                data = line.encode() if isinstance(line, str) else line
                data = data if data.endswith(b"\n") else data + b"\n"
                log.lines.append((kube_logs.now() if at is None else at, data))
            self._cond.notify_all()

    def restart_container(self, pod: str, *, namespace: str = "default", container: str | None = None) -> None:
        """The container restarted: what it wrote is now its `previous` log."""
        with self._cond:
            log = self._container_log(pod, namespace, container)
            log.previous, log.lines, log.ended = log.lines, [], False
            self._cond.notify_all()

    def end_log(self, pod: str, *, namespace: str = "default", container: str | None = None) -> None:
        """The container exited: followed streams of its log end."""
        with self._cond:
            self._container_log(pod, namespace, container).ended = True
            self._cond.notify_all()

    def wait_for_log_follows(self, count: int = 1, timeout: float = HANG) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: self.open_log_follows >= count, timeout):
                raise TimeoutError(f"{self.open_log_follows} log follows open, wanted {count}")

    def _container_log(self, pod: str, namespace: str, container: str | None) -> kube_logs.ContainerLog:
        if container is None:
            data = self._collections["pods"].objects.get(f"{namespace}/{pod}")
            names = kube_logs.containers_of(json.loads(data)) if data else []
            container = names[0] if names else "main"
        return self._logs.setdefault((namespace, pod), {}).setdefault(container, kube_logs.ContainerLog())

    def pod_count(self) -> int:
        return len(self._collections["pods"].objects)

    def core_objects(self, plural: str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """The stored Services, ConfigMaps or Secrets (`plural`: "services", "configmaps", "secrets"), of one
        namespace if given."""
        with self._cond:
            found = [json.loads(data) for data in self._collections[plural].objects.values()]
        return [obj for obj in found if namespace is None or obj["metadata"].get("namespace") == namespace]

    def job(self, name: str, *, namespace: str = "default") -> dict[str, Any]:
        return json.loads(self._collections["jobs"].objects[f"{namespace}/{name}"])

    def jobs(self) -> list[dict[str, Any]]:
        return [json.loads(data) for data in self._collections["jobs"].snapshot()]

    def add_event(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A core/v1 Event (namespace "default" unless its metadata says), as a controller records one."""
        return self._add("events", obj)

    def add_namespace(self, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        return self._add("namespaces", {"metadata": {"name": name, "labels": labels or {}}})

    def namespace(self, name: str) -> dict[str, Any]:
        return json.loads(self._collections["namespaces"].objects[name])

    def delete_namespace(self, name: str) -> dict[str, Any]:
        """As `kubectl delete namespace` once it is gone (its objects are left: no test needs them gone)."""
        return self._delete("namespaces", name)

    def modify_job(
        self, name: str, change: Callable[[dict], dict | None] | dict[str, Any], *, namespace: str = "default"
    ) -> dict[str, Any]:
        """As a Job controller would: a merge patch (its `status`, say) or a function editing it in place."""
        return self._modify("jobs", f"{namespace}/{name}", change)

    # Custom objects: `kind` is an ObjectKind (which also declares its scope) or "group/version/plural".

    def add_object(
        self, kind: ObjectKind | str, obj: dict[str, Any], *, namespace: str | None = None
    ) -> dict[str, Any]:
        """Stores `obj` as the API server would have on create (uid, generation...), replacing any of that name."""
        collection = self._custom_collection(kind)
        metadata = dict(obj.get("metadata") or {})
        namespace = namespace or metadata.get("namespace")
        if collection.namespaced is None:
            collection.namespaced = namespace is not None
        if collection.namespaced and namespace is None:
            namespace = "default"
        if not collection.namespaced and namespace is not None:
            raise ValueError(f"{kind} is cluster-scoped: it takes no namespace (got {namespace!r})")
        if namespace:
            metadata["namespace"] = namespace
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", _now())
        metadata.setdefault("generation", 1)
        prepared = {**obj, "metadata": metadata}
        if isinstance(kind, ObjectKind):
            prepared.setdefault("apiVersion", kind.api_version)
            prepared.setdefault("kind", kind.kind)
        prepared = self._admitted(kind, prepared)
        key = _object_key(namespace, metadata["name"])
        with self._cond:
            self._record(collection, b"MODIFIED" if key in collection.objects else b"ADDED", key, prepared)
            self._cond.notify_all()
        return prepared

    def modify_object(
        self,
        kind: ObjectKind | str,
        name: str,
        change: Callable[[dict], dict | None] | dict[str, Any],
        *,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """As KAI or Kueue would: a merge patch (a `status`, say) or a function editing the object in place. An
        object being deleted goes once its last finalizer is removed."""
        collection = self._custom_collection(kind)
        key = _object_key(_namespace_of(collection, namespace), name)
        with self._cond:
            if key not in collection.objects:
                raise KeyError(f"{kind} {key} does not exist")
            current = json.loads(collection.objects[key])
            updated = (change(current) or current) if callable(change) else merge_patch(current, change)
            updated = self._admitted(kind, updated, json.loads(collection.objects[key]))
            self._record(collection, b"DELETED" if _released(updated) else b"MODIFIED", key, updated)
            self._cond.notify_all()
        return updated

    def delete_object(self, kind: ObjectKind | str, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        """Removes the object at once, finalizers or not (as if they had all been honoured)."""
        collection = self._custom_collection(kind)
        key = _object_key(_namespace_of(collection, namespace), name)
        with self._cond:
            if key not in collection.objects:
                raise KeyError(f"{kind} {key} does not exist")
            last = json.loads(collection.objects[key])
            self._record(collection, b"DELETED", key, last)
            self._cond.notify_all()
        return last

    def object(self, kind: ObjectKind | str, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        if isinstance(kind, ObjectKind) and not kind.group and kind.plural in _CORE_KINDS:
            (found,) = [obj for obj in self.core_objects(kind.plural, namespace=namespace)
                        if obj["metadata"]["name"] == name]
            return found
        collection = self._custom_collection(kind)
        return json.loads(collection.objects[_object_key(_namespace_of(collection, namespace), name)])

    def objects(self, kind: ObjectKind | str, *, namespace: str | None = None) -> list[dict[str, Any]]:
        """The stored objects of `kind` (of one namespace, or all), in key order."""
        if isinstance(kind, ObjectKind) and not kind.group and kind.plural in _CORE_KINDS:
            return self.core_objects(kind.plural, namespace=namespace)
        items = [json.loads(data) for data in self._custom_collection(kind).snapshot()]
        if namespace is not None:
            items = [item for item in items if item["metadata"].get("namespace") == namespace]
        return items

    # Faults

    def fail_next(
        self,
        count: int = 1,
        *,
        status: int = 500,
        path_prefix: str | None = None,
        method: str | None = None,
        message: str = "",
    ) -> None:
        """The next `count` matching requests (any kind, watches included) answer `status` with a Status body."""
        self._add_fault(_Fault("status", count, path_prefix, method, status=status, message=message))

    def stall_next_watch(self, count: int = 1, *, path_prefix: str | None = None) -> None:
        """The next `count` matching watches send their headers and then nothing, until release_stalls()."""
        self._add_fault(_Fault("stall", count, path_prefix))

    def release_stalls(self) -> None:
        self._stall_release.set()

    def hold_next(self, count: int = 1, *, path_prefix: str | None = None, method: str | None = None) -> None:
        """The next `count` matching requests wait, before anything is done, until release_holds(): a client caught
        in the middle of a call (a worker's task in flight). `held` counts those waiting."""
        with self._cond:
            self._hold_release.clear()
        self._add_fault(_Fault("hold", count, path_prefix, method))

    def release_holds(self) -> None:
        self._hold_release.set()

    def end_next_watch_after(self, events: int, *, count: int = 1, path_prefix: str | None = None) -> None:
        """The next `count` matching watches end normally after sending `events` events (bookmarks count)."""
        self._add_fault(_Fault("end", count, path_prefix, after=events))

    def error_next_watch(
        self, code: int = 410, *, after: int = 0, count: int = 1, path_prefix: str | None = None, message: str = ""
    ) -> None:
        """The next `count` matching watches send `after` events, then an ERROR event carrying a Status with
        `code`, then end (as the API server does when a watcher falls out of its window)."""
        self._add_fault(_Fault("error", count, path_prefix, status=code, message=message, after=after))

    def clear_faults(self) -> None:
        with self._cond:
            self._faults.clear()

    def end_watches(self) -> None:
        """Ends every open watch stream now, normally (terminating chunk)."""
        with self._cond:
            self._end_generation += 1
            self._cond.notify_all()

    def bookmark(self) -> None:
        """Every open watch that asked for bookmarks gets one now, carrying the current resourceVersion."""
        with self._cond:
            self._bookmark_generation += 1
            self._cond.notify_all()

    def compact(self) -> None:
        """Drops all history and list snapshots: watches from older resourceVersions and every continue token
        issued so far get 410 Expired; open streams that had not caught up get an in-stream 410."""
        with self._cond:
            for collection in self._collections.values():
                if collection.history_rvs:
                    collection.last_dropped = collection.history_rvs[-1]
                collection.history.clear()
                collection.history_rvs.clear()
                collection.compacted = self._rv
            self._snapshots.clear()
            self._cond.notify_all()

    def rewind(self) -> None:
        """resourceVersions go backwards, as when etcd is restored from a backup or the cluster is recreated behind
        the same address: every object is stored again under new, lower resourceVersions counting from 1, history
        and continue tokens are gone, and open watches end (the API server restarted). As on a real kube-apiserver,
        a watch from a resourceVersion newer than the server's answers 200 and sends nothing (no 410): changes get
        versions lower than the client's cursor, so it never sees them."""
        with self._cond:
            self._rv = 0
            self._snapshots.clear()
            for collection in self._collections.values():
                collection.history.clear()
                collection.history_rvs.clear()
                collection.compacted = collection.last_dropped = 0
                for key in sorted(collection.objects):
                    obj = json.loads(collection.objects[key])
                    self._rv += 1
                    obj["metadata"]["resourceVersion"] = str(self._rv)
                    collection.objects[key] = _dumps(obj)
                collection.changed, collection.sorted_at, collection.sorted_items = self._rv, -1, []
            self._end_generation += 1
            self._cond.notify_all()

    def wait_for_watches(self, count: int = 1, timeout: float = HANG) -> None:
        """Blocks until at least `count` watch streams are open (so a test mutates after the client listens)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._open_watches < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"{self._open_watches} watches open, expected {count}")
                self._cond.wait(remaining)

    # Internals: mutations

    def _custom_collection(self, kind: ObjectKind | str) -> _Collection:
        """The collection of a custom resource, made on first use; an ObjectKind also fixes its kind and scope."""
        if isinstance(kind, ObjectKind):
            group, version, plural = kind.group, kind.version, kind.plural
        else:
            group, version, plural = kind.split("/")
        name = f"{group}/{version}/{plural}"
        crd = self._served_crd(group, version, plural)
        if crd is None and not self.schemaless_custom_resources:
            raise LookupError(f"{name} is not served: no CRD installed for it (install_crds)")
        with self._cond:
            collection = self._collections.get(name)
            if collection is None:
                collection = _Collection("", "List", f"{group}/{version}" if group else version)
                self._collections[name] = collection
            if crd is not None and not collection.kind:
                collection.kind, collection.list_kind, collection.namespaced = crd.kind, f"{crd.kind}List", \
                    crd.namespaced
            if isinstance(kind, ObjectKind) and not collection.kind:
                collection.kind, collection.list_kind = kind.kind, f"{kind.kind}List"
                collection.namespaced = kind.namespaced
        return collection

    def _admitted(self, kind: ObjectKind | str, obj: dict[str, Any], old: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
        """`obj` as the CRD of `kind` stores it (pruned, defaulted), or kube_rules.Invalid: the helpers acting as
        KAI or Kueue write through the same rules as our code."""
        group, version, plural = (kind.group, kind.version, kind.plural) if isinstance(kind, ObjectKind) \
            else kind.split("/")
        crd = self._served_crd(group, version, plural)
        if crd is None:
            return obj
        admitted, errors = crd.admit(version, obj, old)
        if errors:
            raise kube_rules.Invalid(crd.kind, group, (obj.get("metadata") or {}).get("name", ""), errors)
        return admitted

    def _add_fault(self, fault: _Fault) -> None:
        with self._cond:
            if fault.action == "stall":
                self._stall_release.clear()
            self._faults.append(fault)

    def _take_fault(self, method: str, path: str, watch: bool) -> _Fault | None:
        with self._cond:
            for fault in self._faults:
                if fault.matches(method, path, watch):
                    fault.count -= 1
                    if fault.count <= 0:
                        self._faults.remove(fault)
                    return fault
        return None

    @staticmethod
    def _key(collection: str, obj: dict[str, Any]) -> str:
        metadata = obj["metadata"]
        if collection in _NAMESPACED_BUILT_IN:
            return f"{metadata.get('namespace') or 'default'}/{metadata['name']}"
        return metadata["name"]

    def _prepare(self, collection: str, obj: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        # Copy the top level and metadata only: the caller's nested dicts are read, never written.
        metadata = dict(obj.get("metadata") or {})
        if collection in _NAMESPACED_BUILT_IN:
            metadata.setdefault("namespace", "default")
        if "uid" not in metadata:
            metadata["uid"] = str(uuid.uuid4())
        if "creationTimestamp" not in metadata:
            metadata["creationTimestamp"] = _now()
        prepared = {**obj, "metadata": metadata}
        _check_metadata(collection, prepared)
        return self._key(collection, prepared), prepared

    def _collect_owned(self, namespace: str, uid: str) -> None:
        """Delete the Services and ConfigMaps of `namespace` that `uid` owns. Call with the lock held."""
        for plural in _CORE_KINDS:
            collection = self._collections[plural]
            for key, data in list(collection.objects.items()):
                obj = json.loads(data)
                owners = obj["metadata"].get("ownerReferences") or []
                if obj["metadata"].get("namespace") == namespace and any(o.get("uid") == uid for o in owners):
                    self._record(collection, b"DELETED", key, obj)

    def _record(self, collection: _Collection, kind: bytes, key: str, obj: dict[str, Any]) -> bytes:
        """Bumps the resourceVersion, stores `obj` under it and appends the event. Call with the lock held."""
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        data = _dumps(obj)
        previous = collection.objects.get(key)
        if kind == b"DELETED":
            collection.objects.pop(key, None)
        else:
            collection.objects[key] = data
        collection.history.append((self._rv, kind, data, previous))
        collection.history_rvs.append(self._rv)
        collection.changed = self._rv
        # Trim in batches so that a long run of changes costs amortized O(1) each.
        if len(collection.history) > self.history_limit + self.history_limit // 4 + 1:
            drop = len(collection.history) - self.history_limit
            collection.last_dropped = collection.history_rvs[drop - 1]
            collection.compacted = max(collection.compacted, collection.last_dropped)
            del collection.history[:drop]
            del collection.history_rvs[:drop]
        return data

    def _add(self, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        key, prepared = self._prepare(name, obj)
        collection = self._collections[name]
        with self._cond:
            kind = b"MODIFIED" if key in collection.objects else b"ADDED"
            self._record(collection, kind, key, prepared)
            self._cond.notify_all()
        return prepared

    def _add_many(self, name: str, objs: Iterable[dict[str, Any]]) -> None:
        collection = self._collections[name]
        # In batches, so a generator of 150k pods never has them all alive at once (the collector would keep
        # re-scanning them), while watchers still get woken once per batch rather than per object.
        objs = iter(objs)
        while batch := [self._prepare(name, obj) for obj in itertools.islice(objs, 1000)]:
            with self._cond:
                for key, obj in batch:
                    self._record(collection, b"MODIFIED" if key in collection.objects else b"ADDED", key, obj)
                self._cond.notify_all()

    def _modify(self, name: str, key: str, change: Callable[[dict], dict | None] | dict[str, Any]) -> dict[str, Any]:
        collection = self._collections[name]
        with self._cond:
            if key not in collection.objects:
                raise KeyError(f"{name} {key} does not exist")
            current = json.loads(collection.objects[key])
            updated = (change(current) or current) if callable(change) else merge_patch(current, change)
            _check_metadata(name, updated)
            self._record(collection, b"MODIFIED", key, updated)
            self._cond.notify_all()
        return updated

    def _delete(self, name: str, key: str) -> dict[str, Any]:
        collection = self._collections[name]
        with self._cond:
            if key not in collection.objects:
                raise KeyError(f"{name} {key} does not exist")
            last = json.loads(collection.objects[key])
            self._record(collection, b"DELETED", key, last)
            self._cond.notify_all()
        return last

    # Internals: reads

    def _list(self, name: str, query: dict[str, str], namespace: str | None = None) -> tuple[int, bytes]:
        collection = self._collections[name]
        try:
            selected = selection(query, collection, namespace)
        except SelectorError as exc:
            return 400, _dumps(status_body(400, str(exc)))
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        with self._cond:
            if token:
                try:
                    position = json.loads(base64.urlsafe_b64decode(token.encode()))
                    snapshot_id, offset = int(position["snapshot"]), int(position["start"])
                except (ValueError, KeyError, TypeError):
                    return 400, _dumps(status_body(400, "continue key is not valid: bad token"))
                if snapshot_id not in self._snapshots:
                    message = (
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter."
                    )
                    return 410, _dumps(status_body(410, message, "Expired"))
                rv, items = self._snapshots[snapshot_id]
            else:
                snapshot_id, offset, rv, items = -1, 0, self._rv, collection.snapshot()
                if selected is not None:
                    items = [data for data in items if selected(data)]
            end = offset + limit if limit else len(items)
            page = items[offset:end]
            next_token = None
            if end < len(items):
                if snapshot_id < 0:
                    self._snapshot_ids += 1
                    snapshot_id = self._snapshot_ids
                    self._snapshots[snapshot_id] = (rv, items)
                    while len(self._snapshots) > self.snapshot_limit:
                        self._snapshots.popitem(last=False)
                position = {"v": "standin/v1", "rv": rv, "snapshot": snapshot_id, "start": end}
                next_token = base64.urlsafe_b64encode(_dumps(position)).decode()
        metadata: dict[str, Any] = {"resourceVersion": str(rv)}
        if next_token:
            metadata["continue"] = next_token
            metadata["remainingItemCount"] = len(items) - end
        head = _dumps({"kind": collection.list_kind, "apiVersion": collection.api_version, "metadata": metadata})
        body = b"".join((head[:-1], b',"items":[', b",".join(page), b"]}"))
        return 200, body


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    state: KubeStandin

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that time out or abandon a watch reset their connection; that is their right, not an error.
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            self.state.server_errors.append(traceback.format_exc())


class _Headers(dict):
    """A request's headers by lower-cased name (the last of a repeated one), read as `email.message.Message`'s
    `get`: the only use the handler makes of them."""

    def get(self, name: str, default: Any = None) -> Any:
        return super().get(name.lower(), default)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    timeout = 120  # idle keep-alive connections eventually free their thread
    server_state: KubeStandin

    def setup(self) -> None:
        super().setup()
        with self.server_state._cond:
            self.server_state._connections.add(self.connection)

    def finish(self) -> None:
        with self.server_state._cond:
            self.server_state._connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def parse_request(self) -> bool:
        """The request line and headers, as BaseHTTPRequestHandler reads them (HTTP/1.x, keep-alive unless the
        client says close, a 431 past 100 headers or a 64 KiB line) but into `_Headers` rather than through
        `email`'s parser, which was a third of the stand-in's time per request."""
        self.command, self.request_version, self.close_connection = None, self.default_request_version, True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if len(words) != 3 or not words[2].startswith("HTTP/1.") or not words[1].startswith("/"):
            self.send_error(400, f"Bad request {self.requestline!r}")
            return False
        self.command, self.path, self.request_version = words
        headers = _Headers()
        while (line := self.rfile.readline(65537)) not in (b"\r\n", b"\n", b""):
            name, colon, value = line.decode("iso-8859-1").partition(":")
            if len(line) > 65536 or len(headers) >= 100 or not colon:
                self.send_error(431 if colon else 400, "Request header fields too large or malformed")
                return False
            headers[name.strip().lower()] = value.strip()
        self.headers = headers
        connection = headers.get("connection", "").lower()
        self.close_connection = connection == "close" or (
            self.request_version == "HTTP/1.0" and connection != "keep-alive")
        if headers.get("expect", "").lower() == "100-continue" and self.request_version != "HTTP/1.0":
            return self.handle_expect_100()
        return True

    def _drop(self) -> None:
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # Plumbing

    def _dispatch(self, method: str) -> None:
        state = self.server_state
        if state._closing:
            # Down: nothing is answered. A connection accepted while stop() ran can escape its cut (its handler
            # registers after stop() looked); kept alive, it would answer every retry of a client for ever.
            self._drop()
            return
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        request = LoggedRequest(method, path, query)
        state.requests.append(request)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            fault = state._take_fault(method, path, request.watch)
            if fault and fault.action == "hold":
                with state._cond:
                    state.held += 1
                    state._cond.notify_all()
                state._hold_release.wait(120)
                with state._cond:
                    state.held -= 1
                fault = None
            if fault and fault.action == "status":
                message = fault.message or f"injected fault: HTTP {fault.status}"
                self._send_status(fault.status, message)
                return
            if state.write_latency and method != "GET":
                time.sleep(state.write_latency)
            self._route(method, path, query, body, request.watch, fault)
            if state._closing:  # went down while answering: the connection ends with this answer
                self._drop()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug in the stand-in must show up as a failure, not a dropped connection
            state.server_errors.append(traceback.format_exc())
            try:
                self._send_status(500, f"stand-in error: {exc!r}")
            except OSError:
                self.close_connection = True

    def _route(
        self, method: str, path: str, query: dict[str, str], body: bytes, watch: bool, fault: _Fault | None
    ) -> None:
        segments = path.strip("/").split("/")
        if path in ("/api/v1/nodes", "/api/v1/pods", "/apis/batch/v1/jobs", "/api/v1/events") and method == "GET":
            name = segments[-1]
            if watch:
                self._watch(name, query, fault)
            else:
                status, payload = self.server_state._list(name, query)
                self._send_json(status, payload)
            return
        if segments[:3] == ["api", "v1", "namespaces"] and segments[4:] == ["events"] and method == "GET":
            if watch:
                self._watch("events", query, fault, segments[3])
            else:
                self._send_json(*self.server_state._list("events", query, segments[3]))
            return
        if segments[:3] == ["api", "v1", "namespaces"] and len(segments) in (3, 4):
            self._namespace(method, segments[3] if len(segments) == 4 else None, body)
            return
        if segments[:3] == ["api", "v1", "nodes"] and len(segments) == 4:
            self._node(method, segments[3], body)
            return
        if segments[:3] == ["api", "v1", "namespaces"] and len(segments) == 7 and segments[4:7:2] == ["pods", "log"]:
            self._pod_log(method, segments[3], segments[5], query)
            return
        if segments[:3] == ["api", "v1", "namespaces"] and len(segments) == 6 and segments[4] == "pods":
            self._get_pod(method, segments[3], segments[5])
            return
        if segments[:3] == ["api", "v1", "namespaces"] and len(segments) in (5, 6) and segments[4] in _CORE_KINDS:
            self._core_object(method, segments[4], segments[3], segments[5] if len(segments) == 6 else None, body)
            return
        if segments[:4] == ["apis", "batch", "v1", "namespaces"] and len(segments) in (6, 7) and segments[5] == "jobs":
            namespace = segments[4]
            if len(segments) == 6:
                self._create_job(method, namespace, body)
            else:
                self._job(method, namespace, segments[6], query, body)
            return
        # The built-in kinds served like custom ones (kube_rules.BUILTIN_KINDS): Deployments and StatefulSets under
        # /apis/apps/v1, Ingresses under networking.k8s.io (Services and ConfigMaps are core objects, above).
        if segments[:3] == ["apis", "apps", "v1"] and len(segments) >= 4:
            self._custom_resource(method, segments, query, body, watch, fault)
            return
        # Custom resources: their groups, unlike the built-in ones, always hold a dot.
        if segments[0] == "apis" and len(segments) >= 4 and "." in segments[1]:
            self._custom_resource(method, segments, query, body, watch, fault)
            return
        self._send_status(404, "the server could not find the requested resource")

    def _send_json(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self._headers_buffer.extend((b"\r\n", payload))  # end_headers, with the body: one write, one packet
        self.flush_headers()

    def _send_status(self, code: int, message: str, reason: str | None = None, details: dict | None = None) -> None:
        self._send_json(code, _dumps(status_body(code, message, reason, details)))

    def _refused(self, kind: str, group: str, name: str, errors: list[kube_rules.FieldError]) -> bool:
        """Sends the 422 a real server answers for `errors`, if any; True when it did."""
        if errors:
            self._send_json(422, _dumps(kube_rules.invalid_status(kind, group, name, errors)))
        return bool(errors)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _client_gone(self) -> bool:
        """True once the client closed its end (a watch it abandoned, or one it timed out)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    # Nodes, pods, jobs

    def _node(self, method: str, name: str, body: bytes) -> None:
        state = self.server_state
        nodes = state._collections["nodes"]
        if method == "GET":
            data = nodes.objects.get(name)
            if data is None:
                self._send_status(404, f'nodes "{name}" not found', details={"name": name, "kind": "nodes"})
            else:
                self._send_json(200, data)
            return
        self._write(method, nodes, "nodes", None, name, body, {"name": name, "kind": "nodes"})

    def _get_pod(self, method: str, namespace: str, name: str) -> None:
        data = self.server_state._collections["pods"].objects.get(f"{namespace}/{name}")
        if method != "GET":
            self._send_status(405, f"{method} is not supported here")
        elif data is None:
            self._send_status(404, f'pods "{name}" not found', details={"name": name, "kind": "pods"})
        else:
            self._send_json(200, data)

    def _pod_log(self, method: str, namespace: str, name: str, query: dict[str, str]) -> None:
        state = self.server_state
        if method != "GET":
            self._send_status(405, f"{method} is not supported here")
            return
        with state._cond:
            data = state._collections["pods"].objects.get(f"{namespace}/{name}")
            if data is None:
                self._send_status(404, f'pods "{name}" not found', details={"name": name, "kind": "pods"})
                return
            logs = state._logs.get((namespace, name), {})
            try:
                container = kube_logs.choose(json.loads(data), query, logs)
                lines = kube_logs.selected(logs.get(container), query, name)
                kube_logs.limit(b"", query, name)  # a bad limitBytes is refused before anything is sent
            except kube_logs.LogRefused as exc:
                self._send_status(exc.code, exc.message)
                return
            log = state._container_log(name, namespace, container)
            sent = len(log.lines)
        body = kube_logs.limit(kube_logs.render(lines, query), query, name)
        if query.get("follow", "").lower() not in ("true", "1") or query.get("previous", "").lower() in ("true", "1"):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self._follow_log(log, sent, body, query)

    def _follow_log(self, log: kube_logs.ContainerLog, sent: int, first: bytes, query: dict[str, str]) -> None:
        """Chunked, a chunk per batch of lines as they are appended, until the container ends, the pod goes, the
        client goes away or the server stops."""
        state = self.server_state
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with state._cond:
            state.open_log_follows += 1
            state._cond.notify_all()
        try:
            if first:
                self._write_chunk(first)
            while True:
                with state._cond:
                    while len(log.lines) == sent and not log.ended and not state._closing:
                        state._cond.wait(0.1)
                        if self._client_gone():
                            self.close_connection = True
                            return
                    new, sent = log.lines[sent:], len(log.lines)
                    done = log.ended or state._closing
                if new:
                    self._write_chunk(kube_logs.render(new, query))
                if done:
                    break
            self.wfile.write(b"0\r\n\r\n")
        finally:
            with state._cond:
                state.open_log_follows -= 1
                state._cond.notify_all()

    def _namespace(self, method: str, name: str | None, body: bytes) -> None:
        state = self.server_state
        namespaces = state._collections["namespaces"]
        if method == "GET" and name is not None:
            data = namespaces.objects.get(name) or (state._kube_system if name == "kube-system" else None)
            if data is None:
                self._send_status(404, f'namespaces "{name}" not found', details={"name": name, "kind": "namespaces"})
            else:
                self._send_json(200, data)
            return
        if method != "POST" or name is not None:
            self._send_status(405, f"{method} is not supported here")
            return
        try:
            obj = json.loads(body)
            name = obj["metadata"]["name"]
        except (ValueError, KeyError, TypeError):
            self._send_status(422, "Namespace is invalid: metadata.name: Required value")
            return
        if self._refused("Namespace", "", name, kube_rules.validate_create("Namespace", obj)):
            return
        key, prepared = state._prepare("namespaces", obj)
        with state._cond:
            if key in namespaces.objects:
                self._send_status(409, f'namespaces "{name}" already exists', "AlreadyExists",
                                  {"name": name, "kind": "namespaces"})
                return
            data = state._record(namespaces, b"ADDED", key, prepared)
            state._cond.notify_all()
        self._send_json(201, data)

    def _create_job(self, method: str, namespace: str, body: bytes) -> None:
        state = self.server_state
        if method != "POST":
            self._send_status(405, f"{method} is not supported here")
            return
        if state.strict_namespaces and namespace not in state._collections["namespaces"].objects:
            self._send_status(404, f'namespaces "{namespace}" not found',
                              details={"name": namespace, "kind": "namespaces"})
            return
        try:
            job = json.loads(body)
            name = job["metadata"]["name"]
        except (ValueError, KeyError, TypeError):
            self._send_status(422, "Job.batch is invalid: metadata.name: Required value: name is required")
            return
        if job["metadata"].get("namespace") not in (None, "", namespace):
            self._send_status(400, "the namespace of the provided object does not match the namespace sent on the "
                                   "request")
            return
        scoped = {**job, "metadata": {**job["metadata"], "namespace": namespace}}
        if self._refused("Job", "batch", name, kube_rules.validate_create("Job", scoped)):
            return
        key = f"{namespace}/{name}"
        jobs = state._collections["jobs"]
        with state._cond:
            if key in jobs.objects:
                details = {"name": name, "group": "batch", "kind": "jobs"}
                self._send_status(409, f'jobs.batch "{name}" already exists', "AlreadyExists", details)
                return
            job["metadata"].update(namespace=namespace, uid=str(uuid.uuid4()), generation=1,
                                   creationTimestamp=_now())
            job.setdefault("apiVersion", "batch/v1")
            job.setdefault("kind", "Job")
            job.setdefault("status", {})
            data = state._record(jobs, b"ADDED", key, job)
            state._cond.notify_all()
        self._send_json(201, data)

    def _job(self, method: str, namespace: str, name: str, query: dict[str, str], body: bytes) -> None:
        state = self.server_state
        key = f"{namespace}/{name}"
        details = {"name": name, "group": "batch", "kind": "jobs"}
        jobs = state._collections["jobs"]
        if method in ("PATCH", "PUT"):
            self._write(method, jobs, "jobs.batch", namespace, name, body, details)
            return
        with state._cond:
            data = jobs.objects.get(key)
            if data is None:
                self._send_status(404, f'jobs.batch "{name}" not found', details=details)
                return
            if method == "GET":
                payload = data
            elif method == "DELETE":
                options = json.loads(body) if body.strip() else {}
                policy = options.get("propagationPolicy") or query.get("propagationPolicy")
                state.job_deletions.append(JobDeletion(namespace, name, policy))
                job = json.loads(data)
                state._record(jobs, b"DELETED", key, job)
                if policy != "Orphan":  # the garbage collector: what the Job owned goes with it
                    state._collect_owned(namespace, job["metadata"]["uid"])
                state._cond.notify_all()
                payload = _dumps({**status_body(200, "", ""), "details": {**details, "uid": job["metadata"]["uid"]}})
            else:
                self._send_status(405, f"{method} is not supported here")
                return
        self._send_json(200, payload)

    # Services and ConfigMaps: created, read and deleted, checked as kube-apiserver checks them

    def _core_object(self, method: str, plural: str, namespace: str, name: str | None, body: bytes) -> None:
        state = self.server_state
        kind = _CORE_KINDS[plural]
        collection = state._collections[plural]
        if name is None:
            if method != "POST":
                self._send_status(405, f"{method} is not supported here")
                return
            try:
                obj = json.loads(body)
                name = obj["metadata"]["name"]
            except (ValueError, KeyError, TypeError):
                self._send_status(422, f"{kind} is invalid: metadata.name: Required value: name is required")
                return
            if obj.get("apiVersion") != "v1" or obj.get("kind") != kind:
                self._send_status(400, f"the API version in the data ({obj.get('apiVersion')}) or its kind "
                                       f"({obj.get('kind')}) does not match the expected v1 {kind}")
                return
            if obj["metadata"].get("namespace") not in (None, "", namespace):
                self._send_status(400, "the namespace of the provided object does not match the namespace sent "
                                       "on the request")
                return
            if state.strict_namespaces and namespace not in state._collections["namespaces"].objects:
                self._send_status(404, f'namespaces "{namespace}" not found',
                                  details={"name": namespace, "kind": "namespaces"})
                return
            obj["metadata"]["namespace"] = namespace
            if self._refused(kind, "", name, kube_rules.validate_create(kind, obj)):
                return
            key = f"{namespace}/{name}"
            with state._cond:
                if key in collection.objects:
                    self._send_status(409, f'{plural} "{name}" already exists', "AlreadyExists",
                                      {"name": name, "kind": plural})
                    return
                obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=_now())
                data = state._record(collection, b"ADDED", key, obj)
                state._cond.notify_all()
            self._send_json(201, data)
            return
        key = f"{namespace}/{name}"
        with state._cond:
            data = collection.objects.get(key)
            if data is None:
                self._send_status(404, f'{plural} "{name}" not found', details={"name": name, "kind": plural})
                return
            if method == "DELETE":
                data = state._record(collection, b"DELETED", key, json.loads(data))
                state._cond.notify_all()
            elif method != "GET":
                self._send_status(405, f"{method} is not supported here")
                return
        self._send_json(200, data)

    # Custom resources

    def _custom_resource(
        self, method: str, segments: list[str], query: dict[str, str], body: bytes, watch: bool, fault: _Fault | None
    ) -> None:
        """/apis/{group}/{version}[/namespaces/{ns}]/{plural}[/{name}], the all-namespaces list and watch of a
        namespaced kind included. A path of the wrong scope for the kind is a 404, as on a real server."""
        group, version = segments[1], segments[2]
        rest = segments[3:]
        namespace = None
        if rest[0] == "namespaces" and len(rest) in (3, 4):
            namespace, rest = rest[1], rest[2:]
        if len(rest) not in (1, 2):  # subresources (status, scale) are not served
            self._send_status(404, "the server could not find the requested resource")
            return
        plural, name = rest[0], rest[1] if len(rest) == 2 else None
        state = self.server_state
        key = f"{group}/{version}/{plural}"
        if state._served_crd(group, version, plural) is None and not state.schemaless_custom_resources:
            self._send_status(404, "the server could not find the requested resource")
            return
        collection = state._custom_collection(key)
        with state._cond:
            if collection.namespaced is None and method == "POST":
                collection.namespaced = namespace is not None
            scoped = collection.namespaced
        every_namespace = scoped and namespace is None and name is None and method == "GET"
        if scoped is not None and (namespace is not None) != scoped and not every_namespace:
            if scoped and name is None and method == "POST":
                self._send_status(405, f"POST is not supported on the cluster-wide {plural}.{group}")
            else:
                self._send_status(404, "the server could not find the requested resource")
            return
        if name is None:
            if method == "GET" and watch:
                self._watch(key, query, fault, namespace)
            elif method == "GET":
                status, payload = state._list(key, query, namespace)
                self._send_json(status, payload)
            elif method == "POST":
                self._create_object(collection, group, version, plural, namespace, body)
            else:
                self._send_status(405, f"{method} is not supported here")
            return
        self._object(method, collection, group, plural, namespace, name, body)

    def _create_object(
        self, collection: _Collection, group: str, version: str, plural: str, namespace: str | None, body: bytes
    ) -> None:
        state = self.server_state
        resource = f"{plural}.{group}" if group else plural
        try:
            obj = json.loads(body)
            name = obj["metadata"]["name"]
            if not isinstance(name, str) or not name:
                raise TypeError
        except (ValueError, KeyError, TypeError):
            self._send_status(422, f"{resource} is invalid: metadata.name: Required value: name is required")
            return
        if not obj.get("kind"):
            self._send_status(400, f"Object 'Kind' is missing in '{body.decode(errors='replace')[:200]}'")
            return
        expected = f"{group}/{version}" if group else version
        if obj.get("apiVersion") != expected or (collection.kind and obj["kind"] != collection.kind):
            self._send_status(400, f"the API version in the data ({obj.get('apiVersion')}) or its kind "
                                   f"({obj['kind']}) does not match the expected {expected} {collection.kind}")
            return
        metadata = obj["metadata"]
        if metadata.get("namespace", namespace) != namespace:
            self._send_status(400, "the namespace of the provided object does not match the namespace sent on the "
                                   "request")
            return
        if namespace and state.strict_namespaces and namespace not in state._collections["namespaces"].objects:
            self._send_status(404, f'namespaces "{namespace}" not found',
                              details={"name": namespace, "kind": "namespaces"})
            return
        crd = state._served_crd(group, version, plural)
        if crd is not None:
            obj, errors = crd.admit(version, obj)
            if self._refused(crd.kind, group, name, errors):
                return
            metadata = obj["metadata"]
        key = _object_key(namespace, name)
        with state._cond:
            if key in collection.objects:
                self._send_status(409, f'{resource} "{name}" already exists', "AlreadyExists",
                                  {"name": name, "group": group, "kind": plural})
                return
            if not collection.kind:
                collection.kind, collection.list_kind = obj["kind"], f"{obj['kind']}List"
            for server_owned in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
                metadata.pop(server_owned, None)
            if namespace:
                metadata["namespace"] = namespace
            metadata.update(uid=str(uuid.uuid4()), generation=1, creationTimestamp=_now())
            data = state._record(collection, b"ADDED", key, obj)
            state._cond.notify_all()
        self._send_json(201, data)

    def _object(
        self, method: str, collection: _Collection, group: str, plural: str, namespace: str | None, name: str,
        body: bytes,
    ) -> None:
        state = self.server_state
        resource = f"{plural}.{group}" if group else plural
        key = _object_key(namespace, name)
        if method in ("PATCH", "PUT"):
            self._write(method, collection, resource, namespace, name, body,
                        {"name": name, "group": group, "kind": plural}, custom=True)
            return
        if method not in ("GET", "DELETE"):
            self._send_status(405, f"{method} is not supported here")
            return
        with state._cond:
            data = collection.objects.get(key)
            if data is None:
                self._send_status(404, f'{resource} "{name}" not found',
                                  details={"name": name, "group": group, "kind": plural})
                return
            if method == "GET":
                payload = data
            else:
                obj = json.loads(data)
                if obj["metadata"].get("finalizers"):
                    # Only marked: whoever owns the finalizers removes them, and the object goes with the last.
                    if not obj["metadata"].get("deletionTimestamp"):
                        obj["metadata"].update(deletionTimestamp=_now(), deletionGracePeriodSeconds=0)
                        payload = state._record(collection, b"MODIFIED", key, obj)
                    else:
                        payload = data
                else:
                    payload = state._record(collection, b"DELETED", key, obj)
            state._cond.notify_all()
        self._send_json(200, payload)

    # Updates: PATCH and PUT of any stored object

    def _write(
        self, method: str, collection: _Collection, resource: str, namespace: str | None, name: str, body: bytes,
        details: dict[str, Any], *, custom: bool = False,
    ) -> None:
        """PATCH or PUT (replace), checked as the API server checks them: the object keeps the URL's name and
        namespace (400), a metadata.resourceVersion must be the stored one (409 Conflict; a custom resource's PUT
        must carry one, 422), the uid never changes (422); other server-owned metadata is kept. A write that
        changes nothing makes no new version. Custom resources take no strategic merge patch (415)."""
        state = self.server_state
        if method not in ("PATCH", "PUT"):
            self._send_status(405, f"{method} is not supported here")
            return
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        accepted = (MERGE_PATCH,) if custom else (MERGE_PATCH, STRATEGIC_MERGE_PATCH)
        if method == "PATCH" and content_type not in accepted:
            self._send_status(415, "the body of the request was in an unknown format - accepted media types "
                                   f"include: {', '.join(accepted)}")
            return
        try:
            change = json.loads(body)
        except ValueError as exc:
            self._send_status(400, f"error decoding {'patch' if method == 'PATCH' else 'body'}: {exc}")
            return
        if not isinstance(change, dict) or not isinstance(change.get("metadata", {}), dict):
            self._send_status(400, f"the body of the {method} must be a JSON object")
            return
        if method == "PUT" and (refusal := _misaddressed(change, name, namespace)):
            self._send_status(400, refusal)
            return
        key = _object_key(namespace, name)
        with state._cond:
            data = collection.objects.get(key)
            if data is None:
                self._send_status(404, f'{resource} "{name}" not found', details=details)
                return
            current = json.loads(data)
            try:
                if method == "PUT":
                    wanted = change
                elif content_type == STRATEGIC_MERGE_PATCH:
                    wanted = strategic_merge_patch(current, change, collection.kind)
                else:
                    wanted = merge_patch(copy.deepcopy(current), change)
            except PatchError as exc:
                self._send_status(400, str(exc))
                return
            if not isinstance(wanted.get("metadata"), dict):
                wanted["metadata"] = {}
            if refusal := _misaddressed(wanted, name, namespace):
                self._send_status(400, refusal)
                return
            version = wanted["metadata"].get("resourceVersion")
            if not version and method == "PUT" and custom:
                # Custom resources allow no unconditional update; built-in kinds do.
                self._send_status(422, f'{resource} "{name}" is invalid: metadata.resourceVersion: Invalid value: '
                                       "0x0: must be specified for an update", details=details)
                return
            if version and version != current["metadata"]["resourceVersion"]:
                self._send_status(409, f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
                                       "modified; please apply your changes to the latest version and try again",
                                  "Conflict", details)
                return
            uid = wanted["metadata"].get("uid")
            if uid and uid != current["metadata"].get("uid"):
                group = collection.api_version.rpartition("/")[0]
                kind = f"{collection.kind}.{group}" if group else collection.kind
                message = f'metadata.uid: Invalid value: "{uid}": field is immutable'
                self._send_status(422, f'{kind} "{name}" is invalid: {message}', details={
                    **details, "causes": [{"reason": "FieldValueInvalid", "message": message.split(": ", 1)[1],
                                           "field": "metadata.uid"}]})
                return
            updated = _updated(current, wanted)
            # Then the rules for updates decide (tests/kube_rules.py): a custom object's schema and CEL rules
            # (transition rules see the stored object), a Job's immutable template, selector and completions.
            group, _, version = collection.api_version.rpartition("/")
            crd = state._served_crd(group, version, resource.split(".")[0]) if custom else None
            if crd is not None:
                updated, errors = crd.admit(version, updated, current)
            elif custom:
                errors = kube_rules.validate_metadata_update(current, updated)
            else:
                errors = kube_rules.validate_update(collection.kind, current, updated)
            if self._refused(collection.kind, group, name, errors):
                return
            if updated == current:  # a no-op write makes no new version, as on a real server
                payload = data
            else:
                payload = state._record(collection, b"DELETED" if _released(updated) else b"MODIFIED", key, updated)
                state._cond.notify_all()
        self._send_json(200, payload)

    # Watches

    def _watch(self, name: str, query: dict[str, str], fault: _Fault | None, namespace: str | None = None) -> None:
        state = self.server_state
        collection = state._collections[name]
        bookmarks = query.get("allowWatchBookmarks", "").lower() in ("true", "1")
        timeout = float(query.get("timeoutSeconds") or state.default_watch_timeout)
        requested = query.get("resourceVersion", "")
        try:
            selected = selection(query, collection, namespace)
        except SelectorError as exc:
            self._send_status(400, str(exc))
            return
        with state._cond:
            if requested not in ("", "0"):
                try:
                    cursor = int(requested)
                except ValueError:
                    self._send_status(400, f"invalid resourceVersion: {requested!r}")
                    return
                if cursor < collection.compacted:
                    message = f"too old resource version: {cursor} ({collection.compacted})"
                    self._send_status(410, message, "Expired")
                    return
                initial: list[bytes] = []
            else:
                # "0" or unset: the current state as synthetic ADDED events, then changes (as the server does).
                cursor = state._rv
                initial = [_event_line(b"ADDED", data) for data in collection.snapshot()
                           if selected is None or selected(data)]
            # Taken with the registration, so a bookmark() or end_watches() right after wait_for_watches() counts.
            generations = (state._bookmark_generation, state._end_generation)
            state._open_watches += 1
            state._watches_opened[name] = state._watches_opened.get(name, 0) + 1
            state._cond.notify_all()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache, private")
            self.end_headers()
            if fault and fault.action == "stall":
                self._stall()
                return
            self._stream(collection, cursor, initial, bookmarks, timeout, fault, generations, selected)
        finally:
            with state._cond:
                state._open_watches -= 1
                state._cond.notify_all()

    def _stall(self) -> None:
        state = self.server_state
        while not state._stall_release.wait(0.05):
            if self._client_gone():
                break
        # The stream never completes: drop the connection without the terminating chunk.
        self.close_connection = True

    def _stream(
        self,
        collection: _Collection,
        cursor: int,
        initial: list[bytes],
        bookmarks: bool,
        timeout: float,
        fault: _Fault | None,
        generations: tuple[int, int],
        selected: Callable[[bytes], bool] | None = None,
    ) -> None:
        state = self.server_state
        deadline = time.monotonic() + timeout
        end_after = fault.after if fault and fault.action in ("end", "error") else None
        sent = 0
        bookmark_generation, end_generation = generations
        last_bookmark = time.monotonic()
        pending = list(initial)
        while True:
            if end_after is not None and sent + len(pending) >= end_after:
                pending = pending[: end_after - sent]
                if fault is not None and fault.action == "error":
                    message = fault.message or f"injected watch error {fault.status}"
                    pending.append(_event_line(b"ERROR", _dumps(status_body(fault.status, message))))
                self._send_lines(pending)
                break
            if pending:
                self._send_lines(pending)
                sent += len(pending)
                pending = []
            with state._cond:
                while True:
                    if state._closing or state._end_generation != end_generation:
                        pending = None
                        break
                    if cursor < collection.last_dropped:
                        message = f"too old resource version: {cursor} ({collection.compacted})"
                        pending = [_event_line(b"ERROR", _dumps(status_body(410, message, "Expired")))]
                        end_after = sent + 1
                        fault = None
                        break
                    start = bisect.bisect_right(collection.history_rvs, cursor)
                    if start < len(collection.history):
                        batch = collection.history[start : start + 1000]
                        pending = [line for rv, kind, data, previous in batch
                                   if (line := _selected_event(rv, kind, data, previous, selected))]
                        cursor = batch[-1][0]
                        break
                    cursor = max(cursor, state._rv)
                    now = time.monotonic()
                    due = state.bookmark_interval is not None and now - last_bookmark >= state.bookmark_interval
                    if bookmarks and (state._bookmark_generation != bookmark_generation or due):
                        bookmark_generation = state._bookmark_generation
                        last_bookmark = now
                        stub = {
                            "kind": collection.kind,
                            "apiVersion": collection.api_version,
                            "metadata": {"resourceVersion": f"{cursor}"},
                        }
                        pending = [_event_line(b"BOOKMARK", _dumps(stub))]
                        break
                    remaining = deadline - now
                    if remaining <= 0:
                        pending = None
                        break
                    state._cond.wait(min(remaining, 0.2))
                    if self._client_gone():
                        pending = None
                        break
            if pending is None:
                break
        self.wfile.write(b"0\r\n\r\n")

    def _send_lines(self, lines: list[bytes]) -> None:
        # Several events per chunk at times, as a real server under load does: clients must split lines.
        for start in range(0, len(lines), 64):
            self._write_chunk(b"".join(lines[start : start + 64]))


def selection(query: dict[str, str], collection: _Collection,
              namespace: str | None = None) -> Callable[[bytes], bool] | None:
    """A predicate over stored objects for a list's or a watch's labelSelector, fieldSelector and namespace, or
    None when it selects everything. Raises SelectorError (a 400) for a selector the API server refuses."""
    labels = query.get("labelSelector", "")
    matches_labels = label_selector(labels) if labels.strip() else None
    matches_fields = field_selector(query.get("fieldSelector", ""), collection.kind,
                                    namespaced=collection.namespaced is not False)
    if matches_labels is None and matches_fields is None and namespace is None:
        return None

    def selected(data: bytes) -> bool:
        obj = json.loads(data)
        metadata = obj.get("metadata") or {}
        return ((namespace is None or metadata.get("namespace") == namespace)
                and (matches_labels is None or matches_labels(metadata.get("labels") or {}))
                and (matches_fields is None or matches_fields(obj)))

    return selected


_BUILTIN = {(kind.group, kind.plural): kind for kind in kube_rules.BUILTIN_KINDS}
_BUILTIN_KINDS = {"nodes": "Node", "pods": "Pod", "jobs": "Job", "namespaces": "Namespace", "events": "Event"}


def _check_metadata(collection: str, obj: dict[str, Any]) -> None:
    """The test helpers write nodes, pods and Jobs as the kubelet and controllers would: through the API server,
    whose rules for names, labels and annotations hold for them too (their specs are theirs to get right)."""
    kind = _BUILTIN_KINDS[collection]
    errors = kube_rules.validate_metadata(obj.get("metadata"), name_rule=kube_rules.NAME_RULES[kind],
                                          namespaced=kube_rules.NAMESPACED[kind])
    if errors:
        group = "batch" if kind == "Job" else ""
        raise kube_rules.Invalid(kind, group, (obj.get("metadata") or {}).get("name", ""), errors)


def _selected_event(
    rv: int, kind: bytes, data: bytes, previous: bytes | None, selected: Callable[[bytes], bool] | None
) -> bytes | None:
    """The event a watch with `selected` sends for a change, as the API server's watch cache does: an object that
    enters the selection is ADDED, one that leaves it is DELETED (its last selected state, at the new
    resourceVersion), one that stays is MODIFIED; None when the watch does not see the change."""
    if selected is None:
        return _event_line(kind, data)
    if kind == b"DELETED":
        return _event_line(kind, data) if selected(previous or data) else None
    now, before = selected(data), previous is not None and selected(previous)
    if now:
        return _event_line(b"MODIFIED" if before else b"ADDED", data)
    if before:
        last = json.loads(previous)
        last["metadata"]["resourceVersion"] = str(rv)
        return _event_line(b"DELETED", _dumps(last))
    return None


def _namespace_of(collection: _Collection, namespace: str | None) -> str | None:
    """For the test helpers: a namespaced kind's objects are in "default" unless told otherwise."""
    return namespace or ("default" if collection.namespaced else None)


def _object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _misaddressed(obj: dict[str, Any], name: str, namespace: str | None) -> str | None:
    """Why the API server refuses a body whose name or namespace is not the URL's (a 400), or None."""
    metadata = obj.get("metadata") or {}
    if metadata.get("name") != name:
        return f"the name of the object ({metadata.get('name') or ''}) does not match the name on the URL ({name})"
    if namespace and metadata.get("namespace") not in (None, "", namespace):
        return "the namespace of the provided object does not match the namespace sent on the request"
    return None


def _updated(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """`wanted` with `current`'s server-owned fields (uid, creationTimestamp, generation, deletion marks...); the
    generation, where the kind has one, counts changes to anything but metadata and status (the rule for Jobs
    and for CRDs with a status subresource)."""
    updated = dict(wanted)
    metadata = updated["metadata"] = dict(wanted["metadata"])
    for key in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion", "generation",
                "deletionTimestamp", "deletionGracePeriodSeconds"):
        if key in current["metadata"]:
            metadata[key] = current["metadata"][key]
        else:
            metadata.pop(key, None)
    for key in ("apiVersion", "kind"):
        if key in current:
            updated[key] = current[key]
    outside = {key for key in (*current, *updated) if key not in ("metadata", "status")}
    if "generation" in metadata and any(current.get(key) != updated.get(key) for key in outside):
        metadata["generation"] = int(metadata["generation"] or 1) + 1
    return updated


def _released(obj: dict[str, Any]) -> bool:
    """True when an object marked for deletion has lost its last finalizer: it goes now."""
    metadata = obj.get("metadata") or {}
    return bool(metadata.get("deletionTimestamp")) and not metadata.get("finalizers")


def _event_line(kind: bytes, data: bytes) -> bytes:
    return b'{"type":"%s","object":%s}\n' % (kind, data)
