"""Which pools and platforms a node belongs to, from its labels and taints (docs/concepts.md,
"Backends, pools and platforms").

A cluster of thousands of nodes is matched against hundreds of selectors on every sync, so selectors are
compiled once: an index from one (key, value) pair of each selector to the selector finds the few
candidates a node's labels can satisfy, and nodes whose relevant labels and taints are identical share
one answer from a cache.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DEFAULT_POOL = "default"
RESERVED = "RESERVED"
SHARED = "SHARED"
UNUSED = "UNUSED"

# Kubernetes adds these for node conditions and cordons; they say how a node is, not which work it is for.
CONDITION_TAINT_PREFIX = "node.kubernetes.io/"
REPELLING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})

_CACHE_LIMIT = 65_536


@dataclass(frozen=True)
class PlatformSelector:
    pool: str
    platform: str
    node_selector: Mapping[str, str] = field(default_factory=dict, hash=False)
    tolerations: Sequence[Mapping[str, Any]] = field(default_factory=list, hash=False)


@dataclass(frozen=True)
class PoolSelector:
    name: str
    node_selector: Mapping[str, str] = field(default_factory=dict, hash=False)
    platforms: Sequence[PlatformSelector] = field(default_factory=list, hash=False)


@dataclass(frozen=True, slots=True)
class Membership:
    pools: tuple[str, ...]
    platforms: tuple[str, ...]
    sharing: str


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """True when any toleration tolerates the taint (Kubernetes' Toleration.ToleratesTaint)."""
    return any(_tolerates(toleration, taint) for toleration in tolerations)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def repelling_taints(taints: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str, str], ...]:
    """The taints a platform must tolerate, as sorted (key, value, effect) triples."""
    found = set()
    for taint in taints:
        key = taint.get("key") or ""
        effect = taint.get("effect") or ""
        if effect in REPELLING_EFFECTS and not key.startswith(CONDITION_TAINT_PREFIX):
            found.add((key, taint.get("value") or "", effect))
    return tuple(sorted(found))


class CompiledSelectors:
    """Pool and platform selectors prepared for matching many nodes; build with `compile_selectors`."""

    def __init__(self, pools: Iterable[PoolSelector], *, default_pool: str = DEFAULT_POOL):
        self.default_pool = default_pool
        self._pool_names: list[str] = []
        self._pool_selected: list[bool] = []  # the pool has its own non-empty node selector
        self._platform_names: list[str] = []
        self._platform_pool: list[int] = []
        self._platform_tolerations: list[list[Mapping[str, Any]]] = []
        self._default_platforms: list[int] = []

        # Selector ids: ("pool", index) or ("platform", index), each with its required label pairs.
        selectors: list[tuple[str, int, frozenset]] = []
        seen = set()
        for pool in pools:
            if pool.name in seen:
                continue
            seen.add(pool.name)
            pool_index = len(self._pool_names)
            self._pool_names.append(pool.name)
            is_default = pool.name == default_pool
            self._pool_selected.append(bool(pool.node_selector) and not is_default)
            if self._pool_selected[pool_index]:
                selectors.append(("pool", pool_index, _pairs(pool.node_selector)))
            for platform in pool.platforms:
                platform_index = len(self._platform_names)
                self._platform_names.append(f"{pool.name}/{platform.platform}")
                self._platform_pool.append(pool_index)
                self._platform_tolerations.append(list(platform.tolerations or ()))
                if is_default:
                    self._default_platforms.append(platform_index)
                selectors.append(("platform", platform_index, _pairs(platform.node_selector)))

        self._selectors = selectors
        self._keys = frozenset(key for _kind, _index, pairs in selectors for key, _value in pairs)
        # Anchor each selector on its rarest pair, so a node's labels reach as few candidates as possible.
        popularity: dict[tuple[str, str], int] = {}
        for _kind, _index, pairs in selectors:
            for pair in pairs:
                popularity[pair] = popularity.get(pair, 0) + 1
        self._always: list[int] = []
        self._by_pair: dict[tuple[str, str], list[int]] = {}
        for selector_id, (_kind, _index, pairs) in enumerate(selectors):
            if not pairs:
                self._always.append(selector_id)
            else:
                anchor = min(pairs, key=lambda pair: (popularity[pair], pair))
                self._by_pair.setdefault(anchor, []).append(selector_id)
        self._tolerated: dict[tuple, frozenset[int]] = {}
        self._cache: dict[tuple, Membership] = {}

    def membership(self, labels: Mapping[str, str] | None, taints: Iterable[Mapping[str, Any]] = ()) -> Membership:
        labels = labels or {}
        relevant = frozenset((key, labels[key]) for key in self._keys.intersection(labels))
        repelling = repelling_taints(taints or ())
        cache_key = (relevant, repelling)
        found = self._cache.get(cache_key)
        if found is None:
            found = self._compute(relevant, repelling)
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[cache_key] = found
        return found

    def _compute(self, relevant: frozenset, repelling: tuple) -> Membership:
        candidates = list(self._always)
        for pair in relevant:
            candidates.extend(self._by_pair.get(pair, ()))
        selected_pools: set[int] = set()
        matched_platforms: list[int] = []
        for selector_id in candidates:
            kind, index, pairs = self._selectors[selector_id]
            if not pairs <= relevant:
                continue
            if kind == "pool":
                selected_pools.add(index)
            else:
                matched_platforms.append(index)
        if repelling:
            tolerated = self._tolerating(repelling)
            matched_platforms = [index for index in matched_platforms if index in tolerated]

        pools = set(selected_pools)
        platforms = []
        for index in matched_platforms:
            pool_index = self._platform_pool[index]
            if pool_index in selected_pools:
                platforms.append(index)
            elif not self._pool_selected[pool_index] and self._pool_names[pool_index] != self.default_pool:
                pools.add(pool_index)
                platforms.append(index)

        if not pools:
            # The default pool's own platforms still say which of its nodes they can place work on.
            default_platforms = set(self._default_platforms)
            return Membership(
                pools=(self.default_pool,),
                platforms=tuple(self._platform_names[i] for i in sorted(set(matched_platforms) & default_platforms)),
                sharing=UNUSED,
            )
        return Membership(
            pools=tuple(self._pool_names[i] for i in sorted(pools)),
            platforms=tuple(self._platform_names[i] for i in sorted(platforms)),
            sharing=RESERVED if len(pools) == 1 else SHARED,
        )

    def _tolerating(self, repelling: tuple) -> frozenset[int]:
        tolerated = self._tolerated.get(repelling)
        if tolerated is None:
            taints = [{"key": key, "value": value, "effect": effect} for key, value, effect in repelling]
            tolerated = frozenset(
                index
                for index, tolerations in enumerate(self._platform_tolerations)
                if all(tolerates(tolerations, taint) for taint in taints)
            )
            self._tolerated[repelling] = tolerated
        return tolerated


def compile_selectors(pools: Iterable[PoolSelector], *, default_pool: str = DEFAULT_POOL) -> CompiledSelectors:
    return CompiledSelectors(pools, default_pool=default_pool)


def node_membership(
    labels: Mapping[str, str] | None,
    taints: Iterable[Mapping[str, Any]] | None,
    pools: Iterable[PoolSelector] | CompiledSelectors,
    *,
    default_pool: str = DEFAULT_POOL,
) -> Membership:
    """Pools and platforms of one node. Pass `compile_selectors(...)` when matching many nodes."""
    if not isinstance(pools, CompiledSelectors):
        pools = compile_selectors(pools, default_pool=default_pool)
    elif pools.default_pool != default_pool:
        raise ValueError(f"selectors were compiled for default pool {pools.default_pool!r}, not {default_pool!r}")
    return pools.membership(labels, taints or ())


def _pairs(selector: Mapping[str, Any] | None) -> frozenset[tuple[str, str]]:
    return frozenset((str(key), value) for key, value in (selector or {}).items())
