"""The user's container environment, as far as secrets and GPUs are concerned (pure: no Django).

- GPUs come only through the quota: the NVIDIA container runtime honours `NVIDIA_VISIBLE_DEVICES` (CUDA images set
  it to `all` themselves), so a user may not set it, nor any other `NVIDIA_*` or `CUDA_VISIBLE_DEVICES`, and every
  container of a pod that asks for no GPU gets `NVIDIA_VISIBLE_DEVICES=void` from us.
- Credentials need not be stored with the request: `env_from_secret: {NAME: "secret/key"}` becomes a
  `valueFrom.secretKeyRef` on a Secret of the project's namespace.
- Values of env names that look like credentials are masked for every viewer but the submitter.
"""

import re
from typing import Any

from pools.engine import ConfigError

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A Secret's name (a DNS subdomain) and one of its keys, as the API server checks them.
SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")
CREDENTIAL = re.compile(r"TOKEN|SECRET|PASSWORD|_KEY$", re.IGNORECASE)
MASK = "********"
VOID = "void"


def reserved(name: str) -> bool:
    """Names only the GPU quota may set."""
    upper = name.upper()
    return upper.startswith("NVIDIA_") or upper == "CUDA_VISIBLE_DEVICES"


def check_env_names(names, field: str) -> None:
    for name in names:
        if reserved(name):
            raise ConfigError(f"{field}.{name}: GPUs are given through the quota (resources.gpu), never through "
                              "NVIDIA_* or CUDA_VISIBLE_DEVICES; remove it", field=f"{field}.{name}")


def check_env_from_secret(value: dict[str, str], env: dict[str, str], field: str = "env_from_secret") -> None:
    """`{NAME: "secret/key"}`: NAME an environment variable name not also in `env`, secret a Secret's name and key one
    of its keys."""
    check_env_names(value, field)
    for name, ref in value.items():
        where = f"{field}.{name}"
        if not ENV_NAME.fullmatch(name):
            raise ConfigError(f"{where}: not an environment variable name (letters, digits and _, not starting "
                              "with a digit)", field=where)
        if name in env:
            raise ConfigError(f"{where}: also set in env; give it in one of them", field=where)
        secret, sep, key = ref.partition("/")
        if not sep or not SECRET_NAME.fullmatch(secret) or not SECRET_KEY.fullmatch(key):
            raise ConfigError(f"{where}: {ref!r} is not \"secret/key\" (a Secret of the project's namespace: "
                              "lowercase letters, digits, '-' and '.'; then one of its keys)", field=where)


def secret_env(value: dict[str, str]) -> list[dict[str, Any]]:
    """The container env entries reading `env_from_secret` from Secrets."""
    entries = []
    for name, ref in value.items():
        secret, _, key = ref.partition("/")
        entries.append({"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    return entries


def _quantity_positive(value: Any) -> bool:
    text = str(value).strip()
    return bool(text) and text not in ("0", "0.0", "0m")


def asks_for_gpu(spec: dict) -> bool:
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = container.get("resources") or {}
        for part in ("requests", "limits"):
            amount = (resources.get(part) or {}).get("nvidia.com/gpu")
            if amount is not None and _quantity_positive(amount):
                return True
    return False


def void_gpus(spec: dict) -> None:
    """A pod that asks for no GPU: every container sees none, whatever its image sets."""
    if asks_for_gpu(spec):
        return
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        env = [item for item in container.get("env") or [] if item.get("name") != "NVIDIA_VISIBLE_DEVICES"]
        container["env"] = [*env, {"name": "NVIDIA_VISIBLE_DEVICES", "value": VOID}]


# ---- masking -------------------------------------------------------------------------------------------------

def looks_like_credential(name: Any) -> bool:
    return isinstance(name, str) and CREDENTIAL.search(name) is not None


def mask_mapping(values: dict | None) -> dict:
    return {k: MASK if looks_like_credential(k) and v not in (None, "") else v for k, v in (values or {}).items()}


def mask_env_list(entries: list | None) -> list:
    masked = []
    for item in entries or []:
        if isinstance(item, dict) and looks_like_credential(item.get("name")) and "value" in item:
            item = {**item, "value": MASK}
        masked.append(item)
    return masked


def mask_pod_template(template: dict | None) -> dict:
    """A copy whose containers' credential-looking env values are masked."""
    if not isinstance(template, dict):
        return template or {}
    spec = template.get("spec")
    if not isinstance(spec, dict):
        return template
    copy = {**template, "spec": dict(spec)}
    for key in ("initContainers", "containers"):
        if isinstance(spec.get(key), list):
            copy["spec"][key] = [{**c, "env": mask_env_list(c.get("env"))} if isinstance(c, dict) and c.get("env")
                                 else c for c in spec[key]]
    return copy
