"""Pod logs of the simulated cluster: plausible training output, a pure function of the pod and the time, so every
process of the demo reads the same lines. A running container writes a line every LINE_SECONDS from its start; a
terminated one stops at its finish with a last line naming its exit code. Errors are the API server's words."""

import calendar
import time
from typing import Any

from ..interface import ClusterError, LogQuery, NotFound
from .randomness import stable_hash

LINE_SECONDS = 5.0
MOST_LINES = 20_000  # a long-running pod's log is its last MOST_LINES lines (the kubelet rotates too)


def _seconds(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def stamp(seconds: float) -> str:
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1e9):09d}Z"


def container_state(pod: dict[str, Any], query: LogQuery) -> tuple[str, dict[str, Any]]:
    """The container to read and its state; the API server's 400s for a wrong one."""
    name = pod.get("metadata", {}).get("name", "")
    containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
    container = query.container or (containers[0] if len(containers) == 1 else "")
    if not container:
        raise ClusterError(f"a container name must be specified for pod {name}, choose one of: "
                           f"[{' '.join(containers)}]", 400)
    if container not in containers:
        raise ClusterError(f"container {container} is not valid for pod {name}", 400)
    statuses = {s.get("name"): s for s in (pod.get("status") or {}).get("containerStatuses") or []}
    state = (statuses.get(container) or {}).get("state") or {}
    if query.previous:
        raise ClusterError(f'previous terminated container "{container}" in pod "{name}" not found', 400)
    if "running" not in state and "terminated" not in state:
        reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
        raise ClusterError(f'container "{container}" in pod "{name}" is waiting to start: {reason}', 400)
    return container, state


def lines(pod: dict[str, Any], query: LogQuery, now: float) -> list[tuple[float, bytes]]:
    """(time, line) of everything the container wrote up to `now`, oldest first, after the query's filters."""
    name = pod.get("metadata", {}).get("name", "")
    container, state = container_state(pod, query)
    running = state.get("running") or state.get("terminated") or {}
    start = _seconds(running.get("startedAt")) or now
    terminated = state.get("terminated")
    end = min(now, _seconds(terminated.get("finishedAt")) or now) if terminated else now
    count = max(0, int((end - start) // LINE_SECONDS))
    first = max(0, count - MOST_LINES)
    found: list[tuple[float, bytes]] = []
    if first == 0:
        found.append((start, f"[{container}] starting on {(pod.get('spec') or {}).get('nodeName', '?')} "
                             f"(pod {name})\n".encode()))
    seed = stable_hash(name)
    for step in range(first + 1, count + 1):
        loss = 2.5 / (1 + step / 50) + (stable_hash(f"{name}:{step}") % 1000) / 20_000
        throughput = 900 + (seed + step * 7919) % 200
        found.append((start + step * LINE_SECONDS,
                      f"step {step:6d}  loss {loss:.4f}  {throughput} samples/s\n".encode()))
    if terminated:
        found.append((end, f"[{container}] exited with code {terminated.get('exitCode')}\n".encode()))
    if query.since_time:
        since = _seconds(query.since_time)
        if since is not None:
            found = [item for item in found if item[0] >= since]
    if query.tail_lines is not None:
        found = found[-query.tail_lines:] if query.tail_lines > 0 else []
    return found


def render(found: list[tuple[float, bytes]], query: LogQuery) -> bytes:
    data = b"".join((stamp(at).encode() + b" " + line) if query.timestamps else line for at, line in found)
    return data[:query.limit_bytes] if query.limit_bytes is not None else data


def pod_or_404(pods: dict[str, str], namespace: str, name: str) -> str:
    text = pods.get(f"{namespace}/{name}")
    if text is None:
        raise NotFound(f'pods "{name}" not found', 404)
    return text
