"""The fleet of the browser tests and the README's pictures: four pools of a us-west-2 GPU cluster on one synced
backend, 30 nodes (a few not ready) with memberships, 24 hours of usage snapshots and a few revisions per pool. A
plugin of the whole suite (tests/conftest.py's pytest_plugins), so that no test module imports it from another.

Rows written directly: 24 hours of snapshots cannot be made through the doors in a test's time (the sync writes one
picture per round, at the time it runs). The figures themselves are checked from the doors in
tests/test_figures_journey.py (pool and node tables) and tests/usage/test_usage_journey.py (usage)."""

import datetime as dt
import math

import pytest
from django.utils import timezone

from pools.config import writes
from pools.models import Backend, ConfigKind, Node, NodeMembership, Pool, UsageSnapshot
from tests.support.fleet import pool_document

TiB, GiB = 2**40, 2**30

# GPU type: (GPUs per node, CPU millicores, memory bytes, storage bytes, GPU memory MiB, family)
HARDWARE = {
    "NVIDIA-H100-80GB-HBM3": (8, 223_000, 2 * TiB - 64 * GiB, 28 * 10**12, 81_559, "hopper"),
    "NVIDIA-A100-SXM4-80GB": (8, 254_000, 2 * TiB - 96 * GiB, 15 * 10**12, 81_920, "ampere"),
    "NVIDIA-L40S": (4, 126_000, 1 * TiB - 32 * GiB, 7 * 10**12, 46_068, "ada-lovelace"),
    "": (0, 94_000, 384 * GiB, 2 * 10**12, 0, ""),
}
# Pool: (description, {platform: description}, default platform)
POOLS = {
    "training": ("Pre-training and fine-tuning on DGX H100, with A100 overflow",
                 {"dgx-h100": "DGX H100, 8 GPUs, NVLink", "hgx-a100": "HGX A100 80GB, 8 GPUs"}, "dgx-h100"),
    "inference": ("Online inference and batch scoring", {"l40s": "L40S, 4 GPUs"}, "l40s"),
    "simulation": ("Isaac Sim and physics workloads", {"hgx-a100": "HGX A100 80GB, 8 GPUs", "l40s": "L40S, 4 GPUs"},
                   "hgx-a100"),
    "dev": ("Notebooks and debugging, small requests", {"l40s": "L40S, 4 GPUs", "cpu": "CPU only"}, "l40s"),
}
GPU_USE = (8, 6, 8, 3, 7, 8, 5, 2, 8, 6, 4, 8, 1)  # GPUs used, cycled over the nodes
NOT_READY = {  # node: (status, reasons)
    "dgx-h100-004": ("Not ready (Disk pressure)", ["Disk pressure"]),
    "dgx-h100-011": ("Not ready (Missing NVIDIA DCGM Exporter)", ["Missing NVIDIA DCGM Exporter"]),
    "hgx-a100-03": ("Cordoned", ["Scheduling disabled"]),
    "l40s-07": ("Unknown", []),
}


def node_specs() -> list[tuple[str, str, dict[str, list[str]]]]:
    """(name, GPU type, {pool: [platforms]}) for 30 nodes; some A100, L40S and CPU nodes are shared."""
    specs = [(f"dgx-h100-{i:03d}", "NVIDIA-H100-80GB-HBM3", {"training": ["dgx-h100"]}) for i in range(1, 13)]
    specs += [(f"hgx-a100-{i:02d}", "NVIDIA-A100-SXM4-80GB",
               {"training": ["hgx-a100"], "simulation": ["hgx-a100"]} if i <= 4 else {"simulation": ["hgx-a100"]})
              for i in range(1, 7)]
    specs += [(f"l40s-{i:02d}", "NVIDIA-L40S",
               {"inference": ["l40s"]} if i <= 6 else {"inference": ["l40s"], "simulation": ["l40s"]})
              for i in range(1, 9)]
    specs += [(f"l40s-dev-{i:02d}", "NVIDIA-L40S", {"dev": ["l40s"]}) for i in range(1, 3)]
    specs += [(f"cpu-{i:02d}", "", {"dev": ["cpu"], "default": []}) for i in range(1, 3)]
    return specs


def build_node(backend: Backend, index: int, name: str, product: str, pools: dict[str, list[str]], now) -> Node:
    gpus, cpu, memory, storage, gpu_memory, family = HARDWARE[product]
    status, reasons = NOT_READY.get(name, ("Ready", []))
    unhealthy = 1 if name == "dgx-h100-009" else 0
    allocatable = gpus - unhealthy
    used = 0 if status != "Ready" else min(allocatable, (GPU_USE[index % len(GPU_USE)] * gpus + 4) // 8)
    cordoned = reasons == ["Scheduling disabled"]
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}] if gpus else []
    if cordoned:
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"us-west-2{'abc'[index % 3]}",
              "node.kubernetes.io/instance-type": {"hopper": "p5.48xlarge", "ampere": "p4de.24xlarge",
                                                   "ada-lovelace": "g6e.12xlarge"}.get(family, "m7i.24xlarge")}
    if gpus:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product,
                       "nvidia.com/gpu.count": str(gpus), "nvidia.com/gpu.family": family})
    return Node(
        backend=backend, name=name, uid=f"5c0ffee0-0000-4000-8000-{index:012d}", labels=labels, taints=taints,
        unschedulable=cordoned, cpu_capacity=cpu + 1_000, cpu_allocatable=cpu,
        cpu_requested=cpu * (35 + 7 * (index % 9)) // 100, memory_capacity=memory + 16 * GiB,
        memory_allocatable=memory, memory_requested=memory * (20 + 9 * (index % 7)) // 100,
        storage_capacity=storage, storage_allocatable=storage * 9 // 10, pods_capacity=110, pods_allocatable=110,
        gpu_product=product, gpu_count=gpus, gpu_memory_mib=gpu_memory, gpu_family=family, gpu_total=gpus,
        gpu_allocatable=allocatable, gpu_used=used, gpu_free=allocatable - used, gpu_unhealthy=unhealthy,
        status=status, reasons=reasons, pool_names=sorted(pools),
        platform_names=[f"{pool}/{platform}" for pool, names in sorted(pools.items()) for platform in names],
        sharing=Node.Sharing.SHARED if len([p for p in pools if p != "default"]) > 1 else Node.Sharing.RESERVED,
        last_seen=now - (dt.timedelta(minutes=14) if status == "Unknown" else dt.timedelta(seconds=5 + index)),
        updated_at=now,
    )


@pytest.fixture
def fleet_with_history(defaults, staff):
    """Four pools on one synced backend, 30 nodes with memberships, 24 hours of usage snapshots, and a few
    revisions per pool (so the history has diffs to show)."""
    now = timezone.now()
    documents = {name: pool_document(description=description, default_platform=default,
                                     platforms={platform: {"description": text,
                                                           **({"override_pod_template": ["gpu_toleration"]}
                                                              if platform != "cpu" else {})}
                                                for platform, text in platforms.items()})
                 for name, (description, platforms, default) in POOLS.items()}
    writes.import_document(ConfigKind.POOL, {"pools": documents}, author=staff,
                            description="Pools of the us-west-2 GPU cluster")
    documents["training"].update(description="Pre-training and fine-tuning on DGX H100 (7-day runs allowed)",
                                 default_exec_timeout="2d", max_exec_timeout="7d")
    writes.import_document(ConfigKind.POOL, {"pools": {"training": documents["training"]}}, author=staff,
                            description="Allow week-long pre-training runs")
    documents["inference"]["common_default_variables"]["USER_GPU"] = 1
    writes.import_document(ConfigKind.POOL, {"pools": {"inference": documents["inference"]}}, author=staff,
                            description="Inference jobs get one GPU by default")

    backend = Backend.objects.get(name="default")
    # By hand, with the nodes and snapshots below: the module's docstring says why (no cluster, 24 hours past).
    backend.last_sync_at = now
    backend.save(update_fields=["last_sync_at"])
    pools = {pool.name: pool for pool in Pool.objects.all()}
    specs = node_specs()
    nodes = Node.objects.bulk_create(build_node(backend, index, name, product, memberships, now)
                                     for index, (name, product, memberships) in enumerate(specs))
    NodeMembership.objects.bulk_create(NodeMembership(node=node, pool=pools[pool], platforms=platforms)
                                       for node, (_, _, memberships) in zip(nodes, specs, strict=True)
                                       for pool, platforms in memberships.items())
    snapshots = []
    for phase, pool in enumerate(pools.values()):
        members = list(Node.objects.filter(memberships__pool=pool))
        total, now_used = sum(node.gpu_total for node in members), sum(node.gpu_used for node in members)
        unhealthy = sum(node.gpu_unhealthy for node in members)

        def wave(step, phase=phase):
            return 0.22 * math.sin(2 * math.pi * step / 144 + phase) + 0.05 * math.sin(step * 1.7)

        for step in range(144):  # every 10 minutes over the last 24 hours, ending at today's figures
            used = min(total - unhealthy, max(0, round(now_used + total * (wave(step) - wave(143)))))
            snapshots.append(UsageSnapshot(pool=pool, at=now - dt.timedelta(minutes=10 * (143 - step)),
                                           node_count=len(members), gpu_total=total, gpu_used=used,
                                           gpu_free=total - unhealthy - used, gpu_unhealthy=unhealthy))
    UsageSnapshot.objects.bulk_create(snapshots)
    return pools
