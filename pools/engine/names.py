"""Names and refusals shared by every document and model: the name rule, `ConfigError` (a refused
input, naming its field); the JSON reader is `pools.engine.jsonread`."""

import re
from typing import Any

# `$` keeps the pattern valid in OpenAPI (ECMA regex, where `$` is the end); in Python `$` also matches before
# a trailing newline, so names are checked with `fullmatch`: `training\n` is not `training`.
NAME_PATTERN = r"^[a-zA-Z]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?$"
_NAME_RE = re.compile(NAME_PATTERN)
NAME_MAX_LENGTH = 128  # every name column (pools.models.names.name_field); checked here, before the database


class ConfigError(ValueError):
    """A refused document. `field` is the dotted location of the offending value, if any."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


def check_name(name: Any, what: str, field: str = "name") -> str:
    if isinstance(name, str) and len(name) > NAME_MAX_LENGTH:
        raise ConfigError(f"{what} name {name[:40]!r}... is {len(name)} characters long; at most {NAME_MAX_LENGTH}",
                          field=field)
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise ConfigError(
            f"{what} name {name!r} is invalid: names start with a letter, end with a letter or digit, "
            "and use only letters, digits, '_', '.' and '-'",
            field=field,
        )
    return name
