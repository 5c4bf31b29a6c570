"""The real cluster: the official `kubernetes` client, used for transport and authentication only.

Responses are read raw and decoded with `json.loads` into plain dicts: the client's model classes cost about
a millisecond per node, which is most of a sync of a large cluster. Every request carries client-side
timeouts, so a dead API server or a stalled watch surfaces as `Unavailable` instead of a hung worker.
"""

from __future__ import annotations

import gc
import json
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from .interface import (
    DEFAULT_PAGE_SIZE,
    WHOLE_LOG,
    ClusterError,
    Conflict,
    Expired,
    ListPage,
    LogQuery,
    NotFound,
    ObjectKind,
    Unavailable,
    WatchEvent,
)

logger = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
# Connection errors (nothing was sent) are safe to retry at once; anything slower is the caller's back-off's
# business. One read retry covers a pooled keep-alive connection the server closed while it sat idle.
TRANSPORT_RETRIES = urllib3.Retry(total=3, connect=3, read=1, status=0, redirect=0, other=0, backoff_factor=0.1)
_TRANSPORT_ERRORS = (urllib3.exceptions.HTTPError, OSError)


def error_for_status(message: str, status: int | None) -> ClusterError:
    """The ClusterError subclass for an HTTP status (or a Status object's code)."""
    if status == 404:
        return NotFound(message, status)
    if status == 409:
        return Conflict(message, status)
    if status == 410:
        return Expired(message, status)
    if status is not None and (status == 429 or status >= 500):
        return Unavailable(message, status)
    return ClusterError(message, status)


def decode(data: bytes) -> Any:
    """json.loads with the cyclic garbage collector paused.

    A page of 500 pods decodes into ~100k dicts, lists and strings, none of them garbage; while the pages of
    a large cluster accumulate, the collector keeps re-scanning that growing heap. Pausing it during each
    decode cuts listing 150k pods from 8.6 s to 5.6 s (same machine, same run).
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(data)
    finally:
        if enabled:
            gc.enable()


def _status_message(body: bytes | str | None, fallback: str) -> str:
    """The `message` of a Kubernetes Status body, or `fallback` when the body is not one."""
    if not body:
        return fallback
    try:
        status = json.loads(body)
    except ValueError:
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        return text.strip()[:200] or fallback
    if isinstance(status, dict) and status.get("message"):
        return str(status["message"])
    return fallback


class KubeCluster:
    """`Cluster` over the Kubernetes API. Thread-safe: the underlying urllib3 pool is."""

    # Writes from several threads at once gain: each waits on the API server (its etcd write), not on this process
    # (scheduling.run.dispatch has several of a batch's creates in flight).
    concurrent_writes = True

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        watch_margin: float = 15.0,
    ):
        self.api_client = api_client
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        # A watch may be silent for its whole timeoutSeconds (no changes, no bookmark); only silence beyond
        # that, plus this margin, means the stream has stalled.
        self.watch_margin = watch_margin
        # When a request of this process last got no answer (time.monotonic()): a 401/403 soon after is the
        # restarted server's authorization warming up, worth another try (pools.cluster.retries).
        self.unreachable_at: float | None = None

    @classmethod
    def from_kubeconfig(cls, path: str, context: str | None = None, **timeouts: float) -> KubeCluster:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(
            config_file=str(path), context=context, client_configuration=configuration, persist_config=False
        )
        configuration.retries = TRANSPORT_RETRIES
        return cls(k8s.ApiClient(configuration), **timeouts)

    @classmethod
    def in_cluster(cls, **timeouts: float) -> KubeCluster:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        configuration.retries = TRANSPORT_RETRIES
        return cls(k8s.ApiClient(configuration), **timeouts)

    def close(self) -> None:
        self.api_client.close()

    def __repr__(self) -> str:
        return f"<KubeCluster {self.api_client.configuration.host}>"

    # Reads

    def list_nodes(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        return self._list("listing nodes", "/api/v1/nodes", limit, continue_token)

    def list_pods(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        return self._list("listing pods", "/api/v1/pods", limit, continue_token)

    def watch_nodes(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("watching nodes", "/api/v1/nodes", resource_version, timeout_seconds)

    def watch_pods(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("watching pods", "/api/v1/pods", resource_version, timeout_seconds)

    def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        return self._json(f"getting job {namespace}/{name}", "GET", _job_path(namespace, name))

    def list_jobs(self, label_selector: str, *, limit: int = DEFAULT_PAGE_SIZE,
                  continue_token: str | None = None) -> ListPage:
        return self._list("listing jobs", "/apis/batch/v1/jobs", limit, continue_token,
                          [("labelSelector", label_selector)])

    def watch_jobs(self, label_selector: str, resource_version: str, *,
                   timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("watching jobs", "/apis/batch/v1/jobs", resource_version, timeout_seconds,
                           [("labelSelector", label_selector)])

    def list_events(self, field_selector: str, *, limit: int = DEFAULT_PAGE_SIZE,
                    continue_token: str | None = None) -> ListPage:
        return self._list("listing events", "/api/v1/events", limit, continue_token,
                          [("fieldSelector", field_selector)])

    def watch_events(self, field_selector: str, resource_version: str, *,
                     timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("watching events", "/api/v1/events", resource_version, timeout_seconds,
                           [("fieldSelector", field_selector)])

    def read_pod_log(self, namespace: str, name: str, query: LogQuery = WHOLE_LOG) -> bytes:
        what = f"reading the log of pod {namespace}/{name}"
        response = self._send(what, "GET", _pod_log_path(namespace, name), query=query.params(), accept="*/*")
        try:
            return response.data
        except _TRANSPORT_ERRORS as exc:
            response.close()
            raise Unavailable(f"{what}: {exc}") from exc
        finally:
            response.release_conn()

    def follow_pod_log(self, namespace: str, name: str, query: LogQuery = WHOLE_LOG, *,
                       timeout_seconds: float = 300) -> Iterator[bytes]:
        what = f"following the log of pod {namespace}/{name}"
        deadline = time.monotonic() + timeout_seconds
        # The read timeout is the window itself: a log silent for all of it ends the window quietly.
        response = self._send(what, "GET", _pod_log_path(namespace, name),
                              query=[*query.params(), ("follow", "true")], accept="*/*",
                              read_timeout=max(0.05, timeout_seconds))
        return _followed(what, response, deadline)

    # Writes

    def patch_node_labels(self, name: str, labels: dict[str, str | None]) -> dict[str, Any]:
        patch = {"metadata": {"labels": dict(labels)}}
        return self._json(f"patching labels of node {name}", "PATCH", _node_path(name), body=patch, content=MERGE_PATCH)

    def set_unschedulable(self, name: str, unschedulable: bool) -> dict[str, Any]:
        # Uncordoning removes the field (as `kubectl uncordon` does) so the node reads as if never cordoned.
        patch = {"spec": {"unschedulable": True if unschedulable else None}}
        what = f"{'cordoning' if unschedulable else 'uncordoning'} node {name}"
        return self._json(what, "PATCH", _node_path(name), body=patch, content=MERGE_PATCH)

    def ensure_namespace(self, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> bool:
        path = f"/api/v1/namespaces/{quote(name, safe='')}"
        try:
            self._json(f"getting namespace {name}", "GET", path)
            return False
        except NotFound:
            pass
        metadata = {"name": name, "labels": labels, **({"annotations": annotations} if annotations else {})}
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        try:
            self._json(f"creating namespace {name}", "POST", "/api/v1/namespaces", body=body)
        except Conflict:  # created meanwhile by someone else
            return False
        return True

    def namespace_uid(self, name: str) -> str:
        namespace = self._json(f"getting namespace {name}", "GET", f"/api/v1/namespaces/{quote(name, safe='')}")
        return (namespace.get("metadata") or {}).get("uid") or ""

    def create_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("metadata", {}).get("name") or body.get("metadata", {}).get("generateName", "?")
        path = f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}/jobs"
        return self._json(f"creating job {namespace}/{name}", "POST", path, body=body)

    def delete_job(self, namespace: str, name: str, *, propagation_policy: str = "Background") -> None:
        options = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation_policy}
        self._json(f"deleting job {namespace}/{name}", "DELETE", _job_path(namespace, name), body=options)

    # Custom objects

    def list_objects(self, kind: ObjectKind, *, label_selector: str = "", namespace: str | None = None,
                     limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        namespace = kind.scope(namespace, listing=True)
        return self._list(f"listing {_plural(kind, namespace)}", _objects_path(kind, namespace), limit,
                          continue_token, _selector_param(label_selector))

    def watch_objects(self, kind: ObjectKind, resource_version: str, *, label_selector: str = "",
                      namespace: str | None = None, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        namespace = kind.scope(namespace, listing=True)
        return self._watch(f"watching {_plural(kind, namespace)}", _objects_path(kind, namespace), resource_version,
                           timeout_seconds, _selector_param(label_selector))

    def get_object(self, kind: ObjectKind, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        namespace = kind.scope(namespace)
        return self._json(f"getting {_one(kind, namespace, name)}", "GET", _object_path(kind, namespace, name))

    def create_object(self, kind: ObjectKind, body: dict[str, Any], *,
                      namespace: str | None = None) -> dict[str, Any]:
        metadata = body.get("metadata") or {}
        if namespace is None and kind.namespaced:
            namespace = metadata.get("namespace")
        namespace = kind.scope(namespace)
        body = {"apiVersion": kind.api_version, "kind": kind.kind, **body}
        name = metadata.get("name") or metadata.get("generateName", "?")
        return self._json(f"creating {_one(kind, namespace, name)}", "POST", _objects_path(kind, namespace),
                          body=body)

    def patch_object(self, kind: ObjectKind, name: str, patch: dict[str, Any], *,
                     namespace: str | None = None) -> dict[str, Any]:
        namespace = kind.scope(namespace)
        return self._json(f"patching {_one(kind, namespace, name)}", "PATCH", _object_path(kind, namespace, name),
                          body=patch, content=MERGE_PATCH)

    def delete_object(self, kind: ObjectKind, name: str, *, namespace: str | None = None) -> None:
        namespace = kind.scope(namespace)
        self._json(f"deleting {_one(kind, namespace, name)}", "DELETE", _object_path(kind, namespace, name))

    # Transport

    def _list(self, what: str, path: str, limit: int, continue_token: str | None,
              params: list[tuple[str, Any]] = ()) -> ListPage:
        query: list[tuple[str, Any]] = [*params, ("limit", int(limit))]
        if continue_token:
            query.append(("continue", continue_token))
        payload = self._json(what, "GET", path, query=query)
        metadata = payload.get("metadata") or {}
        return ListPage(
            items=payload.get("items") or [],
            resource_version=metadata.get("resourceVersion", ""),
            continue_token=metadata.get("continue") or None,
        )

    def _watch(self, what: str, path: str, resource_version: str, timeout_seconds: float,
               params: list[tuple[str, Any]] = ()) -> Iterator[WatchEvent]:
        timeout_seconds = max(1, int(timeout_seconds))
        query = [
            *params,
            ("watch", True),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", True),
            ("timeoutSeconds", timeout_seconds),
        ]
        response = self._send(what, "GET", path, query=query, read_timeout=timeout_seconds + self.watch_margin)
        finished = False
        try:
            for line in _lines(response, what):
                yield _event(what, line)
            finished = True
        finally:
            if not finished:
                # Unread bytes would poison the next request on this connection, so drop it.
                response.close()
            response.release_conn()

    def _json(
        self,
        what: str,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, Any]] = (),
        body: Any = None,
        content: str = "application/json",
    ) -> dict[str, Any]:
        response = self._send(what, method, path, query=query, body=body, content=content)
        try:
            data = response.data
        except _TRANSPORT_ERRORS as exc:
            response.close()
            raise Unavailable(f"{what}: {exc}") from exc
        finally:
            response.release_conn()
        try:
            return decode(data)
        except ValueError as exc:
            raise ClusterError(f"{what}: the server answered something that is not JSON: {exc}") from exc

    def _send(
        self,
        what: str,
        method: str,
        path: str,
        *,
        query: Iterable[tuple[str, Any]] = (),
        body: Any = None,
        content: str = "application/json",
        read_timeout: float | None = None,
        accept: str = "application/json",
    ) -> urllib3.BaseHTTPResponse:
        """Sends one request and returns the raw, unread urllib3 response; non-2xx become ClusterErrors."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content
        timeout = (self.connect_timeout, read_timeout or self.read_timeout)
        # Strings, because older clients would send Python's "True" for a bool.
        params = [(key, _query_value(value)) for key, value in query]
        api = self.api_client
        try:
            if hasattr(api, "param_serialize"):  # kubernetes >= 37 (openapi-generator 7 clients)
                request = api.param_serialize(
                    method,
                    path,
                    query_params=params,
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                )
                response = api.call_api(*request, _request_timeout=timeout).response
            else:
                response = api.call_api(
                    path,
                    method,
                    query_params=params,
                    header_params=headers,
                    body=body,
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=timeout,
                )
        except ApiException as exc:
            # Older clients raise non-2xx here; status 0 is how every version reports a TLS failure.
            if not exc.status:
                raise ClusterError(f"{what}: {exc.reason}") from exc
            message = _status_message(exc.body, exc.reason or "")
            raise error_for_status(f"{what}: HTTP {exc.status} {message}", exc.status) from exc
        except _TRANSPORT_ERRORS as exc:
            self.unreachable_at = time.monotonic()
            raise Unavailable(f"{what}: {exc}") from exc
        if not 200 <= response.status < 300:
            try:
                error_body = response.data
            except _TRANSPORT_ERRORS:
                error_body = b""
            finally:
                response.release_conn()
            message = _status_message(error_body, response.reason or "")
            raise error_for_status(f"{what}: HTTP {response.status} {message}", response.status)
        return response


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _pod_log_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}/log"


def _followed(what: str, response: urllib3.BaseHTTPResponse, deadline: float) -> Iterator[bytes]:
    """Whole lines of a followed log as each chunk brings them, until the server ends the stream (the container
    ended), the deadline passes, or the stream stays silent past it (urllib3's read timeout)."""
    partial = b""
    finished = False
    try:
        chunks = response.stream(64 * 1024, decode_content=True)
        while True:
            try:
                chunk = next(chunks)
            except StopIteration:
                finished = True
                break
            except urllib3.exceptions.ReadTimeoutError:
                break
            except _TRANSPORT_ERRORS as exc:
                if time.monotonic() >= deadline:
                    break
                raise Unavailable(f"{what}: stream broken: {exc}") from exc
            data = partial + chunk
            cut = data.rfind(b"\n") + 1
            partial = data[cut:]
            if cut:
                yield data[:cut]
            if time.monotonic() >= deadline:
                break
        if finished and partial:
            yield partial  # the container's last words, without their newline
    finally:
        if not finished:
            response.close()  # unread bytes would poison the next request on this connection
        response.release_conn()


def _node_path(name: str) -> str:
    return f"/api/v1/nodes/{quote(name, safe='')}"


def _job_path(namespace: str, name: str) -> str:
    return f"/apis/batch/v1/namespaces/{quote(namespace, safe='')}/jobs/{quote(name, safe='')}"


def _objects_path(kind: ObjectKind, namespace: str | None) -> str:
    """The collection: cluster-wide (every namespace, for a namespaced kind) unless `namespace` is given."""
    root = f"/apis/{quote(kind.group, safe='')}/{quote(kind.version, safe='')}" if kind.group else \
        f"/api/{quote(kind.version, safe='')}"
    if namespace is not None:
        root += f"/namespaces/{quote(namespace, safe='')}"
    return f"{root}/{quote(kind.plural, safe='')}"


def _object_path(kind: ObjectKind, namespace: str | None, name: str) -> str:
    if not name:
        raise ValueError(f"a {kind.kind} needs a name")  # an empty one would address the whole collection
    return f"{_objects_path(kind, namespace)}/{quote(name, safe='')}"


def _plural(kind: ObjectKind, namespace: str | None) -> str:
    return f"{kind.plural}.{kind.group}".rstrip(".") + (f" in {namespace}" if namespace else "")


def _one(kind: ObjectKind, namespace: str | None, name: str) -> str:
    return f"{kind.kind} {namespace}/{name}" if namespace else f"{kind.kind} {name}"


def _selector_param(label_selector: str) -> list[tuple[str, Any]]:
    return [("labelSelector", label_selector)] if label_selector else []


def _lines(response: urllib3.BaseHTTPResponse, what: str) -> Iterator[bytes]:
    """The newline-delimited lines of a streamed body, whatever the chunking (a line may span chunks)."""
    chunks = response.stream(64 * 1024, decode_content=True)
    parts: list[bytes] = []
    while True:
        try:
            chunk = next(chunks)
        except StopIteration:
            break
        except _TRANSPORT_ERRORS as exc:
            raise Unavailable(f"{what}: stream broken or stalled: {exc}") from exc
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if parts:
                parts.append(chunk[start:end])
                line = b"".join(parts)
                parts.clear()
            else:
                line = chunk[start:end]
            if line.strip():
                yield line
            start = end + 1
        if start < len(chunk):
            parts.append(chunk[start:])
    if parts and b"".join(parts).strip():
        # A final line without its newline means the stream was cut mid-event.
        raise Unavailable(f"{what}: stream ended in the middle of an event")


def _event(what: str, line: bytes) -> WatchEvent:
    try:
        payload = json.loads(line)
    except ValueError as exc:
        raise Unavailable(f"{what}: undecodable watch event: {exc}") from exc
    kind = payload.get("type", "")
    obj = payload.get("object") or {}
    if kind == "ERROR":
        code = obj.get("code") if isinstance(obj.get("code"), int) else None
        detail = " ".join(str(part) for part in (obj.get("reason"), obj.get("message")) if part)
        raise error_for_status(f"{what}: watch error {code}: {detail or 'no details'}", code)
    return WatchEvent(kind, obj)
