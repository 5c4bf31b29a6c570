"""The effective configuration of a platform: its pool's templates, variables and rules merged with
its own. Pure Python; `config show POOL NAME --effective`, the admin panel and the import checks
all read it from here."""

from collections.abc import Mapping
from typing import Any

from pools.config.documents import PoolDoc
from pools.engine import merge_all, render


def ordered_unique(*lists: list[str]) -> list[str]:
    return list(dict.fromkeys(name for names in lists for name in names))


def effective_platform(
    pool: PoolDoc, platform_name: str, templates: Mapping[str, dict], validations: Mapping[str, list]
) -> dict[str, Any]:
    """Raises KeyError for a missing template or validation and RenderError when the node
    selector or tolerations use a variable the pool does not define."""
    platform = pool.platforms[platform_name]
    template_names = ordered_unique(pool.common_pod_template, platform.override_pod_template)
    pod_template = merge_all(templates[name] for name in template_names)
    variables = {**pool.common_default_variables, **platform.default_variables}
    spec = pod_template.get("spec") or {}
    path = f"platforms.{platform_name}.pod_template.spec"
    selector = {**(spec.get("nodeSelector") or {}), **pool.node_selector}
    node_selector = render(selector, variables, f"{path}.nodeSelector")
    tolerations = render(spec.get("tolerations") or [], variables, f"{path}.tolerations")
    rule_names = ordered_unique(pool.common_resource_validations, platform.resource_validations)
    return {
        "pod_template": pod_template,
        "variables": variables,
        "node_selector": node_selector,
        "tolerations": tolerations,
        "resource_validations": [rule for name in rule_names for rule in validations[name]],
    }


def effective_pool(pool: PoolDoc, templates: Mapping[str, dict], validations: Mapping[str, list]) -> dict:
    return {
        "platforms": {
            name: effective_platform(pool, name, templates, validations) for name in pool.platforms
        },
    }
