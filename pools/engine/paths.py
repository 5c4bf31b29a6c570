"""Location strings such as ``spec.containers[0].resources.limits.cpu``."""

import re

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def join_path(path: str, key: object) -> str:
    if isinstance(key, int) and not isinstance(key, bool):
        return f"{path}[{key}]"
    key = str(key)
    # Keys like "nvidia.com/gpu" would read as nested fields if dotted.
    if not _PLAIN_KEY.fullmatch(key):
        return f"{path}[{key!r}]"
    return f"{path}.{key}" if path else key
