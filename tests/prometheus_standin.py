"""A stand-in for Prometheus' HTTP query API: a real HTTP server on a free port that serves `/api/v1/query` and
`/api/v1/query_range` (GET or form POST) over series a test adds, with the PromQL subset our queries use, parsed
strictly: whatever it does not understand is a 400 with Prometheus' error JSON, so a typo in a query fails its test.

The subset: `expr ("or" expr)*` where each expr is a vector selector `metric{label op "value", ...}` (ops `=`, `!=`,
`=~`, `!~`, regexes anchored as Prometheus anchors them), a range function `avg_over_time|max_over_time|
min_over_time(selector[<n>s|m|h|d])`, or an aggregation `avg|max|min|sum|count by (labels) (expr)`. Semantics as
Prometheus': an instant selector takes a series' latest sample within the 5-minute lookback; a range takes the
samples in (t - range, t]; functions and aggregations drop the metric name; `or` adds the right side's series
whose label sets the left side lacks; aggregation groups by the listed labels, an absent label counting as "".

Faults, for the degradation tests: `fault` = "garbage" (200, not JSON), "huge" (a valid answer of `huge_bytes`
bytes, sent without Content-Length), "error" (503), "slow" (holds the request until the test ends).
"""

import contextlib
import json
import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from tests.support.ports import free_port

LOOKBACK = 300.0
TOKEN = re.compile(r'\s*(?:(?P<duration>\d+[smhd])(?![A-Za-z0-9_])|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)'
                   r'|(?P<string>"(?:[^"\\]|\\.)*")|(?P<op>=~|!~|!=|=)|(?P<punct>[(){}\[\],]))')
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
AGGREGATIONS = {"avg": lambda v: sum(v) / len(v), "max": max, "min": min, "sum": sum, "count": len}
RANGE_FUNCTIONS = {"avg_over_time": lambda v: sum(v) / len(v), "max_over_time": max, "min_over_time": min}


class BadQuery(Exception):
    pass


def tokens(text: str) -> list[tuple[str, str]]:
    found, position = [], 0
    text = text.rstrip()
    while position < len(text):
        match = TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise BadQuery(f'parse error at char {position + 1}: unexpected character "{text[position]}"')
        kind = match.lastgroup
        found.append((kind, match.group(kind)))
        position = match.end()
    return found


@dataclass
class Selector:
    metric: str
    matchers: list[tuple[str, str, str]]

    def matches(self, labels: Mapping[str, str]) -> bool:
        if labels.get("__name__") != self.metric:
            return False
        for name, op, value in self.matchers:
            have = labels.get(name, "")
            if (op == "=" and have != value) or (op == "!=" and have == value):
                return False
            if op in ("=~", "!~") and (re.fullmatch(value, have) is not None) != (op == "=~"):
                return False
        return True


@dataclass
class RangeFunction:
    name: str
    selector: Selector
    seconds: float


@dataclass
class Aggregation:
    op: str
    by: list[str]
    inner: object


@dataclass
class Or:
    left: object
    right: object


class Parser:
    def __init__(self, text: str):
        self.tokens = tokens(text)
        self.at = 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, kind: str, value: str | None = None) -> str:
        token = self.peek()
        if token is None or token[0] != kind or (value is not None and token[1] != value):
            got = "end of input" if token is None else f'"{token[1]}"'
            raise BadQuery(f"parse error: unexpected {got}, expected {value or kind}")
        self.at += 1
        return token[1]

    def parse(self):
        expr = self.expression()
        if self.peek() is not None:
            raise BadQuery(f'parse error: unexpected "{self.peek()[1]}" after the expression')
        return expr

    def expression(self):
        expr = self.term()
        while self.peek() == ("ident", "or"):
            self.at += 1
            expr = Or(expr, self.term())
        return expr

    def term(self):
        name = self.take("ident")
        if name in AGGREGATIONS:
            self.take("ident", "by")
            self.take("punct", "(")
            labels = [self.take("ident")]
            while self.peek() == ("punct", ","):
                self.at += 1
                labels.append(self.take("ident"))
            self.take("punct", ")")
            self.take("punct", "(")
            inner = self.expression()
            self.take("punct", ")")
            return Aggregation(name, labels, inner)
        if name in RANGE_FUNCTIONS:
            self.take("punct", "(")
            selector = self.selector(self.take("ident"))
            self.take("punct", "[")
            duration = self.take("duration")
            self.take("punct", "]")
            self.take("punct", ")")
            return RangeFunction(name, selector, int(duration[:-1]) * UNITS[duration[-1]])
        if self.peek() == ("punct", "("):
            raise BadQuery(f'unknown function with name "{name}"')
        return self.selector(name)

    def selector(self, metric: str) -> Selector:
        matchers = []
        if self.peek() == ("punct", "{"):
            self.at += 1
            while True:
                label = self.take("ident")
                op = self.take("op")
                value = json.loads(self.take("string"))
                if op in ("=~", "!~"):
                    try:
                        re.compile(value)
                    except re.error as exc:
                        raise BadQuery(f"invalid regular expression {value!r}: {exc}") from None
                matchers.append((label, op, value))
                if self.peek() == ("punct", ","):
                    self.at += 1
                    continue
                self.take("punct", "}")
                break
        return Selector(metric, matchers)


Vector = list[tuple[dict[str, str], float]]


def _without_name(labels: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in labels.items() if k != "__name__"}


def evaluate(expr, series: list[tuple[dict[str, str], list[tuple[float, float]]]], t: float) -> Vector:
    if isinstance(expr, Selector):
        out = []
        for labels, samples in series:
            if expr.matches(labels):
                recent = [v for at, v in samples if t - LOOKBACK < at <= t]
                if recent:
                    out.append((dict(labels), recent[-1]))
        return out
    if isinstance(expr, RangeFunction):
        out = []
        for labels, samples in series:
            if expr.selector.matches(labels):
                window = [v for at, v in samples if t - expr.seconds < at <= t]
                if window:
                    out.append((_without_name(labels), RANGE_FUNCTIONS[expr.name](window)))
        return out
    if isinstance(expr, Aggregation):
        groups: dict[tuple, list[float]] = {}
        for labels, value in evaluate(expr.inner, series, t):
            groups.setdefault(tuple(labels.get(name, "") for name in expr.by), []).append(value)
        return [({name: value for name, value in zip(expr.by, key, strict=True) if value},
                 AGGREGATIONS[expr.op](values)) for key, values in groups.items()]
    left = evaluate(expr.left, series, t)
    seen = [labels for labels, _ in left]
    return left + [(labels, value) for labels, value in evaluate(expr.right, series, t) if labels not in seen]


def _time(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadQuery(f'invalid parameter "{name}": cannot parse "{text}" to a valid timestamp') from None
    if not math.isfinite(value):
        raise BadQuery(f'invalid parameter "{name}": cannot parse "{text}" to a valid timestamp')
    return value


def _step(text: str) -> float:
    match = re.fullmatch(r"(\d+)([smhd])", text)
    if match:
        return int(match.group(1)) * UNITS[match.group(2)]
    return _time(text, "step")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if value == int(value) else repr(value)


@dataclass
class PrometheusStandin:
    series: list[tuple[dict[str, str], list[tuple[float, float]]]] = field(default_factory=list)
    queries: list[dict[str, str]] = field(default_factory=list)
    fault: str | None = None
    huge_bytes: int = 2 * 1024 * 1024
    release: threading.Event = field(default_factory=threading.Event)

    def add(self, labels: Mapping[str, str], samples, metric: str = "DCGM_FI_DEV_GPU_UTIL") -> None:
        """A series (its labels, without the name) and its (unix time, value) samples."""
        self.series.append(({"__name__": metric, **labels}, sorted((float(t), float(v)) for t, v in samples)))

    def gpu(self, namespace: str, pod: str, gpu: int, samples, *, exported: bool = False, **extra) -> None:
        """One GPU's DCGM series as the exporter labels it (`exported`: as Prometheus renames its pod labels when
        it scrapes with honorLabels off, the target's own namespace and pod then taking the plain names)."""
        labels = {"gpu": str(gpu), "UUID": f"GPU-{namespace}-{pod}-{gpu}", "Hostname": "node-1", **extra}
        if exported:
            labels.update({"exported_namespace": namespace, "exported_pod": pod, "namespace": "gpu-operator",
                           "pod": "nvidia-dcgm-exporter-x7k2p"})
        else:
            labels.update({"namespace": namespace, "pod": pod})
        self.add(labels, samples)

    def answer(self, path: str, params: dict[str, str]) -> tuple[int, dict]:
        query = params.get("query")
        if not query:
            raise BadQuery('invalid parameter "query": query must not be empty')
        unknown = set(params) - {"query", "time", "start", "end", "step", "timeout"}
        if unknown:
            raise BadQuery(f"unknown parameters {sorted(unknown)}")
        expr = Parser(query).parse()
        if path == "/api/v1/query":
            t = _time(params["time"], "time") if "time" in params else 0.0
            result = [{"metric": labels, "value": [t, _number(value)]} for labels, value in
                      evaluate(expr, self.series, t)]
            return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
        for name in ("start", "end", "step"):
            if name not in params:
                raise BadQuery(f'invalid parameter "{name}": missing')
        start, end, step = _time(params["start"], "start"), _time(params["end"], "end"), _step(params["step"])
        if step <= 0 or end < start:
            raise BadQuery("invalid parameter: end before start, or a step that is not positive")
        if (end - start) / step > 11000:
            raise BadQuery("exceeded maximum resolution of 11,000 points per timeseries")
        matrix: dict[str, dict] = {}
        t = start
        while t <= end:
            for labels, value in evaluate(expr, self.series, t):
                key = json.dumps(labels, sort_keys=True)
                matrix.setdefault(key, {"metric": labels, "values": []})["values"].append([t, _number(value)])
            t += step
        return 200, {"status": "success", "data": {"resultType": "matrix", "result": list(matrix.values())}}

    def start(self) -> "PrometheusStandin":
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def _params(self) -> dict[str, str]:
                url = urlsplit(self.path)
                raw = url.query
                if self.command == "POST":
                    raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                parsed = parse_qs(raw, keep_blank_values=True)
                return {k: v[-1] for k, v in parsed.items()}

            def _send(self, code: int, body: bytes, length: bool = True) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                if length:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (a budget)
                    self.wfile.write(body)

            def _serve(self):
                path = urlsplit(self.path).path
                if path not in ("/api/v1/query", "/api/v1/query_range"):
                    self._send(404, b'{"status":"error","errorType":"not_found","error":"not found"}')
                    return
                params = self._params()
                standin.queries.append({"path": path, **params})
                if standin.fault == "slow":
                    standin.release.wait()
                    return
                if standin.fault == "garbage":
                    self._send(200, b"<html>502 Bad Gateway</html>")
                    return
                if standin.fault == "error":
                    self._send(503, b'{"status":"error","errorType":"unavailable","error":"overloaded"}')
                    return
                try:
                    code, document = standin.answer(path, params)
                except BadQuery as exc:
                    code, document = 400, {"status": "error", "errorType": "bad_data", "error": str(exc)}
                if standin.fault == "huge":
                    padding = [{"metric": {"pod": f"p{i}", "namespace": "x"}, "value": [0, "1"]}
                               for i in range(standin.huge_bytes // 40)]
                    document = {"status": "success", "data": {"resultType": "vector", "result": padding}}
                    self._send(200, json.dumps(document).encode(), length=False)
                    return
                self._send(code, json.dumps(document).encode())

            do_GET = do_POST = _serve

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()
        return self

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
