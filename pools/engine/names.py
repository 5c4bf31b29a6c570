"""Names and refusals shared by every document and model: the name rule, `ConfigError` (a refused
input, naming its field) and the JSON reader that reports line and column."""

import json
import re
from typing import Any

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


def parse_json(text: str | bytes, source: str = "document") -> Any:
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{source} is not UTF-8 text (byte {exc.start})") from None
    if not text.strip():
        raise ConfigError(f"{source} is empty; expected a JSON object")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source} is malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            field=f"line {exc.lineno}, column {exc.colno}",
        ) from None


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ConfigError(
            f"{what} name {name!r} is invalid: names start with a letter, end with a letter or digit, "
            "and use only letters, digits, '_', '.' and '-'",
            field="name",
        )
    return name
