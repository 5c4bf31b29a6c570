"""The simulated cluster itself: the Cluster interface over the fleet's nodes, the pods of the simulation and of
users' Jobs, custom objects, and the changes users make, kept in the state file (see the package's docstring for
how it works)."""

import bisect
import copy
import json
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..interface import (
    DEFAULT_PAGE_SIZE,
    WHOLE_LOG,
    ClusterError,
    Expired,
    ListPage,
    LogQuery,
    NotFound,
    ObjectKind,
    WatchEvent,
)
from ..kinds import CONFIG_MAP, KAI_PODGROUP, KAI_QUEUE, SERVICE
from ..selectors import label_selector
from . import logs
from .fleet import RV_PER_TICK, Catalog, build_catalog, fleet_profile, node_object, trouble_at, troubled
from .jobs import JobController
from .kai import KaiScheduler
from .objects import CustomObjects, forget_versions
from .randomness import bulk_loads, compact_dumps, stable_hash, stable_uid
from .store import (
    RETENTION_SECONDS,
    Base,
    Overlay,
    StateFile,
    View,
    compact,
    decode_continue,
    encode_continue,
    overlay_at,
)
from .workloads import daemon_pods, work_plan, workload_pod

_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


_CATALOGS: dict[tuple[int, float, str], Catalog] = {}
_CATALOGS_LOCK = threading.Lock()


def _selector(text: str):
    try:
        return label_selector(text)
    except ValueError as exc:
        raise ClusterError(str(exc), 400) from None


@dataclass(frozen=True)
class _Custom:
    """What a list or watch of custom objects reads: one kind, in one namespace or all."""

    kind: ObjectKind
    namespace: str | None


def _catalog(seed: int, tick_seconds: float, profile: str) -> Catalog:
    # Shared by every instance in the process: the fleet is a pure function of the seed and profile.
    key = (seed, tick_seconds, profile)
    with _CATALOGS_LOCK:
        if key not in _CATALOGS:
            catalog = build_catalog(seed, tick_seconds, profile)
            catalog.daemon_pods = daemon_pods(catalog)
            _CATALOGS[key] = catalog
        return _CATALOGS[key]


class SimulatedCluster:
    """A 250-node GPU cluster whose nodes fall ill and recover and whose pods come and go, shared by every process
    that opens it with the same name and state_dir; or, for a name that asks for the "kai" fleet
    (fleet.fleet_profile) or with `fleet="kai"`, a 14-node lab where only users' Jobs run. Either runs the Jobs of
    kai-scheduler as KAI would (kai.py)."""

    def __init__(self, name: str, state_dir: Path, *, seed: int | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, tick_seconds: float = 5.0, fleet: str | None = None):
        if tick_seconds <= 0:
            raise ValueError("tick_seconds must be positive")
        self.name = name
        self.seed = stable_hash("cluster", name) if seed is None else seed
        self.tick_seconds = tick_seconds
        self.fleet = fleet or fleet_profile(name)
        self._clock, self._sleep = clock, sleep
        self._catalog = _catalog(self.seed, tick_seconds, self.fleet)
        self._file = StateFile(state_dir, name)
        self._jobs = JobController(self._catalog, clock)
        self._custom = CustomObjects(self.seed, clock)
        self._kai = KaiScheduler(self._jobs, self._custom, clock)
        self._kai_checked: tuple[int, int] | None = None  # (state file generation, tick) last found not due
        self._mutex = threading.RLock()
        self._bases: OrderedDict[int, Base] = OrderedDict()
        self._views: OrderedDict[tuple[int, int], View] = OrderedDict()
        self._overlays: OrderedDict[tuple[int, int], Overlay] = OrderedDict()
        self._memo_old: dict[tuple, str] = {}
        self._memo_new: dict[tuple, str] = {}

    # ---- the Cluster interface ------------------------------------------------------------------------------

    def list_nodes(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        return self._list("nodes", limit, continue_token)

    def list_pods(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        return self._list("pods", limit, continue_token)

    def watch_nodes(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("nodes", resource_version, timeout_seconds)

    def watch_pods(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("pods", resource_version, timeout_seconds)

    def read_pod_log(self, namespace: str, name: str, query: LogQuery = WHOLE_LOG) -> bytes:
        pod = self._pod(namespace, name)
        return logs.render(logs.lines(pod, query, self._clock()), query)

    def follow_pod_log(self, namespace: str, name: str, query: LogQuery = WHOLE_LOG, *,
                       timeout_seconds: float = 300) -> Iterator[bytes]:
        pod = self._pod(namespace, name)
        found = logs.lines(pod, query, self._clock())  # errors now, before the first byte
        return self._follow_log(namespace, name, query, found, timeout_seconds)

    def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        with self._mutex:
            now_rv, state = self._current()
            text = logs.pod_or_404(self._view(now_rv, state).pods, namespace, name)
        return json.loads(text)

    def _follow_log(self, namespace: str, name: str, query: LogQuery, found: list, timeout_seconds: float
                    ) -> Iterator[bytes]:
        deadline = self._clock() + max(0.0, timeout_seconds)
        # Bounded by count too, so an injected clock that never moves cannot make the stream endless.
        polls_left = int(max(0.0, timeout_seconds) / min(1.0, self.tick_seconds)) + 2
        last = found[-1][0] if found else None
        if found:
            yield logs.render(found, LogQuery(timestamps=query.timestamps))
        while polls_left > 0 and self._clock() < deadline:
            polls_left -= 1
            self._sleep(max(0.0, min(1.0, self.tick_seconds, deadline - self._clock())))
            try:
                pod = self._pod(namespace, name)
                tail = LogQuery(container=query.container)
                new = [item for item in logs.lines(pod, tail, self._clock()) if last is None or item[0] > last]
            except ClusterError:
                return  # the pod went (its Job deleted): the stream ends as the kubelet's would
            if new:
                last = new[-1][0]
                yield logs.render(new, LogQuery(timestamps=query.timestamps))
            state = next((s.get("state") or {} for s in (pod.get("status") or {}).get("containerStatuses") or []
                          if s.get("name") == (query.container or s.get("name"))), {})
            if "terminated" in state:
                return

    def patch_node_labels(self, name: str, labels: dict[str, str | None]) -> dict[str, Any]:
        if not isinstance(labels, dict):
            raise ClusterError("labels must be a mapping", 422)
        for key, value in labels.items():
            if not isinstance(key, str) or not _LABEL_KEY_RE.fullmatch(key) or len(key.split("/")[-1]) > 63:
                raise ClusterError(f'Node "{name}" is invalid: metadata.labels: Invalid value: "{key}": '
                                   "name part must consist of alphanumeric characters, '-', '_' or '.'", 422)
            if value is not None and (not isinstance(value, str) or not _LABEL_VALUE_RE.fullmatch(value)):
                raise ClusterError(f'Node "{name}" is invalid: metadata.labels: Invalid value: "{value}": a valid '
                                   "label must be an empty string or consist of alphanumeric characters, '-', '_' "
                                   "or '.', and must start and end with an alphanumeric character", 422)

        def change(state, rv, view):
            current = view.node_objs[name]["metadata"]["labels"]
            patch = {key: value for key, value in labels.items() if current.get(key) != value}
            if not patch:
                return False
            state["ops"].append([rv, name, "labels", patch])
            return True

        return self._change_node(name, change)

    def set_unschedulable(self, name: str, unschedulable: bool) -> dict[str, Any]:
        def change(state, rv, view):
            # Recorded even when the node already looks that way, so the user's choice outlives a simulated cordon.
            if overlay_at(state, rv).cordon.get(name) == bool(unschedulable):
                return False
            state["ops"].append([rv, name, "cordon", bool(unschedulable)])
            return True

        return self._change_node(name, change)

    def ensure_namespace(self, name: str, labels: dict[str, str], annotations: dict[str, str] | None = None) -> bool:
        """Every namespace exists in the simulation (Jobs are accepted in any); nothing is created."""
        return False

    def namespace_uid(self, name: str) -> str:
        """Stable per simulated cluster (its seed) and namespace, as every namespace exists here."""
        return stable_uid(self.seed, "namespace", name)

    def create_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        job = self._jobs.normalise_job(namespace, body)

        def change(state, rv, view):
            record = self._jobs.create(state, rv, view, namespace, job)
            if "kai" in record:
                self._kai.run(state, rv, view)  # placed at once when it fits, as KAI answers within a second
            return record

        record = self._mutate(change)
        return self._jobs.job_object(record, record["created_rv"])

    def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        with self._mutex:
            rv, state = self._current()
            return self._jobs.get(state, rv, namespace, name)

    def list_jobs(self, label_selector: str, *, limit: int = DEFAULT_PAGE_SIZE,
                  continue_token: str | None = None) -> ListPage:
        return self._list("jobs", limit, continue_token, _selector(label_selector))

    def watch_jobs(self, label_selector: str, resource_version: str, *,
                   timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("jobs", resource_version, timeout_seconds, _selector(label_selector))

    # Its Job controller always creates the pods: no FailedCreate (nor any other) Event is ever recorded.

    def list_events(self, field_selector: str, *, limit: int = DEFAULT_PAGE_SIZE,
                    continue_token: str | None = None) -> ListPage:
        return self._list("events", limit, continue_token)

    def watch_events(self, field_selector: str, resource_version: str, *,
                     timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("events", resource_version, timeout_seconds)

    def delete_job(self, namespace: str, name: str, *, propagation_policy: str = "Background") -> None:
        if propagation_policy not in ("Background", "Foreground", "Orphan"):
            raise ClusterError(f"Unsupported propagationPolicy {propagation_policy!r}", 400)

        def change(state, rv, view):
            uid = self._jobs.delete(state, rv, namespace, name, propagation_policy)
            if propagation_policy != "Orphan":
                # The garbage collector: objects the Job owned (its PodGroup) go with it.
                for kind in (KAI_PODGROUP, SERVICE, CONFIG_MAP):
                    for (owned_ns, owned), obj in self._custom.live(state, rv, kind).items():
                        owners = obj["metadata"].get("ownerReferences") or []
                        if owned_ns == namespace and any(owner.get("uid") == uid for owner in owners):
                            self._custom.delete(state, rv, kind, namespace, owned)
            return True

        self._mutate(change)

    def list_objects(self, kind: ObjectKind, *, label_selector: str = "", namespace: str | None = None,
                     limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        custom = _Custom(kind, kind.scope(namespace, listing=True))
        return self._list(custom, limit, continue_token, _selector(label_selector))

    def watch_objects(self, kind: ObjectKind, resource_version: str, *, label_selector: str = "",
                      namespace: str | None = None, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        custom = _Custom(kind, kind.scope(namespace, listing=True))
        return self._watch(custom, resource_version, timeout_seconds, _selector(label_selector))

    def get_object(self, kind: ObjectKind, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        namespace = kind.scope(namespace)
        with self._mutex:
            rv, state = self._current()
            return self._custom.get(state, rv, kind, namespace, name)

    def create_object(self, kind: ObjectKind, body: dict[str, Any], *,
                      namespace: str | None = None) -> dict[str, Any]:
        if namespace is None and kind.namespaced and isinstance(body, dict):
            namespace = (body.get("metadata") or {}).get("namespace")
        namespace = kind.scope(namespace)
        return self._mutate(lambda state, rv, view: self._scheduled(
            kind, state, rv, view, self._custom.create(state, rv, kind, namespace, body)))

    def patch_object(self, kind: ObjectKind, name: str, patch: dict[str, Any], *,
                     namespace: str | None = None) -> dict[str, Any]:
        namespace = kind.scope(namespace)
        patched = self._mutate(lambda state, rv, view: self._scheduled(
            kind, state, rv, view, self._custom.patch(state, rv, kind, namespace, name, patch)))
        return self.get_object(kind, name, namespace=namespace) if patched is False else patched

    def delete_object(self, kind: ObjectKind, name: str, *, namespace: str | None = None) -> None:
        namespace = kind.scope(namespace)
        self._mutate(lambda state, rv, view: self._scheduled(
            kind, state, rv, view, self._custom.delete(state, rv, kind, namespace, name)))

    def _scheduled(self, kind: ObjectKind, state: dict[str, Any], rv: int, view: View, result: Any) -> Any:
        """`result` of a change to a custom object, after the KAI scheduler's pass when the change may concern it
        (a PodGroup or Queue while its work waits), made in the same change, as KAI reacts within a second."""
        if result is not False and kind in (KAI_PODGROUP, KAI_QUEUE) and self._kai.due(state, rv // RV_PER_TICK):
            self._kai.run(state, rv, view)
        return result

    # ---- for the demo and for tests -------------------------------------------------------------------------

    def current_resource_version(self) -> str:
        with self._mutex:
            return str(self._current()[0])

    # ---- reading --------------------------------------------------------------------------------------------

    def _tick(self) -> int:
        return math.floor(self._clock() / self.tick_seconds)

    def _load_unlocked(self) -> dict[str, Any]:
        if self._file.reload_unlocked():
            self._views.clear()
            self._overlays.clear()
        return self._file.state

    def _current(self) -> tuple[int, dict[str, Any]]:
        # The clock is read before the lock is taken: a writer then either finished before we read the file, or
        # stamps its change later than the tick we saw, so no change can hide below a version we hand out.
        tick = self._tick()
        with self._file.locked():
            state = self._load_unlocked()
        if self._kai_checked != (self._file.generation, tick):
            # The KAI scheduler's pass for this tick, by whichever process reads first; the others then find it done.
            self._kai_checked = (self._file.generation, tick)
            if self._kai.due(state, tick):
                self._mutate(lambda state, rv, view: self._kai.run(state, rv, view))
                state = self._file.state
                self._kai_checked = (self._file.generation, tick)
            # And the kube-scheduler's retry of the pods that found no room when their Job was created.
            if self._jobs.retry_due(state):
                self._mutate(lambda state, rv, view: self._jobs.retry_unbound(state, rv, view))
                state = self._file.state
                self._kai_checked = (self._file.generation, tick)
        return max(tick * RV_PER_TICK, state["last_rv"]), state

    def _check_fresh(self, rv: int, now_rv: int, state: dict[str, Any]) -> None:
        horizon = (now_rv // RV_PER_TICK - math.ceil(RETENTION_SECONDS / self.tick_seconds)) * RV_PER_TICK
        if rv < state["compacted_rv"] or rv < horizon:
            raise Expired(f"too old resource version: {rv} ({max(horizon, state['compacted_rv'])})", 410)

    def _base(self, tick: int) -> Base:
        base = self._bases.get(tick)
        if base is not None:
            self._bases.move_to_end(tick)
            return base
        catalog = self._catalog
        nodes, node_objs = {}, {}
        for name in catalog.node_names:
            spec = catalog.nodes[name]
            trouble = trouble_at(catalog, name, tick)
            labels = dict(spec.labels)
            if spec.gpus:
                # Feature discovery relabels every tick, except on a node whose kubelet has gone silent.
                stamp = tick if trouble[0] != "ReadyUnknown" else trouble[1] - 12
                labels["nvidia.com/gfd.timestamp"] = str(int(stamp * self.tick_seconds))
            cordoned_at = trouble[1] * self.tick_seconds if trouble[0] == "Cordoned" else None
            obj = node_object(catalog, spec, tick, trouble, labels, cordoned_at, tick * RV_PER_TICK)
            node_objs[name] = obj
            nodes[name] = compact_dumps(obj)
        pods = dict(catalog.daemon_pods)
        work: list[tuple[str, str, int, int, int, bool]] = []
        memo_new: dict[tuple, str] = {}
        for slot in catalog.work_slots:
            period_index = (tick + slot.phase) // slot.period
            plan_key = (slot.key, period_index)
            if plan_key in catalog.plans:
                plan = catalog.plans[plan_key]
            else:
                plan = work_plan(catalog, slot, period_index)
                with catalog.lock:
                    if len(catalog.plans) > 100_000:
                        catalog.plans.clear()
                    catalog.plans[plan_key] = plan
            if plan is None or not plan.start <= tick < plan.gone:
                continue
            stage = ("Pending" if tick < plan.running else "Running" if tick < plan.end else plan.outcome)
            for member, node in enumerate(slot.nodes or ("",)):
                # The scheduler places nothing new on a node that is tainted at the time.
                if node and troubled(catalog, node, plan.start):
                    continue
                key = (slot.key, period_index, member, stage)
                text = self._memo_new.get(key) or self._memo_old.get(key)
                if text is None:
                    text = compact_dumps(workload_pod(catalog, slot, plan, member, stage))
                memo_new[key] = text
                pod_name = plan.name if slot.kind != "train" else f"{plan.name}-worker-{member}"
                pod_key = f"{slot.namespace}/{pod_name}"
                if pod_key in pods:
                    continue
                pods[pod_key] = text
                if node:
                    work.append((pod_key, node, slot.index, plan.start, slot.gpus, stage in ("Pending", "Running")))
        self._memo_old, self._memo_new = self._memo_new, memo_new
        base = Base(tick, nodes, node_objs, pods, work, sorted(pods))
        self._bases[tick] = base
        while len(self._bases) > 4:
            self._bases.popitem(last=False)
        return base

    def _overlay(self, rv: int, state: dict[str, Any]) -> Overlay:
        key = (self._file.generation, rv)
        overlay = self._overlays.get(key)
        if overlay is None:
            overlay = self._overlays[key] = overlay_at(state, rv)
            while len(self._overlays) > 16:
                self._overlays.popitem(last=False)
        return overlay

    def _view(self, rv: int, state: dict[str, Any]) -> View:
        key = (self._file.generation, rv)
        view = self._views.get(key)
        if view is not None:
            self._views.move_to_end(key)
            return view
        tick = rv // RV_PER_TICK
        base = self._base(tick)
        overlay = self._overlay(rv, state)
        nodes, node_objs = base.nodes, base.node_objs
        touched = set(overlay.labels) | set(overlay.cordon)
        if touched:
            nodes, node_objs = dict(nodes), dict(node_objs)
            catalog = self._catalog
            for name in touched:
                spec = catalog.nodes.get(name)
                if spec is None:
                    continue
                base_obj = base.node_objs[name]
                labels = dict(base_obj["metadata"]["labels"])
                for label, value in overlay.labels.get(name, {}).items():
                    if value is None:
                        labels.pop(label, None)
                    else:
                        labels[label] = value
                trouble = trouble_at(catalog, name, tick)
                cordoned_at = trouble[1] * self.tick_seconds if trouble[0] == "Cordoned" else None
                if name in overlay.cordon:
                    cordoned_at = overlay.cordon_rv[name] // RV_PER_TICK * self.tick_seconds \
                        if overlay.cordon[name] else None
                obj = node_object(catalog, spec, tick, trouble, labels, cordoned_at,
                                   max(tick * RV_PER_TICK, overlay.node_rv.get(name, 0)))
                node_objs[name] = obj
                nodes[name] = compact_dumps(obj)
        pods, work, pod_keys = base.pods, base.work, base.pod_keys
        jobs = [record for record in state["jobs"] if record["created_rv"] <= rv]
        if jobs:
            pods, work, pod_keys = self._jobs.with_jobs(base, jobs, rv, tick)
        view = View(rv, tick, nodes, pods, sorted(nodes), pod_keys, node_objs, work)
        self._views[key] = view
        while len(self._views) > 8:
            self._views.popitem(last=False)
        return view

    # ---- list and watch -------------------------------------------------------------------------------------

    def _list(self, kind: str | _Custom, limit: int, continue_token: str | None, selected=None) -> ListPage:
        if limit is not None and limit < 0:
            raise ClusterError("limit must be zero or positive", 400)
        with self._mutex:
            now_rv, state = self._current()
            if continue_token:
                rv, start = decode_continue(continue_token)
                self._check_fresh(rv, now_rv, state)
            else:
                rv, start = now_rv, ""
            view = self._view(rv, state)
            objects = self._objects(kind, view, state, selected)
            keys = view.node_keys if kind == "nodes" else view.pod_keys if kind == "pods" else sorted(objects)
            first = bisect.bisect_left(keys, start) if start else 0
            last = len(keys) if not limit else min(len(keys), first + limit)
            page = keys[first:last]
            texts = [objects[key] for key in page]
        items = bulk_loads("[" + ",".join(texts) + "]")
        token = encode_continue(rv, page[-1]) if last < len(keys) and page else None
        return ListPage(items=items, resource_version=str(rv), continue_token=token)

    def _watch(self, kind: str | _Custom, resource_version: str, timeout_seconds: int,
               selected=None) -> Iterator[WatchEvent]:
        # Validate before the first next() so a too-old version fails where the caller asked for it.
        with self._mutex:
            now_rv, state = self._current()
            initial = resource_version in ("", "0", None)
            if initial:
                start_rv = now_rv
            else:
                try:
                    start_rv = int(resource_version)
                except (TypeError, ValueError):
                    raise ClusterError(f"invalid resourceVersion {resource_version!r}", 400) from None
                self._check_fresh(start_rv, now_rv, state)
        return self._stream(kind, start_rv, initial, timeout_seconds, selected)

    def _stream(self, kind: str | _Custom, start_rv: int, initial: bool, timeout_seconds: int,
                selected=None) -> Iterator[WatchEvent]:
        if isinstance(kind, _Custom):
            api_kind, api_version = kind.kind.kind, kind.kind.api_version
        else:
            api_kind, api_version = {"nodes": "Node", "pods": "Pod", "jobs": "Job", "events": "Event"}[kind], "v1"
        deadline = self._clock() + max(0, timeout_seconds)
        poll = min(1.0, self.tick_seconds)
        # Bounded by count too, so an injected clock that never moves cannot make the stream endless.
        polls_left = int(max(0, timeout_seconds) / poll) + 2
        with self._mutex:
            _, state = self._current()
            previous = self._objects(kind, self._view(start_rv, state), state, selected)
        if initial:
            yield from self._stamped([("ADDED", previous[key]) for key in sorted(previous)], "0", start_rv, api_kind)
        seen = start_rv
        while polls_left > 0:
            polls_left -= 1
            with self._mutex:
                now_rv, state = self._current()
                if now_rv > seen:
                    self._check_fresh(seen, now_rv, state)
                    current = self._objects(kind, self._view(now_rv, state), state, selected)
                    events = self._stamped(self._diff(previous, current), str(seen), now_rv, api_kind)
                    previous, seen = current, now_rv
                else:
                    events = None
            if events is not None:
                if events:
                    yield from events
                else:
                    yield WatchEvent("BOOKMARK", {"kind": api_kind, "apiVersion": api_version,
                                                  "metadata": {"resourceVersion": str(now_rv)}})
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            next_tick = (self._tick() + 1) * self.tick_seconds - self._clock()
            self._sleep(max(0.0, min(poll, next_tick, remaining)))

    def _objects(self, kind: str | _Custom, view: View, state: dict[str, Any], selected=None) -> dict[str, str]:
        if isinstance(kind, _Custom):
            return self._custom.objects_at(state, view.rv, kind.kind, kind.namespace, selected or (lambda labels: True))
        if kind == "jobs":
            return self._jobs.objects_at(state, view.rv, selected or (lambda labels: True))
        if kind == "events":
            return {}
        return view.nodes if kind == "nodes" else view.pods

    @staticmethod
    def _stamped(changes: list[tuple[str, str]], before: str, after: int, api_kind: str) -> list[WatchEvent]:
        """Watch events whose resourceVersions are all safe places to resume from.

        A batch holds every difference between two versions, and there is no version in between to resume from:
        so each event but the last carries the version the batch started from (a resume replays the batch, and a
        sync applies it again harmlessly) and only the last carries the version the batch reached."""
        events = []
        objects = bulk_loads("[" + ",".join(text for _, text in changes) + "]")
        for position, ((kind, _), obj) in enumerate(zip(changes, objects, strict=True), start=1):
            obj = {"kind": api_kind, "apiVersion": "v1", **obj}
            obj["metadata"]["resourceVersion"] = str(after) if position == len(changes) else before
            events.append(WatchEvent(kind, obj))
        return events

    @staticmethod
    def _diff(previous: dict[str, str], current: dict[str, str]) -> list[tuple[str, str]]:
        changes = []
        for key, text in current.items():
            old = previous.get(key)
            if old is None:
                changes.append((key, "ADDED", text))
            elif old is not text and old != text:
                changes.append((key, "MODIFIED", text))
        changes += [(key, "DELETED", text) for key, text in previous.items() if key not in current]
        changes.sort()
        return [(kind, text) for _, kind, text in changes]

    # ---- writing --------------------------------------------------------------------------------------------

    def _mutate(self, change: Callable[[dict, int, View], Any]) -> Any:
        with self._mutex, self._file.locked(exclusive=True):
            tick = self._tick()
            loaded = self._load_unlocked()
            state = copy.deepcopy(loaded)
            before = max(tick * RV_PER_TICK, state["last_rv"])
            rv = max(tick * RV_PER_TICK + 1, state["last_rv"] + 1)
            result = change(state, rv, self._view(before, loaded))
            if result is False:
                return result
            state["last_rv"] = rv
            compact(state, tick, self.tick_seconds)
            forget_versions(state, (tick - math.ceil(RETENTION_SECONDS / self.tick_seconds)) * RV_PER_TICK)
            self._file.replace_unlocked(state)
            self._load_unlocked()
            return result

    def _change_node(self, name: str, change) -> dict[str, Any]:
        if name not in self._catalog.nodes:
            raise NotFound(f'nodes "{name}" not found', 404)
        self._mutate(change)
        with self._mutex:
            rv, state = self._current()
            return json.loads(self._view(rv, state).nodes[name])
