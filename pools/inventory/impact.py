"""What a configuration change does to the fleet: the nodes and GPUs that change pools, and the nodes that
become SHARED with pools they were not shared with before. Pure Python over two placements of the same nodes
(before and after the change), each node as (its pools, its GPUs); the write path measures both.
"""

import hashlib
import json
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

DEFAULT_POOL = "default"

# node key -> (the node's pools, its GPUs)
Placement = Mapping[Hashable, tuple[Iterable[str], int]]


@dataclass(frozen=True)
class PoolChange:
    pool: str
    nodes_before: int
    nodes_after: int
    gpus_before: int
    gpus_after: int
    shared_nodes: int = 0  # nodes of the pool, after the change, shared with a pool they were not shared with
    shared_gpus: int = 0
    shared_with: tuple[str, ...] = ()

    @property
    def moved(self) -> bool:
        return (self.nodes_before, self.gpus_before) != (self.nodes_after, self.gpus_after) or bool(self.shared_nodes)

    def line(self) -> str:
        """"pool training: +88 nodes, +512 GPUs (40 -> 128 nodes, 320 -> 832 GPUs); 88 nodes / 512 GPUs become
        SHARED with a, b" """
        nodes, gpus = self.nodes_after - self.nodes_before, self.gpus_after - self.gpus_before
        if nodes or gpus:
            parts = [f"{_signed(nodes, 'node')}, {_signed(gpus, 'GPU')} ({self.nodes_before:,} -> "
                     f"{self.nodes_after:,} nodes, {self.gpus_before:,} -> {self.gpus_after:,} GPUs)"]
        else:
            parts = [f"keeps {_count(self.nodes_after, 'node')}, {_count(self.gpus_after, 'GPU')}"]
        if self.shared_nodes:
            parts.append(f"{_count(self.shared_nodes, 'node')} / {_count(self.shared_gpus, 'GPU')} become SHARED "
                         f"with {', '.join(self.shared_with)}")
        return f"pool {self.pool}: {'; '.join(parts)}"


@dataclass(frozen=True)
class Impact:
    nodes_moved: int = 0  # nodes whose set of pools changes
    gpus_moved: int = 0
    nodes_shared: int = 0  # nodes that become SHARED with a pool they were not shared with before
    gpus_shared: int = 0
    pools: tuple[PoolChange, ...] = ()

    @property
    def moves_nodes(self) -> bool:
        return bool(self.nodes_moved)

    def headline(self) -> str:
        if not self.nodes_moved:
            return "No node changes pools."
        text = f"{_count(self.nodes_moved, 'node')} ({_count(self.gpus_moved, 'GPU')}) change pools"
        if self.nodes_shared:
            text += f"; {_count(self.nodes_shared, 'node')} ({_count(self.gpus_shared, 'GPU')}) become SHARED"
        return text + "."

    def lines(self) -> list[str]:
        return [change.line() for change in self.pools]

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "summary": self.headline(), "lines": self.lines()}

    def token(self) -> str:
        """Names this exact impact: a confirmation given for it does not carry over to a different one."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def visible(self, may_see: Callable[[str], bool]) -> "Impact":
        """The impact as someone who may see only some pools may read it: lines of other pools are left out and
        their names, among those a node becomes shared with, counted instead ("2 other pools")."""
        changes = []
        for change in self.pools:
            if not may_see(change.pool):
                continue
            shown = tuple(name for name in change.shared_with if may_see(name))
            hidden = len(change.shared_with) - len(shown)
            if hidden:
                shown += (f"{hidden} other pool{'' if hidden == 1 else 's'}",)
            changes.append(PoolChange(**{**asdict(change), "shared_with": shown}))
        return Impact(self.nodes_moved, self.gpus_moved, self.nodes_shared, self.gpus_shared, tuple(changes))


def placement_impact(before: Placement, after: Placement) -> Impact:
    """The impact of going from `before` to `after` (nodes present in only one of them are ignored: a
    configuration change neither adds nor removes nodes)."""
    counts: dict[str, list[int]] = {}  # pool -> [nodes before, nodes after, GPUs before, GPUs after]
    shared: dict[str, list] = {}  # pool -> [nodes, GPUs, partner names]
    nodes_moved = gpus_moved = nodes_shared = gpus_shared = 0
    for key, (pools_after, gpus) in after.items():
        if key not in before:
            continue
        old, new = frozenset(before[key][0]), frozenset(pools_after)
        for pool in old:
            _figures(counts, pool)[0] += 1
            counts[pool][2] += gpus
        for pool in new:
            _figures(counts, pool)[1] += 1
            counts[pool][3] += gpus
        if old == new:
            continue
        nodes_moved += 1
        gpus_moved += gpus
        newly_shared = False
        for pool in new - {DEFAULT_POOL}:
            partners = (new - {pool}) - (old - {pool} if pool in old else frozenset())
            if partners:
                newly_shared = True
                entry = shared.setdefault(pool, [0, 0, set()])
                entry[0] += 1
                entry[1] += gpus
                entry[2] |= partners
        if newly_shared and len(new) > 1:
            nodes_shared += 1
            gpus_shared += gpus
    changes = []
    for pool in sorted(counts):
        nodes_before, nodes_after, gpus_before, gpus_after = counts[pool]
        nodes, gpus, partners = shared.get(pool, (0, 0, set()))
        change = PoolChange(pool, nodes_before, nodes_after, gpus_before, gpus_after, nodes, gpus,
                            tuple(sorted(partners)))
        if change.moved:
            changes.append(change)
    # The pools that grow come first: that is where a paste goes wrong.
    changes.sort(key=lambda change: (-(change.nodes_after - change.nodes_before), -change.shared_nodes, change.pool))
    return Impact(nodes_moved, gpus_moved, nodes_shared, gpus_shared, tuple(changes))


def _figures(counts: dict[str, list[int]], pool: str) -> list[int]:
    return counts.setdefault(pool, [0, 0, 0, 0])


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _signed(number: int, noun: str) -> str:
    return f"{'+' if number >= 0 else '-'}{_count(abs(number), noun)}"
