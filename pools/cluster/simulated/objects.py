"""Custom objects in the simulated cluster (KAI Queues, Kueue ClusterQueues...): kept in the state file as every
version each object went through, so that lists and watches see them at any resourceVersion as they do the rest.

Only the simulated KAI scheduler (kai.py) acts on some of them: it writes the status of PodGroups and Queues, as
new versions like any other change. Nothing removes a finalizer, so an object with finalizers stays marked for
deletion, as it would on a cluster whose controller is not running.
"""

import copy
import math
import re
from collections.abc import Callable
from typing import Any

from ..interface import ClusterError, Conflict, NotFound, ObjectKind
from .randomness import compact_dumps, stable_uid, timestamp

_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
# Set by the server alone: a patch cannot change them.
_SERVER_OWNED = ("name", "namespace", "uid", "creationTimestamp", "resourceVersion", "generation",
                 "deletionTimestamp", "deletionGracePeriodSeconds")


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: dicts merge recursively, None removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _resource(kind: ObjectKind) -> str:
    return f"{kind.group}/{kind.version}/{kind.plural}"


def _record_key(kind: ObjectKind, namespace: str | None, name: str) -> str:
    return f"{_resource(kind)}|{namespace or ''}/{name}"


def _at(record: dict[str, Any], rv: int) -> dict[str, Any] | None:
    """The object as it was at `rv` (None: not there)."""
    current = None
    for version_rv, obj in record["versions"]:
        if version_rv > rv:
            break
        current = obj
    return current


def forget_versions(state: dict[str, Any], horizon: int) -> None:
    """Drops versions no one may ask for any more: those superseded before `horizon`, and objects deleted by then."""
    objects = state.get("objects") or {}
    for key in list(objects):
        versions = objects[key]["versions"]
        keep_from = 0
        while keep_from + 1 < len(versions) and versions[keep_from + 1][0] <= horizon:
            keep_from += 1
        versions[:keep_from] = []
        if len(versions) == 1 and versions[0][1] is None and versions[0][0] <= horizon:
            del objects[key]


class CustomObjects:
    """Creates, patches and deletes the custom objects of one cluster's state (changes made under
    SimulatedCluster._mutate), and reads them back at a resourceVersion."""

    def __init__(self, seed: int, clock: Callable[[], float]):
        self.seed, self._clock = seed, clock

    def create(self, state: dict[str, Any], rv: int, kind: ObjectKind, namespace: str | None,
               body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ClusterError(f"a {kind.kind} must be a JSON object", 400)
        obj = copy.deepcopy(body)
        obj.setdefault("apiVersion", kind.api_version)
        obj.setdefault("kind", kind.kind)
        if (obj["apiVersion"], obj["kind"]) != (kind.api_version, kind.kind):
            raise ClusterError(f"expected {kind.api_version} {kind.kind}, got {obj['apiVersion']} {obj['kind']}", 400)
        metadata = obj.get("metadata")
        if not isinstance(metadata, dict):
            raise ClusterError(f"{kind.plural}.{kind.group} is invalid: metadata.name: Required value", 422)
        name = metadata.get("name")
        if not isinstance(name, str) or len(name) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(name):
            raise ClusterError(f'{kind.kind}.{kind.group} {name!r} is invalid: metadata.name: Invalid value: must be '
                               "a lowercase RFC 1123 subdomain", 422)
        if namespace is not None and not _DNS_LABEL_RE.fullmatch(namespace):
            raise ClusterError(f"invalid namespace {namespace!r}", 422)
        if metadata.get("namespace", namespace) != namespace:
            raise ClusterError("the namespace of the provided object does not match the namespace sent on the "
                               "request", 400)
        key = _record_key(kind, namespace, name)
        objects = state.setdefault("objects", {})
        record = objects.get(key)
        if record is not None and _at(record, rv) is not None:
            raise Conflict(f'{kind.plural}.{kind.group} "{name}" already exists', 409)
        for server_owned in _SERVER_OWNED:
            metadata.pop(server_owned, None)
        metadata["name"] = name
        if namespace is not None:
            metadata["namespace"] = namespace
        metadata.update(uid=stable_uid(self.seed, "object", key, rv), generation=1, resourceVersion=str(rv),
                        creationTimestamp=timestamp(math.floor(self._clock())))
        if record is None:
            record = objects[key] = {"versions": []}
        record["versions"].append([rv, obj])
        return obj

    def patch(self, state: dict[str, Any], rv: int, kind: ObjectKind, namespace: str | None, name: str,
              patch: dict[str, Any]) -> dict[str, Any] | bool:
        """The object after the patch, or False when the patch changes nothing (no new version is made then)."""
        if not isinstance(patch, dict):
            raise ClusterError("a merge patch must be a JSON object", 400)
        record, current = self._live(state, rv, kind, namespace, name)
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted is not None and str(wanted) != current["metadata"]["resourceVersion"]:
            raise Conflict(f'Operation cannot be fulfilled on {kind.plural}.{kind.group} "{name}": the object has '
                           "been modified; please apply your changes to the latest version and try again", 409)
        updated = merge_patch(copy.deepcopy(current), patch)  # `current` is history: never written
        metadata = updated.setdefault("metadata", {})
        for key in _SERVER_OWNED:
            if key in current["metadata"]:
                metadata[key] = current["metadata"][key]
            else:
                metadata.pop(key, None)
        updated["apiVersion"], updated["kind"] = current["apiVersion"], current["kind"]
        if updated == current:
            return False
        if any(current.get(key) != updated.get(key) for key in {*current, *updated} - {"metadata", "status"}):
            metadata["generation"] = int(metadata.get("generation") or 1) + 1
        metadata["resourceVersion"] = str(rv)
        released = metadata.get("deletionTimestamp") and not metadata.get("finalizers")
        record["versions"].append([rv, None if released else updated])
        return updated

    def delete(self, state: dict[str, Any], rv: int, kind: ObjectKind, namespace: str | None, name: str) -> bool:
        record, current = self._live(state, rv, kind, namespace, name)
        if not current["metadata"].get("finalizers"):
            record["versions"].append([rv, None])
        elif not current["metadata"].get("deletionTimestamp"):
            marked = copy.deepcopy(current)
            marked["metadata"].update(deletionTimestamp=timestamp(math.floor(self._clock())),
                                      deletionGracePeriodSeconds=0, resourceVersion=str(rv))
            record["versions"].append([rv, marked])
        else:
            return False  # already marked: nothing changes
        return True

    def get(self, state: dict[str, Any], rv: int, kind: ObjectKind, namespace: str | None,
            name: str) -> dict[str, Any]:
        return copy.deepcopy(self._live(state, rv, kind, namespace, name)[1])

    def objects_at(self, state: dict[str, Any], rv: int, kind: ObjectKind, namespace: str | None,
                   selected: Callable[[dict], bool]) -> dict[str, str]:
        """The objects of `kind` (in `namespace`, or all) at `rv` that `selected` accepts, as compact JSON by
        namespace/name."""
        prefix = f"{_resource(kind)}|" + (f"{namespace}/" if namespace is not None else "")
        found = {}
        for key, record in (state.get("objects") or {}).items():
            if not key.startswith(prefix):
                continue
            obj = _at(record, rv)
            if obj is not None and selected(obj["metadata"].get("labels") or {}):
                found[key.split("|", 1)[1].lstrip("/")] = compact_dumps(obj)
        return found

    @staticmethod
    def live(state: dict[str, Any], rv: int, kind: ObjectKind) -> dict[tuple[str, str], dict[str, Any]]:
        """Every object of `kind` at `rv` by (namespace, or "" for a cluster-scoped kind, name): the stored
        versions themselves, which are history and must not be changed."""
        prefix = f"{_resource(kind)}|"
        found = {}
        for key, record in (state.get("objects") or {}).items():
            if key.startswith(prefix):
                obj = _at(record, rv)
                if obj is not None:
                    namespace, _, name = key[len(prefix):].partition("/")
                    found[(namespace, name)] = obj
        return found

    @staticmethod
    def _live(state: dict[str, Any], rv: int, kind: ObjectKind, namespace: str | None,
              name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        record = (state.get("objects") or {}).get(_record_key(kind, namespace, name))
        current = _at(record, rv) if record is not None else None
        if current is None:
            raise NotFound(f'{kind.plural}.{kind.group} "{name}" not found', 404)
        return record, current
