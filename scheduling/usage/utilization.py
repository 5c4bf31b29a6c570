"""GPU utilization of our pods, from the DCGM exporter's `DCGM_FI_DEV_GPU_UTIL` (percent, per GPU) as Prometheus
keeps it, read through Prometheus' HTTP API. Pure: no Django; the settings and the rows are
`scheduling.run.utilization`'s.

The exporter labels each GPU's series with the pod holding it (`namespace`, `pod`); a Prometheus that scrapes it
with honorLabels off renames those to `exported_namespace` and `exported_pod` (the target's own labels win), so
every query asks for both shapes, joined with `or`, and reads whichever came back. GPUs no pod holds carry no pod
label and are left out (`pod!=""`).

Every call has a time budget (the whole answer, not one socket read) and a size budget (bytes and series); any
failure raises `NotMeasured`, which callers show as "not measured", never as an error page.
"""

import http.client
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

METRIC = "DCGM_FI_DEV_GPU_UTIL"
# (namespace label, pod label): as the exporter writes them, and as Prometheus renames them with honorLabels off.
LABELS = (("namespace", "pod"), ("exported_namespace", "exported_pod"))
# Our pods' namespaces are DNS labels; anything else is not ours and never enters a query.
NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
CHUNK = 65536

PodKey = tuple[str, str]  # (namespace, pod name)


class NotMeasured(Exception):
    """Prometheus gave no usable answer. `reason`: unreachable, timeout, too_large, bad_answer, error."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


def _selector(namespaces: Iterable[str], labels: tuple[str, str]) -> str:
    names = sorted({n for n in namespaces if NAMESPACE.fullmatch(n)})
    if not names:
        raise ValueError("no namespace to ask about")
    namespace, pod = labels
    return f'{METRIC}{{{namespace}=~"{"|".join(names)}",{pod}!=""}}'


def _both(template: Callable[[str, tuple[str, str]], str], namespaces: Iterable[str]) -> str:
    namespaces = list(namespaces)
    return " or ".join(template(_selector(namespaces, labels), labels) for labels in LABELS)


def average_query(namespaces: Iterable[str], seconds: int) -> str:
    """Each pod's GPUs' average utilization over the `seconds` before the evaluation time."""
    return _both(lambda sel, lab: f"avg by ({lab[0]}, {lab[1]}) (avg_over_time({sel}[{int(seconds)}s]))",
                 namespaces)


def peak_query(namespaces: Iterable[str], seconds: int) -> str:
    """Each pod's highest utilization of any of its GPUs over the `seconds` before the evaluation time: under a
    threshold means every sample of every GPU was under it for that long."""
    return _both(lambda sel, lab: f"max by ({lab[0]}, {lab[1]}) (max_over_time({sel}[{int(seconds)}s]))",
                 namespaces)


def _namespaces(pods: Collection[PodKey]) -> set[str]:
    return {namespace for namespace, _ in pods}


def _key(metric: Mapping) -> PodKey | None:
    for namespace, pod in LABELS:
        if metric.get(namespace) and metric.get(pod):
            return str(metric[namespace]), str(metric[pod])
    return None


def _number(text) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise NotMeasured("bad_answer", f"Prometheus answered a non-number: {str(text)[:40]!r}") from None
    if not math.isfinite(value):
        return None  # NaN: no sample in the window; not a figure
    return min(max(value, 0.0), 100.0)


def parse(body: bytes, result_type: str, max_series: int) -> dict[PodKey, list[tuple[float, float]]]:
    """An answer of /api/v1/query (`vector`) or /api/v1/query_range (`matrix`): each pod's (time, percent) points."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise NotMeasured("bad_answer", "Prometheus answered something that is not JSON") from None
    if not isinstance(document, dict):
        raise NotMeasured("bad_answer", "Prometheus answered JSON that is not an object")
    if document.get("status") != "success":
        raise NotMeasured("error", f"Prometheus refused the query: {str(document.get('error'))[:200]}")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != result_type or not isinstance(data.get("result"), list):
        raise NotMeasured("bad_answer", f"Prometheus answered no {result_type}")
    if len(data["result"]) > max_series:
        raise NotMeasured("too_large", f"Prometheus answered {len(data['result'])} series, over {max_series}")
    found: dict[PodKey, list[tuple[float, float]]] = {}
    for item in data["result"]:
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise NotMeasured("bad_answer", "Prometheus answered a series without labels")
        key = _key(item["metric"])
        raw = [item.get("value")] if result_type == "vector" else item.get("values")
        if key is None or not isinstance(raw, list):
            continue
        for point in raw:
            if not isinstance(point, list) or len(point) != 2:
                raise NotMeasured("bad_answer", "Prometheus answered a malformed sample")
            value = _number(point[1])
            if value is not None:
                found.setdefault(key, []).append((float(point[0]), value))
    return found


class Source(Protocol):
    """Where figures come from: Prometheus over HTTP, or the demo's simulated DCGM (scheduling.usage.simulated).
    Each answers, for those of `pods` that have figures, one number (percent); pods without figures are absent
    (Prometheus is asked by the pods' namespaces and may answer more: callers keep only their pods)."""

    def averages(self, pods: Collection[PodKey], seconds: int, at: datetime) -> dict[PodKey, float]: ...

    def peaks(self, pods: Collection[PodKey], seconds: int, at: datetime) -> dict[PodKey, float]: ...

    def hourly(self, pods: Collection[PodKey], start: datetime, end: datetime) -> dict[PodKey, dict[float, float]]: ...


@dataclass
class Prometheus:
    url: str
    timeout: float = 5.0
    max_bytes: int = 16 * 1024 * 1024
    max_series: int = 200_000
    monotonic: Callable[[], float] = time.monotonic

    def _post(self, path: str, params: dict[str, str]) -> bytes:
        """POST (a long selector would not fit a URL), the whole answer read within `timeout`, at most `max_bytes`."""
        deadline = self.monotonic() + self.timeout
        request = urllib.request.Request(self.url.rstrip("/") + path, data=urllib.parse.urlencode(params).encode(),
                                         headers={"Content-Type": "application/x-www-form-urlencoded",
                                                  "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return self._read(answer, deadline)
        except urllib.error.HTTPError as exc:  # Prometheus' 400/422/503 bodies carry its error JSON
            with exc:
                body = self._read(exc, deadline)
            if exc.code in (400, 422):
                return body
            raise NotMeasured("error", f"Prometheus answered HTTP {exc.code}") from None
        except NotMeasured:
            raise
        except TimeoutError:
            raise NotMeasured("timeout", f"Prometheus did not answer within {self.timeout:g} s") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            kind = "timeout" if isinstance(reason, TimeoutError) else "unreachable"
            raise NotMeasured(kind, f"Prometheus at {self.url} is unreachable: {reason}") from None

    def _read(self, answer, deadline: float) -> bytes:
        length = answer.headers.get("Content-Length")
        if length and length.isascii() and length.isdigit() and int(length) > self.max_bytes:
            raise NotMeasured("too_large", f"Prometheus' answer is {length} bytes, over {self.max_bytes}")
        chunks, size = [], 0
        while True:
            if self.monotonic() > deadline:
                raise NotMeasured("timeout", f"Prometheus' answer took over {self.timeout:g} s")
            chunk = answer.read(CHUNK)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > self.max_bytes:
                raise NotMeasured("too_large", f"Prometheus' answer is over {self.max_bytes} bytes")
            chunks.append(chunk)

    def instant(self, query: str, at: datetime) -> dict[PodKey, float]:
        body = self._post("/api/v1/query", {"query": query, "time": f"{at.timestamp():.3f}",
                                             "timeout": f"{max(self.timeout, 0.001):g}s"})
        return {key: points[-1][1] for key, points in parse(body, "vector", self.max_series).items()}

    def range(self, query: str, start: datetime, end: datetime, step: int) -> dict[PodKey, list[tuple[float, float]]]:
        body = self._post("/api/v1/query_range", {"query": query, "start": f"{start.timestamp():.3f}",
                                                   "end": f"{end.timestamp():.3f}", "step": f"{int(step)}s",
                                                   "timeout": f"{max(self.timeout, 0.001):g}s"})
        return parse(body, "matrix", self.max_series)

    def averages(self, pods, seconds, at):
        return self.instant(average_query(_namespaces(pods), seconds), at)

    def peaks(self, pods, seconds, at):
        return self.instant(peak_query(_namespaces(pods), seconds), at)

    def hourly(self, pods, start, end):
        """Each pod's average over each whole hour in [start, end): one query_range at a 1 h step, each point the
        average of the hour before it; keyed by the hour's start (epoch seconds)."""
        first = math.ceil(start.timestamp() / 3600) * 3600 + 3600  # the end of the first whole hour
        last = math.floor(end.timestamp() / 3600) * 3600
        if last < first:
            return {}
        series = self.range(average_query(_namespaces(pods), 3600), datetime.fromtimestamp(first, start.tzinfo),
                            datetime.fromtimestamp(last, end.tzinfo), 3600)
        return {key: {t - 3600: value for t, value in points} for key, points in series.items()}


def gpu_utilization(source: Source, pod_keys: Iterable[PodKey], start: datetime, end: datetime) -> dict[PodKey, float]:
    """The average GPU utilization (percent, 0-100, over the pod's GPUs and the samples in [start, end]) of each
    of `pod_keys` that has figures; a pod without figures is absent: "not measured". Raises NotMeasured when
    the source cannot answer. One query, whatever the number of pods."""
    keys = {(ns, pod) for ns, pod in pod_keys if NAMESPACE.fullmatch(ns)}
    seconds = int((end - start).total_seconds())
    if not keys or seconds <= 0:
        return {}
    found = source.averages(keys, seconds, end)
    return {key: found[key] for key in keys if key in found}


def weighted(figures: Mapping[PodKey, float], gpu_seconds: Mapping[PodKey, float]) -> float | None:
    """A group's utilization from its pods': each pod's figure weighted by the GPU-seconds it held, over the pods
    that have a figure (None when none has): what a usage row shows beside its GPU-hours."""
    held = sum(gpu_seconds[key] for key in figures if gpu_seconds.get(key))
    if not held:
        return None
    return sum(figures[key] * gpu_seconds[key] for key in figures if gpu_seconds.get(key)) / held
