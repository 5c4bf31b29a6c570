"""A simulated GPU cluster for the embedded demo, behind the same interface as the real client.

The demo runs the web server, a Celery worker, Celery beat and CLI commands as separate processes, and all of
them must see one cluster. So what the cluster holds at a moment is a pure function of (seed, tick): any process
computes the same nodes and pods for the same tick without talking to the others. Only what users change (node
labels, cordons, Jobs) is stored, in a small JSON file read under a shared lock and replaced atomically under an
exclusive one.

A resourceVersion is `tick * RV_PER_TICK + n`, where n counts user changes within the tick; the state at any
resourceVersion can be rebuilt, which gives consistent list pages and exact watch diffs for free.
"""

import base64
import binascii
import bisect
import contextlib
import copy
import fcntl
import functools
import gc
import hashlib
import json
import math
import os
import random
import re
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .interface import DEFAULT_PAGE_SIZE, ClusterError, Conflict, Expired, ListPage, NotFound, WatchEvent

RV_PER_TICK = 1_000_000
POOL_LABEL = "runwhere.ai/pool"
# Like an API server's etcd compaction window: older resourceVersions answer 410 Gone.
RETENTION_SECONDS = 15 * 60
# Deleted Jobs are remembered this long, because the GPUs they held shaped which simulated pods ran.
FORGET_DELETED_JOBS_SECONDS = 6 * 3600
MAX_OPS = 500
DURATION_ANNOTATION = "sim.runwhere.ai/duration-seconds"
OUTCOME_ANNOTATION = "sim.runwhere.ai/outcome"
DS_TOOLKIT = "nvidia-container-toolkit-daemonset"
DS_DCGM = "nvidia-dcgm-exporter"

_LABEL_KEY_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet


# ---- deterministic randomness -------------------------------------------------------------------------------


def _hash(*parts: Any) -> int:
    text = "\x1f".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big")


def _rng(*parts: Any) -> random.Random:
    return random.Random(_hash(*parts))


def _uid(*parts: Any) -> str:
    return str(uuid.UUID(int=(_hash(*parts, "hi") << 64) | _hash(*parts, "lo"), version=4))


def _suffix(length: int, *parts: Any) -> str:
    value, out = _hash(*parts), []
    for _ in range(length):
        value, index = divmod(value, len(_SUFFIX_ALPHABET))
        out.append(_SUFFIX_ALPHABET[index])
    return "".join(out)


def _hex(length: int, *parts: Any) -> str:
    return f"{_hash(*parts):016x}"[:length]


@functools.lru_cache(maxsize=16384)
def _ts(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _loads(text: str) -> Any:
    # Decoding a full list makes some 400k dicts, lists and strings, enough to set off full collections that walk
    # every live object of the process; decoded JSON holds no reference cycles, so pausing the collector is safe.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return json.loads(text)
    finally:
        if enabled:
            gc.enable()


# ---- the fleet ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Hardware:
    kind: str
    product: str | None
    gpus: int
    family: str
    gpu_memory: int
    compute: tuple[int, int]
    machine: str
    instance_type: str
    arch: str
    cpu: int
    memory_gib: int
    disk_gib: int
    driver: tuple[int, int, int]
    cuda: tuple[int, int]
    kernel: str
    os_image: str
    mig_capable: bool


_HARDWARE = {
    "gb200": _Hardware("gb200", "NVIDIA-GB200", 4, "blackwell", 189471, (10, 0), "NVIDIA-GB200-NVL72",
                       "gb200-nvl72-tray", "arm64", 144, 884, 3576, (570, 124, 6), (12, 8),
                       "6.8.0-1021-nvidia-64k", "Ubuntu 24.04.1 LTS", True),
    "h100": _Hardware("h100", "NVIDIA-H100-80GB-HBM3", 8, "hopper", 81559, (9, 0), "NVIDIA-DGX-H100", "dgx-h100",
                      "amd64", 224, 2015, 30720, (550, 127, 8), (12, 4), "5.15.0-1063-nvidia",
                      "Ubuntu 22.04.5 LTS", True),
    "a100": _Hardware("a100", "NVIDIA-A100-SXM4-80GB", 8, "ampere", 81920, (8, 0), "NVIDIA-DGX-A100", "dgx-a100",
                      "amd64", 256, 2015, 15360, (535, 216, 3), (12, 2), "5.15.0-1063-nvidia",
                      "Ubuntu 22.04.5 LTS", True),
    "l40s": _Hardware("l40s", "NVIDIA-L40S", 4, "ada-lovelace", 46068, (8, 9), "PowerEdge-R760xa", "ovx-l40s",
                      "amd64", 128, 1007, 7680, (550, 127, 8), (12, 4), "5.15.0-1063-nvidia",
                      "Ubuntu 22.04.5 LTS", False),
    "jetson": _Hardware("jetson", "NVIDIA-Jetson-AGX-Orin", 1, "ampere", 62841, (8, 7),
                        "NVIDIA-Jetson-AGX-Orin-Developer-Kit", "jetson-agx-orin-64gb", "arm64", 12, 61, 938,
                        (540, 4, 0), (12, 6), "5.15.148-tegra", "Ubuntu 22.04.5 LTS", False),
    "cpu": _Hardware("cpu", None, 0, "", 0, (0, 0), "PowerEdge-R760", "r760-cpu", "amd64", 96, 754, 3576,
                     (0, 0, 0), (0, 0), "5.15.0-131-generic", "Ubuntu 22.04.5 LTS", False),
}

# (kind, node name pattern, [(pool label or None, count)]): 250 nodes, some GPU nodes left to the default pool.
_FLEET = [
    ("gb200", "gb200-r{rack:02d}-t{tray:02d}", [("training", 54)]),
    ("h100", "dgx-h100-{n:03d}", [("training", 48), ("dev", 6), (None, 10)]),
    ("a100", "dgx-a100-{n:03d}", [("inference", 32), (None, 8)]),
    ("l40s", "ovx-l40s-{n:03d}", [("simulation", 28), ("inference", 16), (None, 4)]),
    ("jetson", "jetson-orin-{n:02d}", [("dev", 8), (None, 4)]),
    ("cpu", "cpu-{n:03d}", [(None, 32)]),
]
_GB200_TRAYS_PER_RACK = 18
_ZONES = ("sjc-dc1-a", "sjc-dc1-b", "sjc-dc1-c")
A100_TAINT = {"key": "nvidia.com/gpu.product", "value": "NVIDIA-A100", "effect": "NoSchedule"}

# Node troubles: each state has a few "slots"; a slot holds one node at a time, for an epoch of several ticks.
TROUBLES = ("DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable", "Cordoned", "ReadyUnknown",
            "ReadyFalse")
_TROUBLE_SLOTS = {"Cordoned": 3}
_DEFAULT_TROUBLE_SLOTS = 2


@dataclass
class _NodeSpec:
    name: str
    index: int
    hw: _Hardware
    pool: str | None
    zone: str
    rack: str
    ip: str
    created: int
    gpu_allocatable: int
    memory_ki: int
    disk_ki: int
    uid: str
    machine_id: str
    boot_id: str
    daemon_gap: str | None  # "toolkit", "dcgm" or "dcgm-disabled": a GPU operator pod that is not there
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    static_status: dict[str, Any] = field(default_factory=dict)
    pod_cidr: str = ""

    @property
    def gpus(self) -> int:
        return self.hw.gpus


@dataclass(frozen=True)
class _TroubleSlot:
    state: str
    candidates: tuple[str, ...]
    length: int
    phase: int
    salt: int


@dataclass(frozen=True)
class _WorkSlot:
    """A stream of pods that follow one another on the same GPUs of one node (or of a gang of nodes)."""

    key: str
    nodes: tuple[str, ...]  # empty: pods that wait unscheduled
    index: int  # slot number on each node, for GPU reservations by Jobs
    gpus: int
    kind: str
    namespace: str
    period: int
    phase: int
    activity: float


@dataclass(frozen=True)
class _Plan:
    start: int
    running: int
    end: int
    gone: int
    outcome: str
    name: str
    shape: int
    pull_error: bool
    restarts: int


@dataclass
class _Catalog:
    seed: int
    tick_seconds: float
    nodes: dict[str, _NodeSpec]
    node_names: list[str]
    trouble_slots: list[_TroubleSlot]
    trouble_of: dict[str, int]
    work_slots: list[_WorkSlot]
    node_slots: dict[str, list[tuple[int, int]]]
    daemon_pods: dict[str, str]
    chosen: dict[tuple[int, int], str] = field(default_factory=dict)
    troubles: dict[tuple[str, int], tuple[str | None, int | None, str | None]] = field(default_factory=dict)
    plans: dict[tuple[str, int], _Plan | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_CATALOGS: dict[tuple[int, float], _Catalog] = {}
_CATALOGS_LOCK = threading.Lock()


def _catalog(seed: int, tick_seconds: float) -> _Catalog:
    # Shared by every instance in the process: the fleet is a pure function of the seed.
    key = (seed, tick_seconds)
    with _CATALOGS_LOCK:
        if key not in _CATALOGS:
            _CATALOGS[key] = _build_catalog(seed, tick_seconds)
        return _CATALOGS[key]


def _build_catalog(seed: int, tick_seconds: float) -> _Catalog:
    rng = _rng(seed, "fleet")
    nodes: dict[str, _NodeSpec] = {}
    born = 1709251200 + rng.randrange(0, 90 * 86400)  # the cluster went up in spring 2024
    index = 0
    for kind, pattern, groups in _FLEET:
        hw = _HARDWARE[kind]
        n = 0
        for pool, count in groups:
            for _ in range(count):
                n += 1
                rack, tray = divmod(n - 1, _GB200_TRAYS_PER_RACK)
                name = pattern.format(n=n, rack=rack + 1, tray=tray + 1)
                zone = _ZONES[rack % 3] if kind == "gb200" else _ZONES[(n - 1) % 3]
                rack_name = f"gb200-r{rack + 1:02d}" if kind == "gb200" else f"{kind}-rack{(n - 1) // 8 + 1:02d}"
                node_rng = _rng(seed, "node", name)
                nodes[name] = _NodeSpec(
                    name=name, index=index, hw=hw, pool=pool, zone=zone, rack=rack_name,
                    ip=f"10.40.{index // 200}.{index % 200 + 10}",
                    created=born + index * 37 + node_rng.randrange(0, 3600),
                    gpu_allocatable=hw.gpus,
                    memory_ki=hw.memory_gib * 1048576 - node_rng.randrange(100_000, 900_000),
                    disk_ki=hw.disk_gib * 1048576 - node_rng.randrange(1_000_000, 9_000_000),
                    uid=_uid(seed, "node", name), machine_id=_hex(32, seed, "machine", name),
                    boot_id=_uid(seed, "boot", name), daemon_gap=None, pod_cidr=f"10.244.{index}.0/24",
                )
                index += 1
    names = sorted(nodes)
    gpu_names = [name for name in names if nodes[name].gpus]

    # A couple of nodes with a GPU the device plugin reports unhealthy; kept off gangs so their pods still fit.
    loose = [name for name in gpu_names if nodes[name].hw.kind in ("a100", "l40s", "h100")
             and nodes[name].pool != "training"]
    for name in rng.sample(loose, 3):
        nodes[name].gpu_allocatable -= 1
    # A few GPU nodes lack an operator pod, and one has DCGM exporter switched off on purpose.
    gaps = rng.sample([name for name in gpu_names if nodes[name].gpu_allocatable == nodes[name].gpus], 5)
    for name, gap in zip(gaps, ("toolkit", "toolkit", "dcgm", "dcgm", "dcgm-disabled"), strict=True):
        nodes[name].daemon_gap = gap

    for spec in nodes.values():
        spec.labels = _node_labels(spec, seed)
        spec.static_status = _node_static_status(spec, seed)
        spec.annotations = {
            "csi.volume.kubernetes.io/nodeid": _dumps({"csi.tigera.io": spec.name}),
            "node.alpha.kubernetes.io/ttl": "0",
            "projectcalico.org/IPv4Address": f"{spec.ip}/16",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            **({"nvidia.com/gpu-driver-upgrade-enabled": "true"} if spec.gpus else {}),
        }

    trouble_slots, trouble_of = _plan_troubles(seed, names, nodes)
    work_slots, node_slots = _plan_work(seed, nodes)
    catalog = _Catalog(seed, tick_seconds, nodes, names, trouble_slots, trouble_of, work_slots, node_slots, {})
    catalog.daemon_pods = _daemon_pods(catalog)
    return catalog


def _plan_troubles(seed: int, names: list[str], nodes: dict[str, _NodeSpec]):
    rng = _rng(seed, "troubles")
    # Nodes already showing a missing operator pod keep that status readable.
    pool = [name for name in names if nodes[name].daemon_gap is None]
    rng.shuffle(pool)
    specs = [(state, k) for state in TROUBLES for k in range(_TROUBLE_SLOTS.get(state, _DEFAULT_TROUBLE_SLOTS))]
    # Disjoint candidate sets, so one node never carries two simulated troubles at once.
    per_slot = len(pool) // len(specs)
    slots, owner = [], {}
    for i, (state, k) in enumerate(specs):
        candidates = tuple(sorted(pool[i * per_slot:(i + 1) * per_slot]))
        length = rng.randint(8, 24)
        slots.append(_TroubleSlot(state, candidates, length, rng.randrange(length), _hash(seed, state, k)))
        for name in candidates:
            owner[name] = i
    return slots, owner


_PARTITIONS = {
    8: ([8], [8], [4, 4], [4, 2, 2], [2, 2, 2, 2], [4, 2, 1, 1], [1, 1, 2, 4]),
    7: ([4, 2, 1], [2, 2, 2, 1], [4, 3]),
    4: ([4], [2, 2], [2, 1, 1], [1, 1, 1, 1]),
    3: ([2, 1], [1, 1, 1]),
    1: ([1],),
}
_TEAMS_TRAINING = ("llm-research", "robotics-training", "foundation-models", "perception")
_DEV_USERS = ("alice", "bogdan", "chen", "dmitri", "esra", "farah", "gaurav", "hana")


def _plan_work(seed: int, nodes: dict[str, _NodeSpec]):
    slots: list[_WorkSlot] = []
    node_slots: dict[str, list[tuple[int, int]]] = {name: [] for name in nodes}

    def add(key, members, index, gpus, kind, namespace, period_range, activity):
        rng = _rng(seed, "slot", key)
        period = rng.randint(*period_range)
        slots.append(_WorkSlot(key, tuple(members), index, gpus, kind, namespace, period,
                               rng.randrange(period), activity))
        for member in members:
            node_slots[member].append((index, gpus))

    # Multi-node training: GB200 trays in gangs of 4 (16 GPUs) and most H100 training nodes in gangs of 2-4.
    by_kind: dict[str, list[_NodeSpec]] = {}
    for spec in sorted(nodes.values(), key=lambda s: s.index):
        by_kind.setdefault(spec.hw.kind, []).append(spec)
    rng = _rng(seed, "gangs")
    gb200 = by_kind["gb200"]
    for start in range(0, len(gb200), 4):
        members = [s.name for s in gb200[start:start + 4]]
        add(f"gang-{members[0]}", members, 0, 4, "train", rng.choice(_TEAMS_TRAINING), (20, 120), 0.88)
    h100_training = [s for s in by_kind["h100"] if s.pool == "training"]
    position = 0
    while position < len(h100_training):
        size = rng.choice((4, 4, 2, 2, 1))
        members = h100_training[position:position + size]
        position += size
        if len(members) == 1:
            _single_node_slots(seed, members[0], add)
        else:
            names = [s.name for s in members]
            add(f"gang-{names[0]}", names, 0, 8, "train", rng.choice(_TEAMS_TRAINING), (20, 120), 0.85)
    for spec in sorted(nodes.values(), key=lambda s: s.index):
        if spec.hw.kind == "gb200" or (spec.hw.kind == "h100" and spec.pool == "training"):
            continue
        _single_node_slots(seed, spec, add)
    for k in range(6):
        add(f"queue-{k}", [], 0, 8, "queued", rng.choice(_TEAMS_TRAINING), (5, 25), 0.55)
    return slots, node_slots


def _single_node_slots(seed: int, spec: _NodeSpec, add) -> None:
    rng = _rng(seed, "partition", spec.name)
    if not spec.gpus:
        for index in range(2):
            add(f"{spec.name}/{index}", [spec.name], index, 0, "etl", "data-pipelines", (6, 30), 0.7)
        return
    partition = rng.choice(_PARTITIONS[spec.gpu_allocatable])
    for index, gpus in enumerate(partition):
        key = f"{spec.name}/{index}"
        kind = spec.hw.kind
        if kind == "jetson":
            add(key, [spec.name], index, gpus, "edge", "edge-validation", (10, 50), 0.7)
        elif spec.pool == "inference" and index == 0:
            add(key, [spec.name], index, gpus, "serve", "inference-prod", (300, 3000), 0.97)
        elif spec.pool == "inference":
            add(key, [spec.name], index, gpus, "eval", "inference-eval", (10, 40), 0.6)
        elif spec.pool == "simulation" or kind == "l40s":
            add(key, [spec.name], index, gpus, "sim", "isaac-sim", (6, 30), 0.72)
        elif spec.pool == "dev":
            user = _DEV_USERS[_hash(seed, key) % len(_DEV_USERS)]
            add(key, [spec.name], index, gpus, "notebook", f"dev-{user}", (30, 200), 0.6)
        else:
            add(key, [spec.name], index, gpus, "finetune", rng.choice(_TEAMS_TRAINING), (10, 60), 0.75)


def _node_labels(spec: _NodeSpec, seed: int) -> dict[str, str]:
    hw = spec.hw
    labels = {
        "beta.kubernetes.io/arch": hw.arch,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": hw.arch,
        "kubernetes.io/hostname": spec.name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": hw.instance_type,
        "topology.kubernetes.io/region": "sjc-dc1",
        "topology.kubernetes.io/zone": spec.zone,
        "topology.kubernetes.io/rack": spec.rack,
        "topology.kubernetes.io/spine": f"spine-{spec.index // 32 + 1}",
    }
    if spec.pool:
        labels[POOL_LABEL] = spec.pool
    if not hw.gpus:
        labels["node-role.kubernetes.io/cpu-worker"] = ""
        return labels
    major, minor, rev = hw.driver
    labels.update({
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/cuda.driver-version.full": f"{major}.{minor}.{rev:02d}",
        "nvidia.com/cuda.driver-version.major": str(major),
        "nvidia.com/cuda.driver-version.minor": str(minor),
        "nvidia.com/cuda.driver-version.revision": f"{rev:02d}",
        "nvidia.com/cuda.driver.major": str(major),
        "nvidia.com/cuda.driver.minor": str(minor),
        "nvidia.com/cuda.driver.rev": f"{rev:02d}",
        "nvidia.com/cuda.runtime-version.full": f"{hw.cuda[0]}.{hw.cuda[1]}",
        "nvidia.com/cuda.runtime-version.major": str(hw.cuda[0]),
        "nvidia.com/cuda.runtime-version.minor": str(hw.cuda[1]),
        "nvidia.com/cuda.runtime.major": str(hw.cuda[0]),
        "nvidia.com/cuda.runtime.minor": str(hw.cuda[1]),
        "nvidia.com/gfd.timestamp": "0",
        "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
        "nvidia.com/gpu.compute.major": str(hw.compute[0]),
        "nvidia.com/gpu.compute.minor": str(hw.compute[1]),
        "nvidia.com/gpu.count": str(hw.gpus),
        "nvidia.com/gpu.deploy.container-toolkit": "true",
        "nvidia.com/gpu.deploy.dcgm": "true",
        "nvidia.com/gpu.deploy.dcgm-exporter": "false" if spec.daemon_gap == "dcgm-disabled" else "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.driver": "pre-installed",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.deploy.node-status-exporter": "true",
        "nvidia.com/gpu.deploy.operator-validator": "true",
        "nvidia.com/gpu.family": hw.family,
        "nvidia.com/gpu.machine": hw.machine,
        "nvidia.com/gpu.memory": str(hw.gpu_memory),
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": hw.product or "",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/mig.capable": "true" if hw.mig_capable else "false",
        "nvidia.com/mps.capable": "false",
    })
    if hw.mig_capable:
        labels["nvidia.com/mig.config"] = "all-disabled"
        labels["nvidia.com/mig.strategy"] = "single"
    if hw.kind == "gb200":
        labels["nvidia.com/gpu.clique"] = f"{_uid(seed, 'nvl', spec.rack)}.{spec.rack[-2:]}"
    return labels


def _node_static_status(spec: _NodeSpec, seed: int) -> dict[str, Any]:
    hw = spec.hw
    reserved_cpu_m = 500 if hw.cpu > 16 else 250
    reserved_memory_ki = (2 * 1048576 if hw.memory_gib > 100 else 524288) + 102400
    capacity = {
        "cpu": str(hw.cpu),
        "ephemeral-storage": f"{spec.disk_ki}Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{spec.memory_ki}Ki",
        "pods": "250" if hw.gpus >= 4 else "110",
    }
    allocatable = {
        "cpu": f"{hw.cpu * 1000 - reserved_cpu_m}m",
        "ephemeral-storage": str(int(spec.disk_ki * 1024 * 0.9)),
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{spec.memory_ki - reserved_memory_ki}Ki",
        "pods": capacity["pods"],
    }
    if hw.gpus:
        capacity["nvidia.com/gpu"] = str(hw.gpus)
        allocatable["nvidia.com/gpu"] = str(spec.gpu_allocatable)
    return {
        "addresses": [{"address": spec.ip, "type": "InternalIP"}, {"address": spec.name, "type": "Hostname"}],
        "allocatable": allocatable,
        "capacity": capacity,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": hw.arch,
            "bootID": spec.boot_id,
            "containerRuntimeVersion": "containerd://1.7.24",
            "kernelVersion": hw.kernel,
            "kubeProxyVersion": "v1.31.4",
            "kubeletVersion": "v1.31.4",
            "machineID": spec.machine_id,
            "operatingSystem": "linux",
            "osImage": hw.os_image,
            "systemUUID": _uid(seed, "system", spec.name).upper(),
        },
    }


# ---- daemonset pods -----------------------------------------------------------------------------------------

_KUBE_DAEMONSETS = (
    ("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.31.4", "system-node-critical"),
    ("calico-system", "calico-node", "docker.io/calico/node:v3.29.1", "system-node-critical"),
)
_GPU_DAEMONSETS = (
    (DS_TOOLKIT, "nvcr.io/nvidia/k8s/container-toolkit:v1.17.3-ubuntu20.04"),
    ("nvidia-device-plugin-daemonset", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    ("gpu-feature-discovery", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0"),
    (DS_DCGM, "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"),
    ("nvidia-operator-validator", "nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.1"),
)


def _daemon_pods(catalog: _Catalog) -> dict[str, str]:
    pods: dict[str, str] = {}
    for spec in catalog.nodes.values():
        sets = [(ns, ds, image, priority) for ns, ds, image, priority in _KUBE_DAEMONSETS]
        if spec.gpus:
            for ds, image in _GPU_DAEMONSETS:
                if ds == DS_TOOLKIT and spec.daemon_gap == "toolkit":
                    continue
                if ds == DS_DCGM and spec.daemon_gap in ("dcgm", "dcgm-disabled"):
                    continue
                sets.append(("gpu-operator", ds, image, "system-node-critical"))
        for namespace, ds, image, priority in sets:
            pod = _daemon_pod(catalog, spec, namespace, ds, image, priority)
            pods[f"{namespace}/{pod['metadata']['name']}"] = _dumps(pod)
    return pods


def _daemon_pod(catalog: _Catalog, spec: _NodeSpec, namespace: str, ds: str, image: str, priority: str) -> dict:
    seed = catalog.seed
    started = spec.created + 60 + _hash(seed, ds, spec.name) % 600
    name = f"{ds}-{_suffix(5, seed, ds, spec.name)}"
    revision = _hex(10, seed, ds, "revision")
    container = {
        "name": ds.removesuffix("-daemonset"),
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}} if namespace != "gpu-operator" else {},
        "securityContext": {"privileged": True} if ds in (DS_TOOLKIT, "calico-node", "kube-proxy") else {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    ready_at = _ts(started + 20)
    return {
        "metadata": {
            "name": name,
            "generateName": f"{ds}-",
            "namespace": namespace,
            "uid": _uid(seed, "pod", namespace, name),
            "resourceVersion": str(int(started // catalog.tick_seconds) * RV_PER_TICK),
            "creationTimestamp": _ts(started),
            "labels": {"app": ds, "controller-revision-hash": revision, "pod-template-generation": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds,
                                 "uid": _uid(seed, "daemonset", namespace, ds), "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [spec.name]}]}]}}},
            "containers": [container],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "hostNetwork": namespace != "gpu-operator",
            "nodeName": spec.name,
            "nodeSelector": {f"nvidia.com/gpu.deploy.{ds.removeprefix('nvidia-').removesuffix('-daemonset')}":
                             "true"} if namespace == "gpu-operator" else {"kubernetes.io/os": "linux"},
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 2000001000,
            "priorityClassName": priority,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "serviceAccountName": ds.removesuffix("-daemonset"),
            "terminationGracePeriodSeconds": 30,
            "tolerations": [{"operator": "Exists"}],
        },
        "status": {
            "conditions": [
                {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": ready_at},
                {"type": "Initialized", "status": "True", "lastTransitionTime": _ts(started)},
                {"type": "Ready", "status": "True", "lastTransitionTime": ready_at},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": ready_at},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": _ts(started)},
            ],
            "containerStatuses": [{
                "name": container["name"], "image": image, "imageID": f"{image.split(':')[0]}@sha256:"
                + _hex(16, image) * 4, "containerID": "containerd://" + _hex(16, name) * 4, "ready": True,
                "restartCount": 0, "started": True, "state": {"running": {"startedAt": _ts(started + 15)}},
            }],
            "hostIP": spec.ip,
            "hostIPs": [{"ip": spec.ip}],
            "phase": "Running",
            "podIP": spec.ip if namespace != "gpu-operator" else _pod_ip(spec, name),
            "qosClass": "Burstable" if namespace != "gpu-operator" else "BestEffort",
            "startTime": _ts(started),
        },
    }


def _pod_ip(spec: _NodeSpec, name: str) -> str:
    return f"10.244.{spec.index}.{_hash(name) % 250 + 2}"


# ---- workload pods ------------------------------------------------------------------------------------------

_MODELS = ("llama-70b", "nemotron-15b", "gr00t-n1", "cosmos-7b", "vla-3b", "mixtral-8x7b", "dino-v2", "bevfusion")
_STAGES = ("pretrain", "sft", "finetune", "ablation", "dpo")
_SCENARIOS = ("warehouse", "humanoid-walk", "pick-place", "drive-urban", "drone-swarm", "factory-floor")
_SERVICES = ("llama-70b-chat", "embed-e5", "reranker", "whisper-large", "vlm-caption", "gr00t-policy")
_BENCHES = ("mmlu", "gsm8k", "humaneval", "mt-bench", "vqa-v2")
_DATASETS = ("fleet-logs", "sim-episodes", "webtext-dedup", "lidar-frames", "teleop-demos")
_IMAGES = {
    "train": "nvcr.io/nvidia/nemo:24.12",
    "finetune": "nvcr.io/nvidia/pytorch:24.12-py3",
    "sim": "nvcr.io/nvidia/isaac-sim:4.5.0",
    "serve": "nvcr.io/nvidia/tritonserver:24.12-trtllm-python-py3",
    "eval": "nvcr.io/nvidia/pytorch:24.12-py3",
    "notebook": "nvcr.io/nvidia/pytorch:24.12-py3",
    "edge": "nvcr.io/nvidia/l4t-jetpack:r36.4.0",
    "etl": "docker.io/library/python:3.11-slim",
    "queued": "nvcr.io/nvidia/nemo:24.12",
}


def _plan(catalog: _Catalog, slot: _WorkSlot, period_index: int) -> _Plan | None:
    rng = _rng(catalog.seed, "plan", slot.key, period_index)
    if rng.random() > slot.activity:
        return None
    begin = period_index * slot.period - slot.phase
    offset = rng.randint(0, max(0, slot.period // 5))
    pull_error = rng.random() < 0.04
    pending = rng.randint(3, max(3, slot.period // 3)) if pull_error else rng.choice((1, 1, 1, 2, 3))
    running = offset + pending
    keep = 0 if slot.kind in ("serve", "queued") else rng.randint(1, 3)
    end = max(running + 1, slot.period - keep)
    if slot.kind == "queued":
        running = end = slot.period  # never scheduled: it gives up and is deleted at the end of its period
    outcome = "Failed" if rng.random() < 0.12 else "Succeeded"
    return _Plan(begin + offset, begin + running, begin + end, begin + slot.period, outcome,
                 _workload_name(catalog.seed, slot, period_index, rng), rng.randrange(6), pull_error,
                 rng.choice((0, 0, 0, 0, 1, 2)))


def _workload_name(seed: int, slot: _WorkSlot, period_index: int, rng: random.Random) -> str:
    tag = _hex(5, seed, slot.key, period_index)
    model = rng.choice(_MODELS)
    if slot.kind == "train":
        return f"{model}-{rng.choice(_STAGES)}-{tag}"
    if slot.kind == "queued":
        return f"{model}-pretrain-{tag}-worker-0"
    if slot.kind == "finetune":
        return f"{model}-finetune-{tag}-{_suffix(5, tag)}"
    if slot.kind == "sim":
        return f"sim-{rng.choice(_SCENARIOS)}-{tag}-{_suffix(5, tag)}"
    if slot.kind == "serve":
        return f"{rng.choice(_SERVICES)}-{_hex(9, tag, 'rs')}-{_suffix(5, tag)}"
    if slot.kind == "eval":
        return f"eval-{model}-{rng.choice(_BENCHES)}-{tag}-{_suffix(5, tag)}"
    if slot.kind == "notebook":
        return f"jupyter-{slot.namespace.removeprefix('dev-')}-{tag}-0"
    if slot.kind == "edge":
        return f"orin-bench-{model}-{tag}-{_suffix(5, tag)}"
    return f"etl-{rng.choice(_DATASETS)}-{tag}-{_suffix(5, tag)}"


def _resources(cpu: str, memory: str, gpus: int, guaranteed: bool = True) -> dict:
    requests: dict[str, str] = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = dict(requests) if guaranteed else {"memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = limits["nvidia.com/gpu"] = str(gpus)
    return {"limits": limits, "requests": requests}


def _container(name: str, image: str, resources: dict, **extra: Any) -> dict:
    return {"name": name, "image": image, "imagePullPolicy": "IfNotPresent", "resources": resources,
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", **extra}


def _workload_spec(slot: _WorkSlot, plan: _Plan, node: _NodeSpec | None) -> tuple[list[dict], list[dict]]:
    """(initContainers, containers). Every shape's effective GPU request equals the slot's GPUs, whichever of
    the `kubectl describe node` rules (max of init containers, sum of containers, sidecars added) applies."""
    gpus, image = slot.gpus, _IMAGES[slot.kind]
    hw = node.hw if node else _HARDWARE["h100"]
    # Headroom is left for the daemonsets and the small extra containers of some shapes.
    share = gpus / hw.gpus if hw.gpus else 0.25
    cpu = str(max(1, int(hw.cpu * share * 0.75)))
    memory = f"{max(2, int(hw.memory_gib * share * 0.6))}Gi"
    main = slot.kind if slot.kind not in ("train", "queued") else "pytorch"
    shm = [{"name": "dshm", "mountPath": "/dev/shm"}]
    shape = plan.shape if gpus else plan.shape % 2
    if shape == 1:
        return ([_container("fetch-dataset", "docker.io/amazon/aws-cli:2.22.0", _resources("1", "2Gi", 0))],
                [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)])
    if shape == 2:
        return ([_container("gpu-check", image, _resources("1", "4Gi", gpus), command=["nvidia-smi", "-L"])],
                [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)])
    if shape == 3:
        sidecar = _container("log-shipper", "docker.io/fluent/fluent-bit:3.2.2", _resources("100m", "128Mi", 0),
                             restartPolicy="Always")
        return ([_container("fetch-dataset", "docker.io/amazon/aws-cli:2.22.0", _resources("1", "2Gi", 0)),
                 sidecar], [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)])
    if shape == 4 and gpus >= 2 and gpus % 2 == 0:
        half = gpus // 2
        return ([], [_container(main, image, _resources(cpu, memory, half), volumeMounts=shm),
                     _container("evaluator", image, _resources("4", "16Gi", half))])
    if shape == 5:
        return ([], [_container(main, image, _resources(cpu, memory, gpus, guaranteed=False)),
                     _container("metrics", "docker.io/prom/statsd-exporter:v0.28.0", {})])
    return [], [_container(main, image, _resources(cpu, memory, gpus), volumeMounts=shm)]


def _qos(containers: list[dict]) -> str:
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    for r in resources:
        limits, requests = r.get("limits") or {}, r.get("requests") or {}
        if any(limits.get(key) is None or limits.get(key) != requests.get(key, limits.get(key))
               for key in ("cpu", "memory")):
            return "Burstable"
    return "Guaranteed"


def _workload_pod(catalog: _Catalog, slot: _WorkSlot, plan: _Plan, member: int, stage: str) -> dict:
    seed, tick_seconds = catalog.seed, catalog.tick_seconds
    node = catalog.nodes[slot.nodes[member]] if slot.nodes else None
    name = plan.name if slot.kind != "train" else f"{plan.name}-worker-{member}"
    uid = _uid(seed, "pod", slot.namespace, name)
    created = plan.start * tick_seconds
    labels: dict[str, str] = {"app.kubernetes.io/part-of": slot.kind, "runwhere.ai/project": slot.namespace}
    owner_kind, owner_name = "Job", plan.name.rsplit("-", 1)[0]
    restart = "Never"
    if slot.kind in ("train", "queued"):
        job = plan.name.removesuffix("-worker-0")
        labels.update({"training.kubeflow.org/job-name": job, "training.kubeflow.org/replica-type": "worker",
                       "training.kubeflow.org/replica-index": str(member)})
        owner_kind, owner_name, restart = "PyTorchJob", job, "OnFailure"
    elif slot.kind == "serve":
        owner_kind, owner_name, restart = "ReplicaSet", plan.name.rsplit("-", 1)[0], "Always"
        labels["app"] = plan.name.rsplit("-", 2)[0]
    elif slot.kind == "notebook":
        owner_kind, owner_name, restart = "StatefulSet", plan.name.removesuffix("-0"), "Always"
    else:
        labels["batch.kubernetes.io/job-name"] = labels["job-name"] = owner_name
    if node is not None and node.pool:
        labels[POOL_LABEL] = node.pool
    init, containers = _workload_spec(slot, plan, node)
    tolerations = [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
    ]
    selector: dict[str, str] = {}
    if slot.gpus:
        tolerations.insert(0, {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
        product = node.hw.product if node else "NVIDIA-GB200"
        selector["nvidia.com/gpu.product"] = product or ""
        if node is not None and node.hw.kind == "a100":
            tolerations.insert(0, {"key": A100_TAINT["key"], "operator": "Equal", "value": A100_TAINT["value"],
                                   "effect": "NoSchedule"})
        if node is not None and node.pool:
            selector[POOL_LABEL] = node.pool
    spec: dict[str, Any] = {
        "containers": containers,
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "nodeSelector": selector,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 100 if slot.kind == "serve" else 50,
        "priorityClassName": "inference-high" if slot.kind == "serve" else "batch-default",
        "restartPolicy": restart,
        "schedulerName": "kai-scheduler" if slot.kind in ("train", "queued") else "default-scheduler",
        "securityContext": {},
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": tolerations,
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}}],
    }
    if init:
        spec["initContainers"] = init
    if node is not None:
        spec["nodeName"] = node.name
    status = _workload_status(catalog, slot, plan, node, name, init, containers, stage)
    stage_tick = {"Pending": plan.start, "Running": plan.running}.get(stage, plan.end)
    return {
        "metadata": {
            "name": name,
            "namespace": slot.namespace,
            "uid": uid,
            "resourceVersion": str(stage_tick * RV_PER_TICK),
            "creationTimestamp": _ts(created),
            "labels": labels,
            "annotations": {"sim.runwhere.ai/slot": slot.key},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1" if owner_kind == "PyTorchJob" else
                                 "batch/v1" if owner_kind == "Job" else "apps/v1", "kind": owner_kind,
                                 "name": owner_name, "uid": _uid(seed, owner_kind, slot.namespace, owner_name),
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": spec,
        "status": status,
    }


def _workload_status(catalog, slot, plan, node, name, init, containers, stage) -> dict:
    t = catalog.tick_seconds
    created, running, ended = _ts(plan.start * t), _ts(plan.running * t), _ts(plan.end * t)
    if node is None:
        message = (f"0/{len(catalog.nodes)} nodes are available: {len(catalog.nodes) - 54} node(s) didn't match "
                   f"Pod's node affinity/selector, 54 Insufficient nvidia.com/gpu. preemption: 0/"
                   f"{len(catalog.nodes)} nodes are available: 54 No preemption victims found for incoming pod.")
        return {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                "message": message, "lastTransitionTime": created}],
                "phase": "Pending", "qosClass": _qos(containers)}
    sidecars = [c for c in init if c.get("restartPolicy") == "Always"]
    image_ids = {c["image"]: c["image"].split(":")[0] + "@sha256:" + _hex(16, c["image"]) * 4
                 for c in init + containers}

    def container_status(c: dict, state: dict, ready: bool, restarts: int = 0) -> dict:
        status = {"name": c["name"], "image": c["image"], "imageID": image_ids[c["image"]] if state.get(
            "running") or state.get("terminated") else "", "ready": ready, "restartCount": restarts,
            "started": bool(state.get("running")), "state": state}
        if state.get("running") or state.get("terminated"):
            status["containerID"] = "containerd://" + _hex(16, name, c["name"]) * 4
        return status

    conditions = {"PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
                  "ContainersReady": "True", "PodScheduled": "True"}
    base = {"hostIP": node.ip, "hostIPs": [{"ip": node.ip}], "startTime": created, "qosClass": _qos(init + containers)}
    if stage == "Pending":
        conditions.update(Ready="False", ContainersReady="False", PodReadyToStartContainers="False")
        if plan.pull_error:
            waiting = {"waiting": {"reason": "ImagePullBackOff",
                                   "message": f'Back-off pulling image "{containers[0]["image"]}"'}}
        else:
            waiting = {"waiting": {"reason": "PodInitializing" if init else "ContainerCreating"}}
        init_statuses = []
        if init:
            conditions["Initialized"] = "False"
            init_statuses = [container_status(init[0], {"running": {"startedAt": created}}, False)]
            init_statuses += [container_status(c, {"waiting": {"reason": "PodInitializing"}}, False) for c in init[1:]]
        status = {"phase": "Pending", "containerStatuses": [container_status(c, waiting, False) for c in containers]}
        if init_statuses:
            status["initContainerStatuses"] = init_statuses
    elif stage == "Running":
        status = {"phase": "Running", "podIP": _pod_ip(node, name),
                  "containerStatuses": [container_status(c, {"running": {"startedAt": running}}, True,
                                                         plan.restarts if i == 0 else 0)
                                        for i, c in enumerate(containers)]}
        if init:
            status["initContainerStatuses"] = [
                container_status(c, {"running": {"startedAt": created}}, True) if c in sidecars else
                container_status(c, {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": created,
                                                    "finishedAt": running}}, False)
                for c in init]
    else:
        failed = stage == "Failed"
        conditions.update(Ready="False", ContainersReady="False", PodReadyToStartContainers="False")
        terminated = {"exitCode": 1 if failed else 0, "reason": "Error" if failed else "Completed",
                      "startedAt": running, "finishedAt": ended}
        if failed and plan.restarts == 2:
            terminated.update(exitCode=137, reason="OOMKilled")
        status = {"phase": stage, "podIP": _pod_ip(node, name),
                  "containerStatuses": [container_status(c, {"terminated": terminated}, False) for c in containers]}
        if init:
            status["initContainerStatuses"] = [container_status(c, {"terminated": {
                "exitCode": 0, "reason": "Completed", "startedAt": created, "finishedAt": running}}, False)
                for c in init]
    transitions = {"Pending": created, "Running": running}
    at = transitions.get(stage, ended)
    status["conditions"] = [
        {"type": kind, "status": value, "lastTransitionTime": created if value == "True" and kind in (
            "PodScheduled", "Initialized") else at, **({"reason": "PodCompleted"} if stage in (
                "Succeeded", "Failed") and value == "False" else {})}
        for kind, value in conditions.items()]
    return {**status, **base}


# ---- node objects -------------------------------------------------------------------------------------------

_CONDITION_TEXT = {
    "NetworkUnavailable": (("CalicoIsUp", "Calico is running on this node"),
                           ("CalicoIsDown", "Calico is shutting down on this node")),
    "MemoryPressure": (("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                       ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available")),
    "DiskPressure": (("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                     ("KubeletHasDiskPressure", "kubelet has disk pressure")),
    "PIDPressure": (("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    ("KubeletHasInsufficientPID", "kubelet has insufficient PID available")),
    "Ready": (("KubeletReady", "kubelet is posting ready status"),
              ("KubeletNotReady", "container runtime network not ready: NetworkReady=false "
               "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")),
}
_PRESSURE_TAINTS = {
    "DiskPressure": "node.kubernetes.io/disk-pressure",
    "MemoryPressure": "node.kubernetes.io/memory-pressure",
    "PIDPressure": "node.kubernetes.io/pid-pressure",
    "NetworkUnavailable": "node.kubernetes.io/network-unavailable",
}


# Which conditions each simulated trouble flips (an unreachable kubelet leaves every kubelet condition Unknown).
_AFFECTS = {
    "DiskPressure": ("DiskPressure",),
    "MemoryPressure": ("MemoryPressure",),
    "PIDPressure": ("PIDPressure",),
    "NetworkUnavailable": ("NetworkUnavailable",),
    "ReadyFalse": ("Ready",),
    "ReadyUnknown": ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready"),
    "Cordoned": (),
}


def _node_object(catalog: _Catalog, spec: _NodeSpec, tick: int, trouble: tuple[str | None, int | None, str | None],
                 labels: dict[str, str], cordoned_at: float | None, resource_version: int) -> dict:
    t = catalog.tick_seconds
    state, since_tick, kind_of_node = trouble
    since = since_tick * t if since_tick is not None else spec.created
    heartbeat = _ts(since - 40 if state == "ReadyUnknown" else tick * t)
    flipped = _AFFECTS[state] if state else ()
    # A condition that recovered keeps the moment of its recovery as lastTransitionTime.
    touched = _AFFECTS[kind_of_node] if kind_of_node and since_tick is not None else ()
    conditions = []
    for kind, (ok, bad) in _CONDITION_TEXT.items():
        if kind in flipped and state == "ReadyUnknown":
            status, reason, message = "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status."
        elif kind in flipped:
            status, (reason, message) = ("False" if kind == "Ready" else "True"), bad
        else:
            status, (reason, message) = ("True" if kind == "Ready" else "False"), ok
        conditions.append({
            "type": kind, "status": status,
            "lastHeartbeatTime": _ts(since if kind in touched else spec.created + 30) if kind == "NetworkUnavailable"
            else heartbeat,
            "lastTransitionTime": _ts(since if kind in touched else spec.created),
            "reason": reason, "message": message,
        })
    taints = []
    if spec.hw.kind == "a100":
        taints.append(dict(A100_TAINT))
    if state in _PRESSURE_TAINTS:
        taints.append({"key": _PRESSURE_TAINTS[state], "effect": "NoSchedule"})
    elif state == "ReadyFalse":
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": _ts(since)})
    elif state == "ReadyUnknown":
        taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"})
        taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": _ts(since)})
    node_spec: dict[str, Any] = {"podCIDR": spec.pod_cidr, "podCIDRs": [spec.pod_cidr]}
    if cordoned_at is not None:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                       "timeAdded": _ts(cordoned_at)})
        node_spec["unschedulable"] = True
    if taints:
        node_spec["taints"] = taints
    status = dict(spec.static_status)
    status["conditions"] = conditions
    return {
        "metadata": {
            "name": spec.name,
            "uid": spec.uid,
            "resourceVersion": str(resource_version),
            "creationTimestamp": _ts(spec.created),
            "labels": labels,
            "annotations": spec.annotations,
        },
        "spec": node_spec,
        "status": status,
    }


def _trouble_chosen(catalog: _Catalog, slot_index: int, epoch: int) -> str:
    key = (slot_index, epoch)
    chosen = catalog.chosen.get(key)
    if chosen is None:
        slot = catalog.trouble_slots[slot_index]
        chosen = slot.candidates[_hash(slot.salt, epoch) % len(slot.candidates)]
        if len(catalog.chosen) > 200_000:
            catalog.chosen.clear()
        catalog.chosen[key] = chosen
    return chosen


def _troubled(catalog: _Catalog, name: str, tick: int) -> bool:
    slot_index = catalog.trouble_of.get(name)
    if slot_index is None:
        return False
    slot = catalog.trouble_slots[slot_index]
    return _trouble_chosen(catalog, slot_index, (tick + slot.phase) // slot.length) == name


def _trouble(catalog: _Catalog, name: str, tick: int) -> tuple[str | None, int | None, str | None]:
    """(current trouble or None, tick it began or ended, or None if not within memory, the node's trouble kind)."""
    slot_index = catalog.trouble_of.get(name)
    if slot_index is None:
        return None, None, None
    slot = catalog.trouble_slots[slot_index]
    epoch = (tick + slot.phase) // slot.length
    key = (name, epoch)
    found = catalog.troubles.get(key)
    if found is not None:
        return found

    def start(e: int) -> int:
        return e * slot.length - slot.phase

    if _trouble_chosen(catalog, slot_index, epoch) == name:
        first = epoch
        while first > epoch - 50 and _trouble_chosen(catalog, slot_index, first - 1) == name:
            first -= 1
        found = (slot.state, start(first), slot.state)
    else:
        found = (None, None, slot.state)
        for back in range(1, 60):
            if _trouble_chosen(catalog, slot_index, epoch - back) == name:
                found = (None, start(epoch - back + 1), slot.state)
                break
    if len(catalog.troubles) > 200_000:
        catalog.troubles.clear()
    catalog.troubles[key] = found
    return found


# ---- the state users change ---------------------------------------------------------------------------------


def _empty_state() -> dict[str, Any]:
    return {"format": 1, "last_rv": 0, "compacted_rv": 0, "ops": [], "jobs": [],
            "snapshot": {"labels": {}, "cordon": {}, "node_rv": {}, "cordon_rv": {}}}


@dataclass
class _Overlay:
    labels: dict[str, dict[str, str | None]]
    cordon: dict[str, bool]  # a user's cordon or uncordon wins over the simulation's for good
    node_rv: dict[str, int]
    cordon_rv: dict[str, int]


def _overlay_at(state: dict[str, Any], rv: int) -> _Overlay:
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
    return _Overlay(labels, cordon, node_rv, cordon_rv)


@dataclass
class _View:
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
class _Base:
    tick: int
    nodes: dict[str, str]
    node_objs: dict[str, dict]
    pods: dict[str, str]
    work: list[tuple[str, str, int, int, int, bool]]
    pod_keys: list[str]


def _encode_continue(rv: int, start: str) -> str:
    raw = _dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start + "\x00"})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_continue(token: str) -> tuple[int, str]:
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(raw["rv"]), str(raw["start"])
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise ClusterError("continue key is not valid: incorrect encoded start resourceVersion", 400) from None


def _gpu_quantity(value: Any) -> int:
    if value is None:
        return 0
    try:
        return int(str(value))
    except ValueError:
        raise ClusterError(f"nvidia.com/gpu must be a whole number, got {value!r}", 422) from None


def _effective_gpus(pod_spec: dict) -> int:
    """The `kubectl describe node` rule: max(largest init container, sum of containers) plus sidecars."""
    def gpus(container: dict) -> int:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        return _gpu_quantity(requests.get("nvidia.com/gpu", (resources.get("limits") or {}).get("nvidia.com/gpu")))

    init = pod_spec.get("initContainers") or []
    sidecars = sum(gpus(c) for c in init if c.get("restartPolicy") == "Always")
    largest_init = max([gpus(c) for c in init if c.get("restartPolicy") != "Always"], default=0)
    return max(largest_init, sum(gpus(c) for c in pod_spec.get("containers") or []) + sidecars)


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        operator = toleration.get("operator", "Equal")
        if not toleration.get("key") and operator == "Exists":
            return True
        if toleration.get("key") != taint.get("key"):
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _affinity_matches(affinity: dict, labels: dict[str, str]) -> bool:
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    for term in required.get("nodeSelectorTerms") or []:
        ok = True
        for expression in term.get("matchExpressions") or []:
            key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
            value = labels.get(key)
            ok = {"In": value in values, "NotIn": value not in values, "Exists": key in labels,
                  "DoesNotExist": key not in labels}.get(operator, False)
            if not ok:
                break
        if ok:
            return True
    return False


class SimulatedCluster:
    """A 250-node GPU cluster whose nodes fall ill and recover and whose pods come and go, shared by every process
    that opens it with the same name and state_dir."""

    def __init__(self, name: str, state_dir: Path, *, seed: int | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, tick_seconds: float = 5.0):
        if tick_seconds <= 0:
            raise ValueError("tick_seconds must be positive")
        self.name = name
        self.seed = _hash("cluster", name) if seed is None else seed
        self.tick_seconds = tick_seconds
        self._clock, self._sleep = clock, sleep
        self._catalog = _catalog(self.seed, tick_seconds)
        state_dir = Path(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:60] + "-" + _hex(8, name)
        self._state_path = state_dir / f"{stem}.json"
        self._lock_path = state_dir / f"{stem}.lock"
        self._mutex = threading.RLock()
        self._state_bytes: bytes | None = None
        self._state: dict[str, Any] = _empty_state()
        self._bases: OrderedDict[int, _Base] = OrderedDict()
        self._views: OrderedDict[tuple[int, int], _View] = OrderedDict()
        self._overlays: OrderedDict[tuple[int, int], _Overlay] = OrderedDict()
        self._memo_old: dict[tuple, str] = {}
        self._memo_new: dict[tuple, str] = {}
        self._state_generation = 0
        self._job_pods: dict[tuple, str] = {}

    # ---- the Cluster interface ------------------------------------------------------------------------------

    def list_nodes(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        return self._list("nodes", limit, continue_token)

    def list_pods(self, *, limit: int = DEFAULT_PAGE_SIZE, continue_token: str | None = None) -> ListPage:
        return self._list("pods", limit, continue_token)

    def watch_nodes(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("nodes", resource_version, timeout_seconds)

    def watch_pods(self, resource_version: str, *, timeout_seconds: int = 60) -> Iterator[WatchEvent]:
        return self._watch("pods", resource_version, timeout_seconds)

    def patch_node_labels(self, name: str, labels: dict[str, str | None]) -> dict[str, Any]:
        if not isinstance(labels, dict):
            raise ClusterError("labels must be a mapping", 422)
        for key, value in labels.items():
            if not isinstance(key, str) or not _LABEL_KEY_RE.match(key) or len(key.split("/")[-1]) > 63:
                raise ClusterError(f'Node "{name}" is invalid: metadata.labels: Invalid value: "{key}": '
                                   "name part must consist of alphanumeric characters, '-', '_' or '.'", 422)
            if value is not None and (not isinstance(value, str) or not _LABEL_VALUE_RE.match(value)):
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
            if _overlay_at(state, rv).cordon.get(name) == bool(unschedulable):
                return False
            state["ops"].append([rv, name, "cordon", bool(unschedulable)])
            return True

        return self._change_node(name, change)

    def create_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        job = self._normalise_job(namespace, body)
        name = job["metadata"]["name"]

        def change(state, rv, view):
            if self._live_job(state, namespace, name, rv) is not None:
                raise Conflict(f'jobs.batch "{name}" already exists', 409)
            job["metadata"]["uid"] = uid = _uid(self.seed, "job", namespace, name, rv)
            job["metadata"]["creationTimestamp"] = _ts(math.floor(self._clock()))
            self._stamp_job_uid(job, uid)
            record = {"namespace": namespace, "name": name, "uid": uid, "created_rv": rv, "deleted_rv": None,
                      "orphaned": False, "job": job, **self._schedule_job(job, rv // RV_PER_TICK, view, state, rv)}
            state["jobs"].append(record)
            return record

        record = self._mutate(change)
        return self._job_object(record, record["created_rv"])

    def get_job(self, namespace: str, name: str) -> dict[str, Any]:
        with self._mutex:
            rv, state = self._current()
            record = self._live_job(state, namespace, name, rv)
            if record is None:
                raise NotFound(f'jobs.batch "{name}" not found', 404)
            return self._job_object(record, rv)

    def delete_job(self, namespace: str, name: str, *, propagation_policy: str = "Background") -> None:
        if propagation_policy not in ("Background", "Foreground", "Orphan"):
            raise ClusterError(f"Unsupported propagationPolicy {propagation_policy!r}", 400)

        def change(state, rv, view):
            record = self._live_job(state, namespace, name, rv)
            if record is None:
                raise NotFound(f'jobs.batch "{name}" not found', 404)
            record["deleted_rv"] = rv
            record["orphaned"] = propagation_policy == "Orphan"
            return True

        self._mutate(change)

    # ---- for the demo and for tests -------------------------------------------------------------------------

    def current_resource_version(self) -> str:
        with self._mutex:
            return str(self._current()[0])

    # ---- reading ----------------------------------------------------------------------------------------------

    def _tick(self) -> int:
        return math.floor(self._clock() / self.tick_seconds)

    @contextlib.contextmanager
    def _locked(self, mode: int):
        # Opened per use: a descriptor inherited across fork would share one lock between parent and child.
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, mode)
            yield
        finally:
            os.close(fd)

    def _load_unlocked(self) -> dict[str, Any]:
        try:
            raw = self._state_path.read_bytes()
        except FileNotFoundError:
            raw = b""
        if raw != self._state_bytes:
            try:
                self._state = json.loads(raw) if raw else _empty_state()
            except json.JSONDecodeError:
                raise ClusterError(f"simulated cluster state {self._state_path} is corrupt", 500) from None
            self._state_bytes = raw
            self._state_generation += 1
            self._views.clear()
            self._overlays.clear()
        return self._state

    def _current(self) -> tuple[int, dict[str, Any]]:
        # The clock is read before the lock is taken: a writer then either finished before we read the file, or
        # stamps its change later than the tick we saw, so no change can hide below a version we hand out.
        tick = self._tick()
        with self._locked(fcntl.LOCK_SH):
            state = self._load_unlocked()
        return max(tick * RV_PER_TICK, state["last_rv"]), state

    def _check_fresh(self, rv: int, now_rv: int, state: dict[str, Any]) -> None:
        horizon = (now_rv // RV_PER_TICK - math.ceil(RETENTION_SECONDS / self.tick_seconds)) * RV_PER_TICK
        if rv < state["compacted_rv"] or rv < horizon:
            raise Expired(f"too old resource version: {rv} ({max(horizon, state['compacted_rv'])})", 410)

    def _base(self, tick: int) -> _Base:
        base = self._bases.get(tick)
        if base is not None:
            self._bases.move_to_end(tick)
            return base
        catalog = self._catalog
        nodes, node_objs = {}, {}
        for name in catalog.node_names:
            spec = catalog.nodes[name]
            trouble = _trouble(catalog, name, tick)
            labels = dict(spec.labels)
            if spec.gpus:
                # Feature discovery relabels every tick, except on a node whose kubelet has gone silent.
                stamp = tick if trouble[0] != "ReadyUnknown" else trouble[1] - 12
                labels["nvidia.com/gfd.timestamp"] = str(int(stamp * self.tick_seconds))
            cordoned_at = trouble[1] * self.tick_seconds if trouble[0] == "Cordoned" else None
            obj = _node_object(catalog, spec, tick, trouble, labels, cordoned_at, tick * RV_PER_TICK)
            node_objs[name] = obj
            nodes[name] = _dumps(obj)
        pods = dict(catalog.daemon_pods)
        work: list[tuple[str, str, int, int, int, bool]] = []
        memo_new: dict[tuple, str] = {}
        for slot in catalog.work_slots:
            period_index = (tick + slot.phase) // slot.period
            plan_key = (slot.key, period_index)
            if plan_key in catalog.plans:
                plan = catalog.plans[plan_key]
            else:
                plan = _plan(catalog, slot, period_index)
                with catalog.lock:
                    if len(catalog.plans) > 100_000:
                        catalog.plans.clear()
                    catalog.plans[plan_key] = plan
            if plan is None or not plan.start <= tick < plan.gone:
                continue
            stage = ("Pending" if tick < plan.running else "Running" if tick < plan.end else plan.outcome)
            for member, node in enumerate(slot.nodes or ("",)):
                # The scheduler places nothing new on a node that is tainted at the time.
                if node and _troubled(catalog, node, plan.start):
                    continue
                key = (slot.key, period_index, member, stage)
                text = self._memo_new.get(key) or self._memo_old.get(key)
                if text is None:
                    text = _dumps(_workload_pod(catalog, slot, plan, member, stage))
                memo_new[key] = text
                pod_name = plan.name if slot.kind != "train" else f"{plan.name}-worker-{member}"
                pod_key = f"{slot.namespace}/{pod_name}"
                if pod_key in pods:
                    continue
                pods[pod_key] = text
                if node:
                    work.append((pod_key, node, slot.index, plan.start, slot.gpus, stage in ("Pending", "Running")))
        self._memo_old, self._memo_new = self._memo_new, memo_new
        base = _Base(tick, nodes, node_objs, pods, work, sorted(pods))
        self._bases[tick] = base
        while len(self._bases) > 4:
            self._bases.popitem(last=False)
        return base

    def _overlay(self, rv: int, state: dict[str, Any]) -> _Overlay:
        key = (self._state_generation, rv)
        overlay = self._overlays.get(key)
        if overlay is None:
            overlay = self._overlays[key] = _overlay_at(state, rv)
            while len(self._overlays) > 16:
                self._overlays.popitem(last=False)
        return overlay

    def _view(self, rv: int, state: dict[str, Any]) -> _View:
        key = (self._state_generation, rv)
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
                trouble = _trouble(catalog, name, tick)
                cordoned_at = trouble[1] * self.tick_seconds if trouble[0] == "Cordoned" else None
                if name in overlay.cordon:
                    cordoned_at = overlay.cordon_rv[name] // RV_PER_TICK * self.tick_seconds \
                        if overlay.cordon[name] else None
                obj = _node_object(catalog, spec, tick, trouble, labels, cordoned_at,
                                   max(tick * RV_PER_TICK, overlay.node_rv.get(name, 0)))
                node_objs[name] = obj
                nodes[name] = _dumps(obj)
        pods, work, pod_keys = base.pods, base.work, base.pod_keys
        jobs = [record for record in state["jobs"] if record["created_rv"] <= rv]
        if jobs:
            pods, work, pod_keys = self._with_jobs(base, jobs, rv, tick)
        view = _View(rv, tick, nodes, pods, sorted(nodes), pod_keys, node_objs, work)
        self._views[key] = view
        while len(self._views) > 8:
            self._views.popitem(last=False)
        return view

    def _with_jobs(self, base: _Base, jobs: list[dict], rv: int, tick: int):
        reserved: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for record in jobs:
            gone_tick = record["deleted_rv"] // RV_PER_TICK if record["deleted_rv"] else None
            for pod in record["pods"]:
                end = record["start_tick"] + 1 + record["run_ticks"]
                if gone_tick is not None and not record["orphaned"]:
                    end = min(end, gone_tick)
                for index in pod["slots"]:
                    reserved.setdefault((pod["node"], index), []).append((record["start_tick"], end))
        pods = dict(base.pods)
        work = []
        for entry in base.work:
            pod_key, node, index, start, _, _ = entry
            windows = reserved.get((node, index))
            if windows and any(begin <= start < end for begin, end in windows):
                del pods[pod_key]
            else:
                work.append(entry)
        for record in jobs:
            deleted = record["deleted_rv"] is not None and record["deleted_rv"] <= rv
            if deleted and not record["orphaned"]:
                continue
            for number, pod in enumerate(record["pods"]):
                stage = self._job_pod_stage(record, pod, tick)
                memo_key = (record["uid"], number, stage, deleted)
                text = self._job_pods.get(memo_key)
                if text is None:
                    text = _dumps(self._job_pod(record, number, stage, orphan=deleted))
                    if len(self._job_pods) > 20_000:
                        self._job_pods.clear()
                    self._job_pods[memo_key] = text
                key = f"{record['namespace']}/{pod['name']}"
                pods[key] = text
                if pod["node"]:
                    work.append((key, pod["node"], -1, record["start_tick"], pod["gpus"],
                                 stage in ("Pending", "Running")))
        return pods, work, sorted(pods)

    # ---- list and watch -------------------------------------------------------------------------------------

    def _list(self, kind: str, limit: int, continue_token: str | None) -> ListPage:
        if limit is not None and limit < 0:
            raise ClusterError("limit must be zero or positive", 400)
        with self._mutex:
            now_rv, state = self._current()
            if continue_token:
                rv, start = _decode_continue(continue_token)
                self._check_fresh(rv, now_rv, state)
            else:
                rv, start = now_rv, ""
            view = self._view(rv, state)
            objects, keys = (view.nodes, view.node_keys) if kind == "nodes" else (view.pods, view.pod_keys)
            first = bisect.bisect_left(keys, start) if start else 0
            last = len(keys) if not limit else min(len(keys), first + limit)
            page = keys[first:last]
            texts = [objects[key] for key in page]
        items = _loads("[" + ",".join(texts) + "]")
        token = _encode_continue(rv, page[-1]) if last < len(keys) and page else None
        return ListPage(items=items, resource_version=str(rv), continue_token=token)

    def _watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[WatchEvent]:
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
        return self._stream(kind, start_rv, initial, timeout_seconds)

    def _stream(self, kind: str, start_rv: int, initial: bool, timeout_seconds: int) -> Iterator[WatchEvent]:
        api_kind = "Node" if kind == "nodes" else "Pod"
        deadline = self._clock() + max(0, timeout_seconds)
        poll = min(1.0, self.tick_seconds)
        # Bounded by count too, so an injected clock that never moves cannot make the stream endless.
        polls_left = int(max(0, timeout_seconds) / poll) + 2
        with self._mutex:
            _, state = self._current()
            previous = self._objects(kind, self._view(start_rv, state))
        if initial:
            yield from self._stamped([("ADDED", previous[key]) for key in sorted(previous)], "0", start_rv, api_kind)
        seen = start_rv
        while polls_left > 0:
            polls_left -= 1
            with self._mutex:
                now_rv, state = self._current()
                if now_rv > seen:
                    self._check_fresh(seen, now_rv, state)
                    current = self._objects(kind, self._view(now_rv, state))
                    events = self._stamped(self._diff(previous, current), str(seen), now_rv, api_kind)
                    previous, seen = current, now_rv
                else:
                    events = None
            if events is not None:
                if events:
                    yield from events
                else:
                    yield WatchEvent("BOOKMARK", {"kind": api_kind, "apiVersion": "v1",
                                                  "metadata": {"resourceVersion": str(now_rv)}})
            remaining = deadline - self._clock()
            if remaining <= 0:
                return
            next_tick = (self._tick() + 1) * self.tick_seconds - self._clock()
            self._sleep(max(0.0, min(poll, next_tick, remaining)))

    @staticmethod
    def _objects(kind: str, view: _View) -> dict[str, str]:
        return view.nodes if kind == "nodes" else view.pods

    @staticmethod
    def _stamped(changes: list[tuple[str, str]], before: str, after: int, api_kind: str) -> list[WatchEvent]:
        """Watch events whose resourceVersions are all safe places to resume from.

        A batch holds every difference between two versions, and there is no version in between to resume from:
        so each event but the last carries the version the batch started from (a resume replays the batch, and a
        sync applies it again harmlessly) and only the last carries the version the batch reached."""
        events = []
        objects = _loads("[" + ",".join(text for _, text in changes) + "]")
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

    # ---- writing ------------------------------------------------------------------------------------------

    def _mutate(self, change: Callable[[dict, int, _View], Any]) -> Any:
        with self._mutex, self._locked(fcntl.LOCK_EX):
            tick = self._tick()
            state = copy.deepcopy(self._load_unlocked())
            before = max(tick * RV_PER_TICK, state["last_rv"])
            rv = max(tick * RV_PER_TICK + 1, state["last_rv"] + 1)
            result = change(state, rv, self._view(before, self._state))
            if result is False:
                return result
            state["last_rv"] = rv
            self._compact(state, tick)
            raw = _dumps(state).encode()
            fd, temp = tempfile.mkstemp(dir=self._state_path.parent, prefix=self._state_path.name, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(raw)
                os.replace(temp, self._state_path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temp)
                raise
            self._load_unlocked()
            return result

    def _compact(self, state: dict[str, Any], tick: int) -> None:
        horizon = (tick - math.ceil(RETENTION_SECONDS / self.tick_seconds)) * RV_PER_TICK
        ops = state["ops"]
        keep_from = 0
        while keep_from < len(ops) and (ops[keep_from][0] < horizon or len(ops) - keep_from > MAX_OPS):
            keep_from += 1
        if keep_from:
            folded = {**state, "ops": ops[:keep_from]}
            overlay = _overlay_at(folded, ops[keep_from - 1][0])
            state["snapshot"] = {"labels": overlay.labels, "cordon": overlay.cordon, "node_rv": overlay.node_rv,
                                 "cordon_rv": overlay.cordon_rv}
            state["compacted_rv"] = ops[keep_from - 1][0]
            state["ops"] = ops[keep_from:]
        forget = (tick - math.ceil(FORGET_DELETED_JOBS_SECONDS / self.tick_seconds)) * RV_PER_TICK
        state["jobs"] = [job for job in state["jobs"] if job["deleted_rv"] is None or job["deleted_rv"] >= forget]

    def _change_node(self, name: str, change) -> dict[str, Any]:
        if name not in self._catalog.nodes:
            raise NotFound(f'nodes "{name}" not found', 404)
        self._mutate(change)
        with self._mutex:
            rv, state = self._current()
            return json.loads(self._view(rv, state).nodes[name])

    # ---- jobs -----------------------------------------------------------------------------------------------

    @staticmethod
    def _live_job(state: dict[str, Any], namespace: str, name: str, rv: int) -> dict | None:
        for record in state["jobs"]:
            if (record["namespace"], record["name"]) == (namespace, name) and record["created_rv"] <= rv and (
                    record["deleted_rv"] is None or record["deleted_rv"] > rv):
                return record
        return None

    def _normalise_job(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(namespace, str) or not _DNS_LABEL_RE.match(namespace):
            raise ClusterError(f"invalid namespace {namespace!r}", 422)
        if not isinstance(body, dict):
            raise ClusterError("a Job must be a JSON object", 400)
        job = copy.deepcopy(body)
        metadata = job.setdefault("metadata", {})
        name = metadata.get("name")
        if not isinstance(name, str) or not _DNS_LABEL_RE.match(name):
            raise ClusterError(f"Job.batch {name!r} is invalid: metadata.name: Invalid value: must be a lowercase "
                               "RFC 1123 label of at most 63 characters", 422)
        if metadata.get("namespace", namespace) != namespace:
            raise ClusterError("the namespace of the provided object does not match the namespace sent on the "
                               "request", 400)
        if job.get("kind", "Job") != "Job":
            raise ClusterError(f"expected a Job, got {job.get('kind')!r}", 400)
        spec = job.get("spec") or {}
        pod_spec = ((spec.get("template") or {}).get("spec")) or {}
        containers = pod_spec.get("containers")
        if not isinstance(containers, list) or not containers:
            raise ClusterError(f'Job.batch "{name}" is invalid: spec.template.spec.containers: Required value', 422)
        if pod_spec.get("restartPolicy") not in ("Never", "OnFailure"):
            raise ClusterError(f'Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: Required value: '
                               'valid values: "OnFailure", "Never"', 422)
        _effective_gpus(pod_spec)  # refuses malformed GPU quantities now rather than at placement
        for container in [*containers, *(pod_spec.get("initContainers") or [])]:
            resources = container.setdefault("resources", {})
            limits = resources.get("limits") or {}
            requests = resources.setdefault("requests", {})
            for key, value in limits.items():
                requests.setdefault(key, value)  # the API server defaults requests to limits
        metadata["namespace"] = namespace
        metadata["generation"] = 1
        job["apiVersion"], job["kind"] = "batch/v1", "Job"
        try:
            parallelism = int(spec.get("parallelism", 1))
            completions = None if spec.get("completions") is None else int(spec["completions"])
        except (TypeError, ValueError):
            raise ClusterError(f'Job.batch "{name}" is invalid: spec.parallelism and spec.completions must be '
                               "integers", 422) from None
        spec.setdefault("parallelism", parallelism)
        spec.setdefault("completions", completions if completions is not None else parallelism)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        spec.setdefault("manualSelector", False)
        job["spec"] = spec
        job.pop("status", None)
        return job

    @staticmethod
    def _stamp_job_uid(job: dict, uid: str) -> None:
        name = job["metadata"]["name"]
        owned = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                 "controller-uid": uid, "job-name": name}
        job["metadata"]["labels"] = {**(job["metadata"].get("labels") or {}), **owned}
        job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template = job["spec"].setdefault("template", {})
        template.setdefault("metadata", {})
        template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}), **owned}

    def _schedule_job(self, job: dict, tick: int, view: _View, state: dict, rv: int) -> dict[str, Any]:
        """Place each pod on a node where it fits now and reserve the simulated GPU slots it takes over."""
        spec = job["spec"]
        pod_spec = spec["template"]["spec"]
        annotations = job["metadata"].get("annotations") or {}
        rng = _rng(self.seed, "job", job["metadata"]["uid"])
        try:
            seconds = float(annotations.get(DURATION_ANNOTATION, rng.randint(60, 600)))
        except ValueError:
            raise ClusterError(f"{DURATION_ANNOTATION} must be a number of seconds", 422) from None
        outcome = "Failed" if annotations.get(OUTCOME_ANNOTATION) == "Failed" else "Succeeded"
        deadline = spec.get("activeDeadlineSeconds")
        reason = "BackoffLimitExceeded" if outcome == "Failed" else None
        if deadline is not None and float(deadline) < seconds:
            seconds, outcome, reason = float(deadline), "Failed", "DeadlineExceeded"
        run_ticks = max(1, math.ceil(seconds / self.tick_seconds))
        count = 0 if spec.get("suspend") else max(0, min(int(spec["parallelism"]), int(spec["completions"]), 64))
        gpus = _effective_gpus(pod_spec)
        selector = pod_spec.get("nodeSelector") or {}
        tolerations = pod_spec.get("tolerations") or []
        free = self._free_slots(view, state, tick, rv)
        pods = []
        for number in range(count):
            candidates = []
            for name in view.node_keys:
                node = view.node_objs[name]
                labels = node["metadata"]["labels"]
                if any(labels.get(key) != value for key, value in selector.items()):
                    continue
                if not _affinity_matches(pod_spec.get("affinity"), labels):
                    continue
                taints = [t for t in node["spec"].get("taints") or [] if t.get("effect") in ("NoSchedule",
                                                                                              "NoExecute")]
                if not all(_tolerates(tolerations, taint) for taint in taints):
                    continue
                ready = next((c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"), "")
                slots = free.get(name, [])
                available = sum(size for _, size in slots)
                if ready != "True" or available < gpus:
                    continue
                candidates.append((available - gpus, _hash(job["metadata"]["uid"], number, name), name))
            if not candidates:
                pods.append({"node": None, "slots": [], "gpus": gpus})
                continue
            _, _, chosen = min(candidates)
            fitting = sorted((size, index) for index, size in free[chosen] if size >= gpus)
            taken, total = ([fitting[0][1]], fitting[0][0]) if fitting and gpus else ([], 0)
            for index, size in sorted(free[chosen], key=lambda item: -item[1]):
                if total >= gpus:
                    break
                taken.append(index)
                total += size
            free[chosen] = [(index, size) for index, size in free[chosen] if index not in taken]
            pods.append({"node": chosen, "slots": taken, "gpus": gpus})
        for number, pod in enumerate(pods):
            pod["name"] = f"{job['metadata']['name']}-{_suffix(5, job['metadata']['uid'], number)}"
        return {"pods": pods, "start_tick": tick, "run_ticks": run_ticks, "outcome": outcome, "reason": reason}

    def _free_slots(self, view: _View, state: dict, tick: int, rv: int) -> dict[str, list[tuple[int, int]]]:
        busy = {(node, index) for _, node, index, _, _, holds in view.work if holds}
        for record in state["jobs"]:
            if record["created_rv"] > rv or (record["deleted_rv"] is not None and record["deleted_rv"] <= rv):
                continue
            if tick >= record["start_tick"] + 1 + record["run_ticks"]:
                continue
            for pod in record["pods"]:
                for index in pod["slots"]:
                    busy.add((pod["node"], index))
        free = {}
        for name, slots in self._catalog.node_slots.items():
            free[name] = [(index, size) for index, size in slots if (name, index) not in busy]
        return free

    @staticmethod
    def _job_pod_stage(record: dict, pod: dict, tick: int) -> str:
        if pod["node"] is None:
            return "Unschedulable"
        elapsed = tick - record["start_tick"]
        if elapsed < 1:
            return "Pending"
        if elapsed < 1 + record["run_ticks"]:
            return "Running"
        return record["outcome"]

    def _job_pod(self, record: dict, number: int, stage: str, *, orphan: bool) -> dict:
        job = record["job"]
        pod = record["pods"][number]
        template = copy.deepcopy(job["spec"]["template"])
        t = self.tick_seconds
        start = record["start_tick"]
        created, running, ended = _ts(start * t), _ts((start + 1) * t), _ts((start + 1 + record["run_ticks"]) * t)
        metadata = {
            "name": pod["name"],
            "generateName": f"{record['name']}-",
            "namespace": record["namespace"],
            "uid": _uid(self.seed, "job-pod", record["uid"], number),
            "resourceVersion": str({"Pending": start, "Unschedulable": start, "Running": start + 1}.get(
                stage, start + 1 + record["run_ticks"]) * RV_PER_TICK),
            "creationTimestamp": created,
            "labels": (template.get("metadata") or {}).get("labels") or {},
            "annotations": (template.get("metadata") or {}).get("annotations") or {},
        }
        if not orphan:
            metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": record["name"],
                                            "uid": record["uid"], "controller": True, "blockOwnerDeletion": True}]
        spec = template.get("spec") or {}
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec["tolerations"] = [*(spec.get("tolerations") or []),
                               {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300},
                               {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300}]
        containers = spec.get("containers") or []
        init = spec.get("initContainers") or []
        if stage == "Unschedulable":
            status = {"phase": "Pending", "qosClass": _qos(containers), "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": created,
                "message": f"0/{len(self._catalog.nodes)} nodes are available: no node matches the pod's node "
                           "selector, tolerations and nvidia.com/gpu request."}]}
            return {"metadata": metadata, "spec": spec, "status": status}
        node = self._catalog.nodes[pod["node"]]
        spec["nodeName"] = node.name
        if stage == "Pending":
            state = {"waiting": {"reason": "PodInitializing" if init else "ContainerCreating"}}
        elif stage == "Running":
            state = {"running": {"startedAt": running}}
        else:
            failed = stage == "Failed"
            state = {"terminated": {"exitCode": 1 if failed else 0, "reason": "Error" if failed else "Completed",
                                    "startedAt": running, "finishedAt": ended}}
        ready = stage == "Running"
        status = {
            "phase": stage,
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "startTime": created,
            "qosClass": _qos(init + containers),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": created},
                {"type": "Initialized", "status": "True" if stage != "Pending" or not init else "False",
                 "lastTransitionTime": running if init else created},
                {"type": "ContainersReady", "status": str(ready), "lastTransitionTime": running},
                {"type": "Ready", "status": str(ready), "lastTransitionTime": running},
            ],
            "containerStatuses": [{"name": c.get("name", ""), "image": c.get("image", ""), "ready": ready,
                                   "restartCount": 0, "started": ready, "state": state} for c in containers],
        }
        if stage != "Pending":
            status["podIP"] = _pod_ip(node, pod["name"])
        return {"metadata": metadata, "spec": spec, "status": status}

    def _job_object(self, record: dict, rv: int) -> dict[str, Any]:
        job = copy.deepcopy(record["job"])
        tick = rv // RV_PER_TICK
        t = self.tick_seconds
        stages = [self._job_pod_stage(record, pod, tick) for pod in record["pods"]]
        finished_tick = record["start_tick"] + 1 + record["run_ticks"]
        status: dict[str, Any] = {"startTime": job["metadata"]["creationTimestamp"]}
        active = sum(stage in ("Pending", "Running", "Unschedulable") for stage in stages)
        if active:
            status["active"] = active
        status["ready"] = sum(stage == "Running" for stage in stages)
        succeeded = sum(stage == "Succeeded" for stage in stages)
        failed = sum(stage == "Failed" for stage in stages)
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        status["uncountedTerminatedPods"] = {}
        changed = record["created_rv"]
        if job["spec"].get("suspend"):
            status["conditions"] = [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                     "message": "Job suspended", "lastProbeTime": job["metadata"]["creationTimestamp"],
                                     "lastTransitionTime": job["metadata"]["creationTimestamp"]}]
        elif stages and not active:
            at = _ts(finished_tick * t)
            changed = max(changed, finished_tick * RV_PER_TICK)
            if failed:
                reason = record.get("reason") or "BackoffLimitExceeded"
                message = ("Job was active longer than specified deadline" if reason == "DeadlineExceeded"
                           else "Job has reached the specified backoff limit")
                status["conditions"] = [
                    {"type": "FailureTarget", "status": "True", "reason": reason, "message": message,
                     "lastProbeTime": at, "lastTransitionTime": at},
                    {"type": "Failed", "status": "True", "reason": reason, "message": message,
                     "lastProbeTime": at, "lastTransitionTime": at}]
            else:
                status["completionTime"] = at
                status["conditions"] = [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": at,
                     "lastTransitionTime": at},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": at,
                     "lastTransitionTime": at}]
        elif tick > record["start_tick"]:
            changed = max(changed, (record["start_tick"] + 1) * RV_PER_TICK)
        job["metadata"]["resourceVersion"] = str(changed)
        job["status"] = status
        return job
