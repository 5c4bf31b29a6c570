"""The query of a log request, as the API and the page both read it (`?replica=&attempt=&container=&tail=&follow=
&previous=&since=&format=&download=`): each parameter checked, a 400 naming the field, never a 500; and who may read
a workload's logs (whoever may read its request)."""

import re
from dataclasses import dataclass

from django.conf import settings

from pools.engine import ConfigError
from scheduling.decisions import log_lines

CONTAINER = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
TRUE, FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")
MOST_PARAM_CHARS = 128  # no parameter of ours is longer; a longer one is refused before it is parsed
REFUSED = "Only its submitter, the members of its project (other than default) and admins may read its logs."

@dataclass(frozen=True)
class LogParams:
    replica: int = 0
    attempt: int | None = None
    container: str = ""
    tail: int | None = None
    follow: bool = False
    previous: bool = False
    since: str = ""
    json: bool = False
    download: bool = False


def _number(query, name: str, low: int, high: int) -> int | None:
    text = query.get(name, "")
    if text == "":
        return None
    if not (text.isascii() and text.isdigit()) or not low <= int(text) <= high:
        raise ConfigError(f"{name}: a whole number from {low} to {high}", field=name)
    return int(text)


def _flag(query, name: str) -> bool:
    text = query.get(name, "").lower()
    if text not in TRUE + FALSE:
        raise ConfigError(f"{name}: 1 or 0 (true or false)", field=name)
    return text in TRUE


def log_params(query) -> LogParams:
    """The query's log parameters, each checked (a 400 naming the field, never a 500)."""
    for key, value in query.items():
        if len(value) > MOST_PARAM_CHARS:
            raise ConfigError(f"{key}: at most {MOST_PARAM_CHARS} characters", field=key)
    container = query.get("container", "")
    if container and not CONTAINER.match(container):
        raise ConfigError("container: a container name (lowercase letters, digits and '-', at most 63)",
                          field="container")
    since = query.get("since", "")
    try:
        log_lines.parse(since)
    except log_lines.BadToken as exc:
        raise ConfigError(str(exc), field="since") from None
    shape = query.get("format", "text")
    if shape not in ("text", "json"):
        raise ConfigError("format: text or json", field="format")
    return LogParams(replica=_number(query, "replica", 0, 100_000) or 0, attempt=_number(query, "attempt", 1, 10_000),
                     container=container, tail=_number(query, "tail", 0, settings.OSMO_LOG_TAIL_MAX),
                     follow=_flag(query, "follow"), previous=_flag(query, "previous"), since=since,
                     json=shape == "json", download=_flag(query, "download"))
