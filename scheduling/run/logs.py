"""A workload's logs, for every door (API, OSMO path, CLI, page): where each replica of each attempt ran (the sync's
pod facts, then the archive rows that outlive them), and one replica's log, live from the cluster while its pod is
there, else from its archive (`scheduling.models.LogArchive`). Who may read is the caller's check
(`bodies.may_read_request`); everything here reads what it is asked."""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from django.conf import settings

from pools.cluster import Cluster, ClusterError, LogQuery, NotFound
from pools.fleet.sync import shared_cluster_for
from pools.models import Backend, ManagedJob
from scheduling.decisions import log_lines
from scheduling.models import LogArchive, Workload
from scheduling.specs.jobs import USER_CONTAINER

LIVE, ARCHIVE = "live", "archive"


@dataclass
class Replica:
    """Where one replica of one attempt ran, and whether its pod (and so its live log) may still be there."""

    attempt: int
    replica: int
    pod: str
    namespace: str
    node: str = ""
    ip: str = ""
    phase: str = ""
    exit_code: int | None = None
    backend_id: int | None = None
    live: bool = False
    archive: str = ""  # the archive row's state, "" when there is none

    def as_dict(self) -> dict:
        return {"attempt": self.attempt, "replica": self.replica, "pod": self.pod, "node": self.node or None,
                "ip": self.ip or None, "phase": self.phase or None, "exit_code": self.exit_code,
                "log": LIVE if self.live else (ARCHIVE if self.archive == LogArchive.State.KEPT else None)}


class LogUnavailable(Exception):
    """No log to show, in words for the reader (`status`: the HTTP status that fits)."""

    def __init__(self, message: str, status: int = 404, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.field = field


def _index(facts: dict) -> int:
    value = str(facts.get("index") or "0")
    return int(value) if value.isascii() and value.isdigit() else 0


def replicas(workload: Workload, runs=None) -> list[Replica]:
    """Every replica of every attempt, oldest attempt first: a replica restarted by its Job is its newest pod."""
    found: dict[tuple[int, int], Replica] = {}
    rows = runs if runs is not None else ManagedJob.objects.filter(workload=str(workload.pk))
    for row in rows:
        attempt = row.attempt or workload.attempt
        for name, facts in sorted(row.pods.items()):
            key = (attempt, _index(facts))
            live = not row.gone and not facts.get("deleted")
            if key in found and found[key].live and not live:
                continue
            found[key] = Replica(attempt, key[1], name, row.namespace, facts.get("node") or "", facts.get("ip") or "",
                                 "Deleted" if facts.get("deleted") else facts.get("phase") or "",
                                 facts.get("exit_code"), row.backend_id, live)
    for archive in LogArchive.objects.filter(workload=workload).defer("data"):
        key = (archive.attempt, archive.replica)
        if key in found:
            found[key].archive = archive.state
        else:
            found[key] = Replica(archive.attempt, archive.replica, archive.pod, archive.namespace, archive.node,
                                 archive.pod_ip, archive.phase, archive.exit_code, archive.backend_id, False,
                                 archive.state)
    return [found[key] for key in sorted(found)]


def user_container(workload: Workload) -> str:
    return str((workload.variables or {}).get("USER_CONTAINER_NAME") or USER_CONTAINER)


@dataclass
class Source:
    """What one read will show: the live pod (`cluster`) or its archive row."""

    workload: Workload
    replica: Replica
    container: str
    kind: str  # LIVE or ARCHIVE
    cluster: Cluster | None = None
    archive: LogArchive | None = None
    notes: list[str] = field(default_factory=list)

    def headers(self) -> dict[str, str]:
        return {"X-Log-Source": self.kind, "X-Log-Pod": self.replica.pod, "X-Log-Container": self.container,
                "X-Log-Node": self.replica.node or "-", "X-Log-Attempt": str(self.replica.attempt),
                "X-Log-Replica": str(self.replica.replica)}


def choose(workload: Workload, *, attempt: int | None = None, replica: int = 0, container: str = "",
           clusters: Callable[[Backend], Cluster] = shared_cluster_for) -> Source:
    attempt = attempt or workload.attempt
    if attempt > workload.attempt:
        raise LogUnavailable(f"attempt: workload {workload.name} has had {workload.attempt} attempt(s)", 400,
                             "attempt")
    if replica >= workload.replicas:
        raise LogUnavailable(f"replica: workload {workload.name} has {workload.replicas} replica(s), numbered from 0",
                             400, "replica")
    place = next((r for r in replicas(workload) if (r.attempt, r.replica) == (attempt, replica)), None)
    if place is None:
        raise LogUnavailable(f"Replica {replica} of attempt {attempt} of workload {workload.name} has no pod yet "
                             f"(status {workload.status}).")
    wanted = container or user_container(workload)
    if place.live and place.backend_id is not None:
        backend = Backend.objects.filter(pk=place.backend_id).first()
        if backend is not None:
            return Source(workload, place, wanted, LIVE, cluster=clusters(backend))
    return _archived(workload, place, wanted)


def _archived(workload: Workload, place: Replica, container: str) -> Source:
    archive = LogArchive.objects.filter(workload=workload, attempt=place.attempt, replica=place.replica).first()
    if archive is None or archive.state == LogArchive.State.PENDING:
        raise LogUnavailable(f"Pod {place.pod} is gone and its log is not archived"
                             f"{' yet' if archive is not None else ''}.")
    if archive.state == LogArchive.State.MISSING:
        raise LogUnavailable(f"Pod {place.pod} was gone before its log could be kept: {archive.message}")
    if container != archive.container:
        raise LogUnavailable(f"container: only container {archive.container} of pod {place.pod} is archived", 400,
                             "container")
    return Source(workload, place, container, ARCHIVE, archive=archive)


def _cluster_error(exc: ClusterError, source: Source) -> LogUnavailable:
    if exc.status == 400:  # the API server's words: an unknown container, one not started yet, no previous one
        return LogUnavailable(exc.message.split(": HTTP 400 ", 1)[-1], 400, "container")
    return LogUnavailable(f"The cluster did not answer for pod {source.replica.pod}: {exc.message}", 502)


@dataclass
class Read:
    source: Source
    text: bytes
    position: log_lines.Position
    truncated: bool = False


def read(source: Source, *, tail: int | None = None, previous: bool = False, since: str = "") -> Read:
    """The log now (a live read falls back to the archive when the pod went meanwhile), the newest
    OSMO_LOG_READ_BYTES at most."""
    start = log_lines.parse(since)
    most = settings.OSMO_LOG_READ_BYTES
    if source.kind == LIVE:
        query = LogQuery(container=source.container, tail_lines=tail if not start.stamp else None, previous=previous,
                         since_time=start.since_time, timestamps=True)
        try:
            data = source.cluster.read_pod_log(source.replica.namespace, source.replica.pod, query)
        except NotFound:
            source = _archived(source.workload, source.replica, source.container)
        except ClusterError as exc:
            raise _cluster_error(exc, source) from None
    if source.kind == ARCHIVE:
        if previous:
            raise LogUnavailable("previous: only the last container's log is archived", 400, "previous")
        data = bytes(source.archive.data)
        if tail is not None and not start.stamp:
            data = log_lines.tail_lines(data, tail)
    data, cut = log_lines.last_bytes(data, most)
    text, position = log_lines.strip(data, start)
    return Read(source, text, position if position.stamp else start,
                cut or (source.kind == ARCHIVE and source.archive.truncated))


# The last line of a follow ended because its reader may no longer read the log (no resume marker: resuming with
# the same credential is refused).
ACCESS_ENDED = (b"### osmo: follow ended: this credential may no longer read this log "
                b"(revoked, expired or access lost)\n")


def follow(source: Source, *, tail: int | None = None, since: str = "", seconds: float | None = None,
           clock: Callable[[], float] = time.monotonic, allowed: Callable[[], bool] | None = None,
           recheck: float | None = None) -> Iterator[bytes]:
    """A live log's lines as they are written, for `seconds` (OSMO_LOG_FOLLOW_SECONDS) at most; when the window
    ends before the container does, a last line `RESUME_PREFIX<token>` tells the client where to go on from.
    An archived log is read whole (it no longer grows). Errors (LogUnavailable) are raised here, before the
    first byte, so that a door can still answer them with a status.

    `allowed` (a web door's reader: its token, its account, its right to read this log) is asked again every
    `recheck` seconds (OSMO_LOG_FOLLOW_RECHECK_SECONDS) while the log is followed: the cluster's stream is opened
    for that long at a time, then again from the last line sent, so even a silent log comes back to the check.
    Once it says no, the stream ends with ACCESS_ENDED."""
    start = log_lines.parse(since)
    if source.kind == ARCHIVE:
        return iter([read(source, tail=tail, since=since).text])
    window = float(settings.OSMO_LOG_FOLLOW_SECONDS if seconds is None else seconds)
    deadline = clock() + window
    step = window if allowed is None else min(window, float(
        settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS if recheck is None else recheck))
    query = LogQuery(container=source.container, tail_lines=tail if not start.stamp else None,
                     since_time=start.since_time, timestamps=True)
    opened = clock()
    try:
        stream = source.cluster.follow_pod_log(source.replica.namespace, source.replica.pod, query,
                                               timeout_seconds=step)
    except NotFound:
        archived = _archived(source.workload, source.replica, source.container)
        source.kind, source.archive = ARCHIVE, archived.archive
        return iter([read(archived, tail=tail, since=since).text])
    except ClusterError as exc:
        raise _cluster_error(exc, source) from None
    return _Follow(source, query, step, deadline, clock, allowed).run(stream, opened, log_lines.Resumer(start))


@dataclass
class _Follow:
    source: Source
    query: LogQuery
    step: float
    deadline: float
    clock: Callable[[], float]
    allowed: Callable[[], bool] | None

    def run(self, stream: Iterator[bytes], opened: float, resumer: log_lines.Resumer) -> Iterator[bytes]:
        while True:
            slice_end = min(opened + self.step, self.deadline)  # the stream was asked for until then
            try:
                yield from self._lines(stream, resumer)
            except ClusterError as exc:  # the stream broke after it began: say so in the log, and where to go on
                yield f"### osmo: the cluster's stream broke ({exc.message})\n".encode()
                yield f"{log_lines.RESUME_PREFIX}{resumer.position.token}\n".encode()
                return
            now = self.clock()
            if now >= self.deadline:
                yield f"{log_lines.RESUME_PREFIX}{resumer.position.token}\n".encode()
                return
            if now < slice_end:
                return  # the cluster ended the stream before its time: the container ended
            if self.allowed is not None and not self.allowed():
                yield ACCESS_ENDED
                return
            opened = self.clock()
            try:
                stream = self._reopen(resumer.position)
            except ClusterError:  # the pod went meanwhile (its archive has the rest), or the cluster is away
                yield f"{log_lines.RESUME_PREFIX}{resumer.position.token}\n".encode()
                return
            resumer = log_lines.Resumer(resumer.position)

    def _reopen(self, position: log_lines.Position) -> Iterator[bytes]:
        """The stream again, from the last line sent (the Resumer drops what its second repeats); from the first
        query when nothing was sent yet."""
        query = self.query if not position.stamp else LogQuery(
            container=self.query.container, tail_lines=None, since_time=position.since_time, timestamps=True)
        remaining = max(0.05, min(self.step, self.deadline - self.clock()))
        return self.source.cluster.follow_pod_log(self.source.replica.namespace, self.source.replica.pod, query,
                                                  timeout_seconds=remaining)

    def _lines(self, stream: Iterator[bytes], resumer: log_lines.Resumer) -> Iterator[bytes]:
        try:
            for chunk in stream:
                kept = [text for line in log_lines.lines_of(chunk) if (text := resumer.take(line)) is not None]
                if kept:
                    yield b"".join(kept)
                if self.clock() >= self.deadline:
                    break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()  # a client gone mid-stream closes this generator: end the cluster's stream with it
