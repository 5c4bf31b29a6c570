"""Pod logs for the stand-in API server (tests/kube_standin.py): what each container wrote, as the kubelet keeps it,
and the pods/log subresource's parameters read as a real API server reads them (container, tailLines, sinceTime,
limitBytes, timestamps, previous, follow), with its 400s in its own words. Tests append lines (`append_log`),
restart a container (`restart_container`: its log becomes the `previous` one) and end it (`end_log`: followers'
streams end, as the kubelet's do when the container exits)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


class LogRefused(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class ContainerLog:
    lines: list[tuple[float, bytes]] = field(default_factory=list)  # (seconds since the epoch, line with its \n)
    previous: list[tuple[float, bytes]] | None = None
    ended: bool = False


def stamp(seconds: float) -> str:
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{moment.microsecond * 1000:09d}Z"


def _since(text: str) -> float:
    """sinceTime as the API server parses it: RFC 3339, kept to the second (metav1.Time)."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise LogRefused(400, f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse') from None
    if moment.tzinfo is None:
        raise LogRefused(400, f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": missing time zone')
    return float(int(moment.timestamp()))


def _count(query: dict[str, str], key: str, name: str) -> int | None:
    if key not in query:
        return None
    try:
        value = int(query[key])
    except ValueError:
        raise LogRefused(400, f'strconv.ParseInt: parsing "{query[key]}": invalid syntax') from None
    if value < 0 or (key == "limitBytes" and value == 0):
        least = "1" if key == "limitBytes" else "0"
        raise LogRefused(422, f'PodLogOptions "{name}" is invalid: {key}: Invalid value: {value}: must be '
                              f'greater than or equal to {least}')
    return value


def containers_of(pod: dict[str, Any]) -> list[str]:
    named = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    return named or [c.get("name", "") for c in (pod.get("status") or {}).get("containerStatuses") or []]


def choose(pod: dict[str, Any], query: dict[str, str], logs: dict[str, ContainerLog]) -> str:
    """The container a query reads, or the API server's 400."""
    name = pod["metadata"]["name"]
    containers = containers_of(pod)
    container = query.get("container") or (containers[0] if len(containers) == 1 else "")
    if not container:
        raise LogRefused(400, f"a container name must be specified for pod {name}, choose one of: "
                              f"[{' '.join(containers)}]")
    if container not in containers:
        raise LogRefused(400, f"container {container} is not valid for pod {name}")
    log = logs.get(container)
    if query.get("previous", "").lower() in ("true", "1"):
        if log is None or log.previous is None:
            raise LogRefused(400, f'previous terminated container "{container}" in pod "{name}" not found')
    elif log is None:
        statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
        waiting = ((statuses.get(container) or {}).get("state") or {}).get("waiting")
        if waiting or not statuses:
            reason = (waiting or {}).get("reason") or "ContainerCreating"
            raise LogRefused(400, f'container "{container}" in pod "{name}" is waiting to start: {reason}')
    return container


def selected(log: ContainerLog | None, query: dict[str, str], name: str) -> list[tuple[float, bytes]]:
    """The lines a query asks for now (tailLines, sinceTime), oldest first."""
    previous = query.get("previous", "").lower() in ("true", "1")
    lines = list((log.previous if previous else log.lines) or []) if log else []
    if query.get("sinceTime"):
        since = _since(query["sinceTime"])
        lines = [line for line in lines if line[0] >= since]
    tail = _count(query, "tailLines", name)
    if tail is not None:
        lines = lines[len(lines) - tail:] if tail else []
    return lines


def render(lines: list[tuple[float, bytes]], query: dict[str, str]) -> bytes:
    if query.get("timestamps", "").lower() in ("true", "1"):
        return b"".join(stamp(at).encode() + b" " + line for at, line in lines)
    return b"".join(line for _, line in lines)


def limit(data: bytes, query: dict[str, str], name: str) -> bytes:
    most = _count(query, "limitBytes", name)
    return data if most is None else data[:most]


def now() -> float:
    return time.time()
