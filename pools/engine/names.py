"""Names and refusals shared by every document and model: the name rule, `ConfigError` (a refused
input, naming its field); the JSON reader is `pools.engine.jsonread`."""

import re
from typing import Any

# `$` keeps the pattern valid in OpenAPI (ECMA regex, where `$` is the end); in Python `$` also matches before
# a trailing newline, so names are checked with `fullmatch`: `training\n` is not `training`.
NAME_PATTERN = r"^[a-zA-Z]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$"
_NAME_RE = re.compile(NAME_PATTERN)


class ConfigError(ValueError):
    """A refused document. `field` is the dotted location of the offending value, if any."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ConfigError(
            f"{what} name {name!r} is invalid: names start with a letter, end with a letter or digit, "
            "and use only letters, digits, '_', '.' and '-'",
            field="name",
        )
    return name
