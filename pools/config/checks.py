"""Rules that span objects: references between pools, templates, validations and backends.

Pure Python: callers pass what the database holds as plain mappings. Field rules of a single
document live in `pools.documents`.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pools.config.documents import PoolDoc
from pools.config.effective import effective_platform, ordered_unique
from pools.engine import ConfigError, EngineError, NodeResources, Rule, check_rule

KAI = "kai"
# Operands are rendered against a stand-in node so that import catches rules that can never be
# evaluated; the comparison's outcome is irrelevant here.
_PROBE_NODE = NodeResources("probe", cpu="1", gpu="1", memory="1Gi", storage="1Gi")


@dataclass
class Catalog:
    templates: Mapping[str, dict] = field(default_factory=dict)
    validations: Mapping[str, list] = field(default_factory=dict)
    # backend name -> scheduler; a backend missing here will be created with the default scheduler.
    backends: Mapping[str, str] = field(default_factory=dict)


def referenced_names(pool: PoolDoc) -> tuple[set[str], set[str]]:
    templates, validations = set(pool.common_pod_template), set(pool.common_resource_validations)
    for platform in pool.platforms.values():
        templates.update(platform.override_pod_template)
        validations.update(platform.resource_validations)
    return templates, validations


def _check_references(pool: PoolDoc, catalog: Catalog) -> None:
    places = [
        ("common_pod_template", pool.common_pod_template, catalog.templates, "POD_TEMPLATE"),
        ("common_resource_validations", pool.common_resource_validations, catalog.validations, "RESOURCE_VALIDATION"),
    ]
    for name, platform in pool.platforms.items():
        places += [
            (f"platforms.{name}.override_pod_template", platform.override_pod_template, catalog.templates,
             "POD_TEMPLATE"),
            (f"platforms.{name}.resource_validations", platform.resource_validations, catalog.validations,
             "RESOURCE_VALIDATION"),
        ]
    for where, names, known, kind in places:
        absent = [name for name in names if name not in known]
        if absent:
            raise ConfigError(
                f"Pool {pool.name!r} refused: {where} references {kind} configurations that do not exist: "
                f"{', '.join(absent)} (create them first with `config update {kind} NAME --file F`)",
                field=f"{pool.name}.{where}",
            )


def check_pool(pool: PoolDoc, catalog: Catalog) -> None:
    _check_references(pool, catalog)
    if pool.topology_keys and catalog.backends.get(pool.backend, "default") != KAI:
        scheduler = catalog.backends.get(pool.backend, "default")
        raise ConfigError(
            f"Pool {pool.name!r} refused: topology_keys need a backend scheduled by KAI Scheduler, "
            f"but backend {pool.backend!r} uses the {scheduler!r} scheduler",
            field=f"{pool.name}.topology_keys",
        )
    for platform_name in pool.platforms:
        try:
            effective = effective_platform(pool, platform_name, catalog.templates, catalog.validations)
        except EngineError as exc:
            raise ConfigError(f"Pool {pool.name!r} refused: {exc}", field=f"{pool.name}.{exc.path}") from None
        _check_rules_render(pool, platform_name, effective["variables"], catalog)


def _check_rules_render(pool: PoolDoc, platform_name: str, variables: dict, catalog: Catalog) -> None:
    platform = pool.platforms[platform_name]
    probe = {**variables, **_PROBE_NODE.tokens()}
    for name in ordered_unique(pool.common_resource_validations, platform.resource_validations):
        for index, rule in enumerate(catalog.validations[name]):
            try:
                check_rule(Rule.from_dict(rule), probe)
            except EngineError as exc:
                raise ConfigError(
                    f"Pool {pool.name!r} refused: platform {platform_name!r}, resource validation "
                    f"{name!r} rule {index} ({rule['operator']}) cannot be evaluated with the pool's "
                    f"variables: {exc.message}",
                    field=f"{pool.name}.platforms.{platform_name}.default_variables",
                ) from None


def check_pools(pools: Mapping[str, PoolDoc], catalog: Catalog) -> None:
    for pool in pools.values():
        check_pool(pool, catalog)


def check_topology_labels(pool: str, topology_keys: Sequence[Mapping[str, str]], nodes: int,
                          carried: Callable[[str], bool]) -> str:
    """A KAI Topology level whose node label no node of the pool carries places nothing: refuse it. `nodes` is
    how many nodes the pool has, `carried(label)` whether one of them carries the label. A pool without nodes
    (its backend not synced yet) cannot be checked: accepted, with the warning returned ("" otherwise)."""
    if not nodes:
        keys = ", ".join(f'"{item["key"]}" ({item["label"]})' for item in topology_keys)
        return (f"Pool {pool} has no nodes yet, so its topology keys {keys} could not be checked against node "
                "labels.")
    for item in topology_keys:
        if not carried(item["label"]):
            raise ConfigError(
                f'Pool {pool}: topology key "{item["key"]}" uses node label {item["label"]}, which no node of the '
                f"pool carries ({nodes} node{'' if nodes == 1 else 's'} checked).",
                field=f"{pool}.topology_keys",
            )
    return ""
