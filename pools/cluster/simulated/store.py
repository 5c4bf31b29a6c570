"""The state users change (node labels, cordons, Jobs, custom objects), kept in a small JSON file that every
process opening the cluster shares, and what is built from it: the overlay of user changes at a resourceVersion,
the views that lists and watches read, and continue tokens.

The file holds a snapshot and the operations since, each stamped with the resourceVersion it made, so the
overlay at any version still within the retention window can be rebuilt.
"""

import base64
import binascii
import contextlib
import fcntl
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..interface import ClusterError
from .fleet import RV_PER_TICK
from .randomness import compact_dumps, stable_hex

# Like an API server's etcd compaction window: older resourceVersions answer 410 Gone.
RETENTION_SECONDS = 15 * 60
# Deleted Jobs are remembered this long, because the GPUs they held shaped which simulated pods ran.
FORGET_DELETED_JOBS_SECONDS = 6 * 3600
MAX_OPS = 500


class StateFile:
    """The state users changed in one cluster: read under a shared lock, replaced atomically under an exclusive one."""

    def __init__(self, state_dir: Path, name: str):
        state_dir = Path(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60] + "-" + stable_hex(8, name)
        self.path = state_dir / f"{stem}.json"
        self.lock_path = state_dir / f"{stem}.lock"
        self.state: dict[str, Any] = empty_state()
        self.generation = 0  # how many times the file was found changed
        self._bytes: bytes | None = None

    @contextlib.contextmanager
    def locked(self, *, exclusive: bool = False):
        # Opened per use: a descriptor inherited across fork would share one lock between parent and child.
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def reload_unlocked(self) -> bool:
        """Reads the file again, under a lock the caller holds; True when it changed since the last read."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            raw = b""
        if raw == self._bytes:
            return False
        try:
            self.state = json.loads(raw) if raw else empty_state()
        except json.JSONDecodeError:
            raise ClusterError(f"simulated cluster state {self.path} is corrupt", 500) from None
        self._bytes = raw
        self.generation += 1
        return True

    def replace_unlocked(self, state: dict[str, Any]) -> None:
        """Makes `state` the file's content, under the exclusive lock the caller holds."""
        raw = compact_dumps(state).encode()
        fd, temp = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
            os.replace(temp, self.path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
            raise


def empty_state() -> dict[str, Any]:
    return {"format": 1, "last_rv": 0, "compacted_rv": 0, "ops": [], "jobs": [], "objects": {},
            "snapshot": {"labels": {}, "cordon": {}, "node_rv": {}, "cordon_rv": {}}}


@dataclass
class Overlay:
    labels: dict[str, dict[str, str | None]]
    cordon: dict[str, bool]  # a user's cordon or uncordon wins over the simulation's for good
    node_rv: dict[str, int]
    cordon_rv: dict[str, int]


def overlay_at(state: dict[str, Any], rv: int) -> Overlay:
    snapshot = state["snapshot"]
    labels = {name: dict(patch) for name, patch in snapshot["labels"].items()}
    cordon = dict(snapshot["cordon"])
    node_rv = dict(snapshot["node_rv"])
    cordon_rv = dict(snapshot.get("cordon_rv", {}))
    for op_rv, node, kind, value in state["ops"]:
        if op_rv > rv:
            break
        if kind == "labels":
            labels.setdefault(node, {}).update(value)
        else:
            cordon[node] = value
            cordon_rv[node] = op_rv
        node_rv[node] = op_rv
    return Overlay(labels, cordon, node_rv, cordon_rv)


def compact(state: dict[str, Any], tick: int, tick_seconds: float) -> None:
    """Folds operations older than the retention window (or beyond MAX_OPS) into the snapshot, and forgets Jobs
    deleted long ago."""
    horizon = (tick - math.ceil(RETENTION_SECONDS / tick_seconds)) * RV_PER_TICK
    ops = state["ops"]
    keep_from = 0
    while keep_from < len(ops) and (ops[keep_from][0] < horizon or len(ops) - keep_from > MAX_OPS):
        keep_from += 1
    if keep_from:
        folded = {**state, "ops": ops[:keep_from]}
        overlay = overlay_at(folded, ops[keep_from - 1][0])
        state["snapshot"] = {"labels": overlay.labels, "cordon": overlay.cordon, "node_rv": overlay.node_rv,
                             "cordon_rv": overlay.cordon_rv}
        state["compacted_rv"] = ops[keep_from - 1][0]
        state["ops"] = ops[keep_from:]
    forget = (tick - math.ceil(FORGET_DELETED_JOBS_SECONDS / tick_seconds)) * RV_PER_TICK
    state["jobs"] = [job for job in state["jobs"] if job["deleted_rv"] is None or job["deleted_rv"] >= forget]


# ---- what lists and watches read ----------------------------------------------------------------------------


@dataclass
class View:
    """What lists and watches see at one resourceVersion."""

    rv: int
    tick: int
    nodes: dict[str, str]
    pods: dict[str, str]
    node_keys: list[str]
    pod_keys: list[str]
    node_objs: dict[str, dict]
    # (pod key, node, slot index, start tick, gpus, holds GPUs now) for pods the simulation runs
    work: list[tuple[str, str, int, int, int, bool]]


@dataclass
class Base:
    """The simulation's own nodes and pods at one tick, before user changes and Jobs."""

    tick: int
    nodes: dict[str, str]
    node_objs: dict[str, dict]
    pods: dict[str, str]
    work: list[tuple[str, str, int, int, int, bool]]
    pod_keys: list[str]


def encode_continue(rv: int, start: str) -> str:
    raw = compact_dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(raw["rv"]), str(raw["start"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ClusterError("continue key is not valid: incorrect encoded start resourceVersion", 400) from None

