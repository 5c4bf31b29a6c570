"""The simulated fleet: its hardware, its 250 nodes and the work slots planned on them, the troubles nodes fall
into and recover from, and the Node objects all this adds up to at a given tick.

A fleet has a profile, chosen by the cluster's name (`fleet_profile`): "default", the demo's 250 mixed nodes with
their own simulated workload and troubles; "kai", for clusters named `kai` or `kai-...`, a small lab that runs
only the Jobs users create (the demo's KAI backend): 12 DGX H100 nodes in 3 zones of 2 racks of 2 nodes
(`topology.kubernetes.io/zone` and `topology.kubernetes.io/rack`) and 2 CPU nodes, none of them falling ill.

The catalog of a seed is built once per process (see cluster.py) and is the same in every process.
"""

import threading
from dataclasses import dataclass, field
from typing import Any

from .randomness import compact_dumps, stable_hash, stable_hex, stable_rng, stable_uid, timestamp

# Time moves in ticks; whatever the simulation builds for a tick carries resourceVersion tick * RV_PER_TICK, and
# user changes within the tick count up from there.
RV_PER_TICK = 1_000_000
POOL_LABEL = "runwhere.ai/pool"


@dataclass(frozen=True)
class Hardware:
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


HARDWARE = {
    "gb200": Hardware("gb200", "NVIDIA-GB200", 4, "blackwell", 189471, (10, 0), "NVIDIA-GB200-NVL72",
                       "gb200-nvl72-tray", "arm64", 144, 884, 3576, (570, 124, 6), (12, 8),
                       "6.8.0-1021-nvidia-64k", "Ubuntu 24.04.1 LTS", True),
    "h100": Hardware("h100", "NVIDIA-H100-80GB-HBM3", 8, "hopper", 81559, (9, 0), "NVIDIA-DGX-H100", "dgx-h100",
                      "amd64", 224, 2015, 30720, (550, 127, 8), (12, 4), "5.15.0-1063-nvidia",
                      "Ubuntu 22.04.5 LTS", True),
    "a100": Hardware("a100", "NVIDIA-A100-SXM4-80GB", 8, "ampere", 81920, (8, 0), "NVIDIA-DGX-A100", "dgx-a100",
                      "amd64", 256, 2015, 15360, (535, 216, 3), (12, 2), "5.15.0-1063-nvidia",
                      "Ubuntu 22.04.5 LTS", True),
    "l40s": Hardware("l40s", "NVIDIA-L40S", 4, "ada-lovelace", 46068, (8, 9), "PowerEdge-R760xa", "ovx-l40s",
                      "amd64", 128, 1007, 7680, (550, 127, 8), (12, 4), "5.15.0-1063-nvidia",
                      "Ubuntu 22.04.5 LTS", False),
    "jetson": Hardware("jetson", "NVIDIA-Jetson-AGX-Orin", 1, "ampere", 62841, (8, 7),
                        "NVIDIA-Jetson-AGX-Orin-Developer-Kit", "jetson-agx-orin-64gb", "arm64", 12, 61, 938,
                        (540, 4, 0), (12, 6), "5.15.148-tegra", "Ubuntu 22.04.5 LTS", False),
    "cpu": Hardware("cpu", None, 0, "", 0, (0, 0), "PowerEdge-R760", "r760-cpu", "amd64", 96, 754, 3576,
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

PROFILES = ("default", "kai")
# The "kai" lab: (kind, node name pattern, count); H100 nodes 4 to a zone, 2 to a rack.
_KAI_FLEET = [("h100", "dgx-h100-{n:02d}", 12), ("cpu", "cpu-{n:02d}", 2)]
_KAI_NODES_PER_RACK, _KAI_RACKS_PER_ZONE = 2, 2


def fleet_profile(name: str) -> str:
    """The fleet a cluster of this name simulates: "kai" for `kai` and `kai-...`, else "default"."""
    return "kai" if name == "kai" or name.startswith("kai-") else "default"
A100_TAINT = {"key": "nvidia.com/gpu.product", "value": "NVIDIA-A100", "effect": "NoSchedule"}

# Node troubles: each state has a few "slots"; a slot holds one node at a time, for an epoch of several ticks.
TROUBLES = ("DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable", "Cordoned", "ReadyUnknown",
            "ReadyFalse")
_TROUBLE_SLOTS = {"Cordoned": 3}
_DEFAULT_TROUBLE_SLOTS = 2


@dataclass
class NodeSpec:
    name: str
    index: int
    hw: Hardware
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
class WorkSlot:
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
class Plan:
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
class Catalog:
    seed: int
    tick_seconds: float
    nodes: dict[str, NodeSpec]
    node_names: list[str]
    trouble_slots: list[_TroubleSlot]
    trouble_of: dict[str, int]
    work_slots: list[WorkSlot]
    node_slots: dict[str, list[tuple[int, int]]]
    daemon_pods: dict[str, str]  # filled in from workloads.daemon_pods once the catalog is built
    chosen: dict[tuple[int, int], str] = field(default_factory=dict)
    troubles: dict[tuple[str, int], tuple[str | None, int | None, str | None]] = field(default_factory=dict)
    plans: dict[tuple[str, int], Plan | None] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def build_catalog(seed: int, tick_seconds: float, profile: str = "default") -> Catalog:
    """The fleet of a seed and profile, without its daemonset pods."""
    if profile == "kai":
        return _build_kai_catalog(seed, tick_seconds)
    if profile != "default":
        raise ValueError(f"unknown fleet profile {profile!r}")
    rng = stable_rng(seed, "fleet")
    nodes: dict[str, NodeSpec] = {}
    born = 1709251200 + rng.randrange(0, 90 * 86400)  # the cluster went up in spring 2024
    index = 0
    for kind, pattern, groups in _FLEET:
        hw = HARDWARE[kind]
        n = 0
        for pool, count in groups:
            for _ in range(count):
                n += 1
                rack, tray = divmod(n - 1, _GB200_TRAYS_PER_RACK)
                name = pattern.format(n=n, rack=rack + 1, tray=tray + 1)
                zone = _ZONES[rack % 3] if kind == "gb200" else _ZONES[(n - 1) % 3]
                rack_name = f"gb200-r{rack + 1:02d}" if kind == "gb200" else f"{kind}-rack{(n - 1) // 8 + 1:02d}"
                node_rng = stable_rng(seed, "node", name)
                nodes[name] = NodeSpec(
                    name=name, index=index, hw=hw, pool=pool, zone=zone, rack=rack_name,
                    ip=f"10.40.{index // 200}.{index % 200 + 10}",
                    created=born + index * 37 + node_rng.randrange(0, 3600),
                    gpu_allocatable=hw.gpus,
                    memory_ki=hw.memory_gib * 1048576 - node_rng.randrange(100_000, 900_000),
                    disk_ki=hw.disk_gib * 1048576 - node_rng.randrange(1_000_000, 9_000_000),
                    uid=stable_uid(seed, "node", name), machine_id=stable_hex(32, seed, "machine", name),
                    boot_id=stable_uid(seed, "boot", name), daemon_gap=None, pod_cidr=f"10.244.{index}.0/24",
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
            "csi.volume.kubernetes.io/nodeid": compact_dumps({"csi.tigera.io": spec.name}),
            "node.alpha.kubernetes.io/ttl": "0",
            "projectcalico.org/IPv4Address": f"{spec.ip}/16",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            **({"nvidia.com/gpu-driver-upgrade-enabled": "true"} if spec.gpus else {}),
        }

    trouble_slots, trouble_of = _plan_troubles(seed, names, nodes)
    work_slots, node_slots = _plan_work(seed, nodes)
    return Catalog(seed, tick_seconds, nodes, names, trouble_slots, trouble_of, work_slots, node_slots, {})


def _build_kai_catalog(seed: int, tick_seconds: float) -> Catalog:
    """The "kai" lab: every GPU a slot of its own for users' Jobs, no simulated workload and no troubles."""
    rng = stable_rng(seed, "fleet")
    born = 1709251200 + rng.randrange(0, 90 * 86400)
    nodes: dict[str, NodeSpec] = {}
    index = 0
    for kind, pattern, count in _KAI_FLEET:
        hw = HARDWARE[kind]
        for n in range(1, count + 1):
            name = pattern.format(n=n)
            rack = (n - 1) // _KAI_NODES_PER_RACK
            zone = _ZONES[rack // _KAI_RACKS_PER_ZONE % len(_ZONES)]
            node_rng = stable_rng(seed, "node", name)
            nodes[name] = NodeSpec(
                name=name, index=index, hw=hw, pool=None, zone=zone,
                rack=f"{zone}-rack{rack % _KAI_RACKS_PER_ZONE + 1}" if hw.gpus else f"{zone}-services",
                ip=f"10.41.{index // 200}.{index % 200 + 10}",
                created=born + index * 37 + node_rng.randrange(0, 3600),
                gpu_allocatable=hw.gpus,
                memory_ki=hw.memory_gib * 1048576 - node_rng.randrange(100_000, 900_000),
                disk_ki=hw.disk_gib * 1048576 - node_rng.randrange(1_000_000, 9_000_000),
                uid=stable_uid(seed, "node", name), machine_id=stable_hex(32, seed, "machine", name),
                boot_id=stable_uid(seed, "boot", name), daemon_gap=None, pod_cidr=f"10.245.{index}.0/24",
            )
            index += 1
    for spec in nodes.values():
        spec.labels = _node_labels(spec, seed)
        spec.static_status = _node_static_status(spec, seed)
        spec.annotations = {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        }
    node_slots = {name: [(gpu, 1) for gpu in range(spec.gpu_allocatable)] for name, spec in nodes.items()}
    return Catalog(seed, tick_seconds, nodes, sorted(nodes), [], {}, [], node_slots, {})


def _plan_troubles(seed: int, names: list[str], nodes: dict[str, NodeSpec]):
    rng = stable_rng(seed, "troubles")
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
        slots.append(_TroubleSlot(state, candidates, length, rng.randrange(length), stable_hash(seed, state, k)))
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


def _plan_work(seed: int, nodes: dict[str, NodeSpec]):
    slots: list[WorkSlot] = []
    node_slots: dict[str, list[tuple[int, int]]] = {name: [] for name in nodes}

    def add(key, members, index, gpus, kind, namespace, period_range, activity):
        rng = stable_rng(seed, "slot", key)
        period = rng.randint(*period_range)
        slots.append(WorkSlot(key, tuple(members), index, gpus, kind, namespace, period,
                               rng.randrange(period), activity))
        for member in members:
            node_slots[member].append((index, gpus))

    # Multi-node training: GB200 trays in gangs of 4 (16 GPUs) and most H100 training nodes in gangs of 2-4.
    by_kind: dict[str, list[NodeSpec]] = {}
    for spec in sorted(nodes.values(), key=lambda s: s.index):
        by_kind.setdefault(spec.hw.kind, []).append(spec)
    rng = stable_rng(seed, "gangs")
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


def _single_node_slots(seed: int, spec: NodeSpec, add) -> None:
    rng = stable_rng(seed, "partition", spec.name)
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
            user = _DEV_USERS[stable_hash(seed, key) % len(_DEV_USERS)]
            add(key, [spec.name], index, gpus, "notebook", f"dev-{user}", (30, 200), 0.6)
        else:
            add(key, [spec.name], index, gpus, "finetune", rng.choice(_TEAMS_TRAINING), (10, 60), 0.75)


def _node_labels(spec: NodeSpec, seed: int) -> dict[str, str]:
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
        labels["nvidia.com/gpu.clique"] = f"{stable_uid(seed, 'nvl', spec.rack)}.{spec.rack[-2:]}"
    return labels


def _node_static_status(spec: NodeSpec, seed: int) -> dict[str, Any]:
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
            "systemUUID": stable_uid(seed, "system", spec.name).upper(),
        },
    }


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


def node_object(catalog: Catalog, spec: NodeSpec, tick: int, trouble: tuple[str | None, int | None, str | None],
                 labels: dict[str, str], cordoned_at: float | None, resource_version: int) -> dict:
    t = catalog.tick_seconds
    state, since_tick, kind_of_node = trouble
    since = since_tick * t if since_tick is not None else spec.created
    heartbeat = timestamp(since - 40 if state == "ReadyUnknown" else tick * t)
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
            "lastHeartbeatTime": timestamp(since if kind in touched else spec.created + 30)
            if kind == "NetworkUnavailable" else heartbeat,
            "lastTransitionTime": timestamp(since if kind in touched else spec.created),
            "reason": reason, "message": message,
        })
    taints = []
    if spec.hw.kind == "a100":
        taints.append(dict(A100_TAINT))
    if state in _PRESSURE_TAINTS:
        taints.append({"key": _PRESSURE_TAINTS[state], "effect": "NoSchedule"})
    elif state == "ReadyFalse":
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
        taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": timestamp(since)})
    elif state == "ReadyUnknown":
        taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"})
        taints.append({"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": timestamp(since)})
    node_spec: dict[str, Any] = {"podCIDR": spec.pod_cidr, "podCIDRs": [spec.pod_cidr]}
    if cordoned_at is not None:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule",
                       "timeAdded": timestamp(cordoned_at)})
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
            "creationTimestamp": timestamp(spec.created),
            "labels": labels,
            "annotations": spec.annotations,
        },
        "spec": node_spec,
        "status": status,
    }


def _trouble_chosen(catalog: Catalog, slot_index: int, epoch: int) -> str:
    key = (slot_index, epoch)
    chosen = catalog.chosen.get(key)
    if chosen is None:
        slot = catalog.trouble_slots[slot_index]
        chosen = slot.candidates[stable_hash(slot.salt, epoch) % len(slot.candidates)]
        if len(catalog.chosen) > 200_000:
            catalog.chosen.clear()
        catalog.chosen[key] = chosen
    return chosen


def troubled(catalog: Catalog, name: str, tick: int) -> bool:
    slot_index = catalog.trouble_of.get(name)
    if slot_index is None:
        return False
    slot = catalog.trouble_slots[slot_index]
    return _trouble_chosen(catalog, slot_index, (tick + slot.phase) // slot.length) == name


def trouble_at(catalog: Catalog, name: str, tick: int) -> tuple[str | None, int | None, str | None]:
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
