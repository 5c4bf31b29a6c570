"""Dispatch of an ADMITTED workload: create the Job of its attempt on its pool's backend, exactly once (issue 13;
docs/architecture/decisions.md). Called by the `dispatch_workload` task (sent when an admission
commits), by the sweep for rows whose message was lost, and by `manage.py schedule`.

The project's namespace is created when missing, labelled as ours. Exactly once: the row is locked (skipped
when another worker holds it) for the whole create, and the Job's name is fixed by the workload and attempt. A
worker that dies after the API server accepted the Job leaves the row ADMITTED (its transaction rolls back);
the next try gets 409 AlreadyExists, reads the Job back and accepts it when its labels name this workload. A
Job of that name that is not ours fails the workload (FAILED_BACKEND_ERROR, saying whose it is not), as does a
Job the API server refuses for good (pools.cluster.retries: 400, 404, 422, a 403 that is not a restarted server's).
A transient answer (no answer, 408, 429, 5xx, a 401/403 soon after the server was unreachable) is tried again with
back-off, up to retries.TRIES tries in retries.BUDGET seconds; the workload's events say what was retried. When the
tries run out the row stays ADMITTED, an event says so, and the error propagates for the caller to retry later.
A batch (the `dispatch_workloads` task's, scheduling.run.outbox.BATCH ids) is dispatched in one transaction
(`dispatch_many`): its rows locked by one statement, the ones made SCHEDULING and their events written in one round
trip, one commit (issue 43); the cluster halves of up to OSMO_DISPATCH_THREADS of them are in flight at once."""

import json
import logging
import os
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from pools.cluster import Cluster, ClusterError, Conflict, NotFound
from pools.cluster.kinds import CONFIG_MAP, KAI_PODGROUP, SECRET, SERVICE
from pools.cluster.retries import Retries
from pools.engine import kube_names, parse_timeout
from pools.fleet.sync import shared_cluster_for
from pools.models import Backend, Department, Pool, Project, inserts, rows
from pools.schedulers import kai, kueue
from scheduling.models import DataStore, Status, Workload, WorkloadEvent
from scheduling.run import attempts, links, task_data, workload_objects
from scheduling.specs.jobs import (
    MANAGED,
    MANAGED_VALUE,
    Attempt,
    Engine,
    Gang,
    files_manifest,
    has_peers,
    host_of,
    job_name,
    owned_by,
    podgroup_manifest,
    service_manifest,
)


def _seconds(timeout: str) -> int | None:
    return int(parse_timeout(timeout).total_seconds()) if timeout else None


def engine_of(workload: Workload) -> Engine | None:
    """Where the workload's backend engine queues its Job (None: the default scheduler, our admission)."""
    pool, project = workload.pool, workload.project
    scheduler = pool.backend.scheduler
    if scheduler == Backend.Scheduler.KAI:
        keys = pool.topology_keys or []
        required, preferred = kai.placement(keys, workload.topology or [])
        return Engine("kai", kai.queue_name(pool.name, project.department.name, project.name),
                      priority_class=settings.OSMO_KAI_PRIORITY_CLASSES.get(workload.priority, ""),
                      preemptible=workload.priority == "low",
                      topology=kai.topology_name(pool.name) if keys else "", required=required, preferred=preferred)
    if scheduler == Backend.Scheduler.KUEUE:
        return Engine("kueue", kueue.local_queue_name(project.name))
    return None


def gang_of(workload: Workload) -> Gang | None:
    """A member's gang (`WorkloadRequest.gang`): the Jobs of its members' current attempts, whose tasks' hosts the
    pods are given. One query, for the members of a group of differing shapes only."""
    names = (workload.request or {}).get("gang") or []
    if len(names) < 2:
        return None
    member = (workload.request or {}).get("member", 0)
    jobs: dict[int, str] = {}
    for pk, attempt, request in Workload.objects.filter(
            workflow=workload.workflow, group=workload.group, submitter_id=workload.submitter_id,
            project_id=workload.project_id).values_list("id", "attempt", "request"):
        if (request or {}).get("gang") == names:
            jobs[int((request or {}).get("member", 0))] = job_name(str(pk), attempt)
    hosts = tuple((task, host_of(jobs[index], replica)) for index, tasks in enumerate(names) if index in jobs
                  for replica, task in enumerate(tasks))
    return Gang(jobs.get(0, ""), sum(len(tasks) for tasks in names), hosts, member == 0)


def attempt_of(workload: Workload) -> Attempt:
    template = (workload.templates.get(workload.pool.name) or {}).get("pod_template") or {}
    engine = engine_of(workload)
    return Attempt(str(workload.id), workload.attempt, workload.project.name, workload.project.namespace,
                   workload.pool.name, workload.platform, workload.priority, workload.replicas, template,
                   _seconds(workload.exec_timeout), engine,
                   nodes=tuple(sorted(workload.placement or {})) if engine is None else (),
                   backend=workload.pool.backend.name, workflow=workload.workflow,
                   tasks=tuple((workload.request or {}).get("tasks") or ()),
                   files=tuple((workload.request or {}).get("files") or ()), gang=gang_of(workload))


logger = logging.getLogger(__name__)

# Per client (dispatch's are one per backend and process, `shared_cluster_for`), the namespaces it found or made:
# a dispatch into one of them skips the GET of `ensure_namespace`. One deleted by hand since is made again when the
# create answers 404 (a namespace that does not exist), and the create tried once more.
_NAMESPACES: "weakref.WeakKeyDictionary[Cluster, set[str]]" = weakref.WeakKeyDictionary()


def _create_main(cluster: Cluster, main: workload_objects.Main, namespace: str,
                 labelled: tuple[dict[str, str], dict[str, str]], retries: Retries) -> dict:
    known = _NAMESPACES.setdefault(cluster, set())
    if namespace in known:
        try:
            return retries.call(lambda: workload_objects.create(cluster, main, namespace))
        except NotFound:
            known.discard(namespace)
    retries.call(lambda: cluster.ensure_namespace(namespace, *labelled))
    known.add(namespace)
    return retries.call(lambda: workload_objects.create(cluster, main, namespace))


_LOCKED = (rows.Columns(Workload, "w"), rows.Columns(Pool, "p"), rows.Columns(Backend, "b"),
           rows.Columns(Project, "r"), rows.Columns(Department, "d"), rows.Columns(DataStore, "s"))


def _locked(workload_ids: list) -> dict[str, tuple[Workload, DataStore | None]]:
    """By id (str), the ADMITTED rows among `workload_ids`, locked (one another worker holds is left out, as is one
    not ADMITTED or without a pool), each with its pool, backend, project and department, and its pool's data store
    (None: it has none), which a workflow's task reads (`task_data.pod_data`): one statement for the lot, SQL
    written out (its ORM form cost more CPU to compile than to run)."""
    if not workload_ids:
        return {}
    quote = connection.ops.quote_name
    w, p, b, r, d, s = _LOCKED
    sql = (f"SELECT {w.sql}, {p.sql}, {b.sql}, {r.sql}, {d.sql}, {s.sql} FROM {quote(Workload._meta.db_table)} w "
           f"JOIN {quote(Pool._meta.db_table)} p ON p.id = w.pool_id "
           f"JOIN {quote(Backend._meta.db_table)} b ON b.id = p.backend_id "
           f"LEFT JOIN {quote(Project._meta.db_table)} r ON r.id = w.project_id "
           f"LEFT JOIN {quote(Department._meta.db_table)} d ON d.id = r.department_id "
           f"LEFT JOIN {quote(DataStore._meta.db_table)} s ON s.pool_id = p.id "
           f"WHERE w.id IN ({', '.join(['%s'] * len(workload_ids))}) AND w.status = %s")
    if connection.features.has_select_for_update_skip_locked:
        sql += " FOR UPDATE OF w SKIP LOCKED"
    pk = Workload._meta.pk
    found = {}
    for workload, pool, backend, project, department, store in rows.read(
            sql, [*(pk.get_db_prep_value(pk.to_python(i), connection) for i in workload_ids), Status.ADMITTED],
            *_LOCKED, shared=True):  # the rows of one pool, one project: their instances built once
        pool.backend = backend
        workload.pool = pool
        if workload.project_id is not None:
            project.department = department
            workload.project = project
        found[str(workload.pk)] = (workload, store if store.pk is not None else None)
    return found


@dataclass(frozen=True)
class _Scheduled:
    """A row made SCHEDULING by a dispatch, and its event's message and pool."""
    pk: Any
    name: str
    namespace: str
    at: datetime
    message: str
    pool: str


_SCHEDULING = ("status", "job_name", "namespace", "dispatched_at", "updated_at")


def _scheduling(pk, name: str, namespace: str, now: datetime) -> tuple[str, list]:
    """The UPDATE that makes the row SCHEDULING (as `filter(pk=...).update(...)` writes it), its SQL built once."""
    meta, quote = Workload._meta, connection.ops.quote_name
    fields = [meta.get_field(field) for field in _SCHEDULING]
    sql = (f"UPDATE {quote(meta.db_table)} SET {', '.join(f'{quote(f.column)} = %s' for f in fields)} "
           f"WHERE {quote(meta.pk.column)} = %s")
    values = (Status.SCHEDULING, name, namespace, now, now)
    return sql, [*(f.get_db_prep_save(v, connection) for f, v in zip(fields, values, strict=True)),
                 meta.pk.get_db_prep_value(pk, connection)]


@cache
def _written_sql(vendor: str) -> str:
    """PostgreSQL: the rows made SCHEDULING and their events, one UPDATE and one INSERT for all of them, each row's
    values in arrays (`unnest`). The text is the same whatever the number of rows, so psycopg converts it once per
    process: a statement per row made a query text psycopg parsed again every time, 1 ms of CPU a workload."""
    quote = connection.ops.quote_name
    w, e = Workload._meta, WorkloadEvent._meta

    def column(model, name: str) -> str:
        return quote(model._meta.get_field(name).column)

    def array(model, name: str) -> str:
        return f"%s::{model._meta.get_field(name).db_type(connection)}[]"

    status, job, namespace, dispatched, updated = (column(Workload, name) for name in _SCHEDULING)
    return (f"UPDATE {quote(w.db_table)} AS w SET {status} = %s, {job} = v.job_name, {namespace} = v.namespace, "
            f"{dispatched} = v.at, {updated} = v.at "
            f"FROM unnest({array(Workload, 'id')}, {array(Workload, 'job_name')}, {array(Workload, 'namespace')}, "
            f"{array(Workload, 'dispatched_at')}) AS v(id, job_name, namespace, at) "
            f"WHERE w.{quote(w.pk.column)} = v.id; "
            f"INSERT INTO {quote(e.db_table)} ({', '.join(column(WorkloadEvent, name) for name in _EVENT)}) "
            "SELECT v.workload, v.at, %s, %s, v.message, v.pools "
            f"FROM unnest({array(Workload, 'id')}, {array(WorkloadEvent, 'at')}, {array(WorkloadEvent, 'message')}, "
            f"{array(WorkloadEvent, 'pools')}) AS v(workload, at, message, pools)")


_EVENT = ("workload", "at", "status", "reason", "message", "pools")


def _write(done: list[_Scheduled]) -> None:
    """The rows made SCHEDULING and their DISPATCHED events, in one round trip."""
    if connection.vendor == "postgresql":
        pk = Workload._meta.pk
        ids = [pk.get_db_prep_value(row.pk, connection) for row in done]
        with connection.cursor() as cursor:
            cursor.execute(_written_sql(connection.vendor), [
                Status.SCHEDULING, ids, [row.name for row in done], [row.namespace for row in done],
                [row.at for row in done], Status.SCHEDULING, "DISPATCHED", ids, [row.at for row in done],
                [row.message for row in done], [json.dumps([row.pool]) for row in done]])
        return
    inserts.insert_rows(*(WorkloadEvent(workload_id=row.pk, at=row.at, status=Status.SCHEDULING, reason="DISPATCHED",
                                        message=row.message, pools=[row.pool]) for row in done),
                        then=[_scheduling(row.pk, row.name, row.namespace, row.at) for row in done])


def retries_for(cluster: Cluster) -> Retries:
    """Tries with back-off, knowing when this process's client last found the server unreachable."""
    return Retries(unreachable_at=lambda: getattr(cluster, "unreachable_at", None))


def dispatch(workload_id, *, clusters: Callable[[Backend], Cluster] = shared_cluster_for,
             now: datetime | None = None, retries: Retries | None = None) -> str:
    """"created", "found" (an earlier try created it), "failed" (a Job of that name is not ours, or refused for
    good) or "skipped" (not ADMITTED, or another worker is dispatching it). Raises the ClusterError of a transient
    answer once the tries ran out. `retries`: its clock and sleep (the tests')."""
    (outcome,) = dispatch_many([workload_id], clusters=clusters, now=now, retries=retries)
    if isinstance(outcome, ClusterError):
        raise outcome
    return outcome

# How long one transaction of `dispatch_many` goes on dispatching before it commits what it did and locks the rest
# again: the rows it holds wait that long at most for their status, and a worker killed meanwhile loses no more.
CHUNK_SECONDS = 5.0


@dataclass
class _Planned:
    """One locked row's dispatch as the database gave it: what to create, where, with which client."""
    workload: Workload
    attempt: Attempt
    main: workload_objects.Main
    pod: Any
    cluster: Cluster
    retries: Retries
    now: datetime


@dataclass
class _Done:
    """What the cluster half of a dispatch found: "created" or "found" (then `message` is the event's), "failed"
    (`code` and `message` say why), or `error`, a transient answer whose tries ran out (the row stays ADMITTED)."""
    outcome: str
    message: str = ""
    code: str = ""
    error: ClusterError | None = None


def dispatch_many(workload_ids, *, clusters: Callable[[Backend], Cluster] = shared_cluster_for,
                  now: datetime | None = None, retries: Retries | None = None,
                  clock: Callable[[], float] = time.monotonic,
                  threads: int | None = None) -> list[str | ClusterError]:
    """Dispatches each workload, in order, as `dispatch` does, and gives each one's outcome (the ClusterError of one
    the cluster did not take: it stays ADMITTED, for the caller to send again). Several in one transaction (issue
    43's rate): one statement locks them all, one round trip writes every row made SCHEDULING and its event, one
    commit; past CHUNK_SECONDS the transaction commits what it did and the rest are locked again. The cluster half
    of up to `threads` dispatches (OSMO_DISPATCH_THREADS) is in flight at once, in threads that never touch the
    database, when their client says it gains by it (`concurrent_writes`: the API server's; the simulated cluster,
    one process's files, runs them one after the other, in order, so a seeded demo stays the same): this thread
    reads the rows, plans each dispatch and writes every outcome, in order. Anything else a
    dispatch raises is raised once what the ones before it did has committed; the ones after are left ADMITTED,
    unlocked (the sweep's; what their cluster half created is found by the next try, as after a killed worker)."""
    ids = [str(Workload._meta.pk.to_python(workload_id)) for workload_id in workload_ids]
    width = max(1, min(len(ids), threads if threads is not None else settings.OSMO_DISPATCH_THREADS))
    outcomes: list[str | ClusterError] = []
    seen: set[str] = set()
    while len(outcomes) < len(ids):
        error = None
        with transaction.atomic():
            locked = _locked(list(dict.fromkeys(i for i in ids[len(outcomes):] if i not in seen)))
            began, writes, expired = clock(), [], False
            flight: list[tuple[_Planned | str | ClusterError, Future | None]] = []  # in order, planned or decided
            queued = len(outcomes)  # ids[:queued] are in flight or done
            while len(outcomes) < len(ids):
                while not expired and error is None and queued < len(ids) and len(flight) < width:
                    workload_id = ids[queued]
                    found = None if workload_id in seen else locked.get(workload_id)
                    seen.add(workload_id)
                    try:
                        planned = "skipped" if found is None else _plan(
                            *found, clusters, now or timezone.now(), retries.fresh() if retries else None)
                    except ClusterError as exc:  # no client for its backend: the row stays ADMITTED
                        planned = exc
                    except Exception as exc:
                        error = exc
                        break
                    queued += 1
                    flight.append((planned, _start(planned, width) if isinstance(planned, _Planned) else None))
                if not flight:
                    break
                planned, future = flight.pop(0)
                try:
                    outcomes.append(planned if future is None else _record(planned, future.result(), writes))
                except ClusterError as exc:  # raised before this one wrote anything: its row stays ADMITTED
                    outcomes.append(exc)
                except Exception as exc:  # the transaction too, if the database failed: nothing of it is written
                    error = exc
                    _settle(flight)
                    if isinstance(exc, DatabaseError):
                        raise
                    break
                expired = expired or clock() - began >= CHUNK_SECONDS
                if expired and not flight:
                    break
            if writes:
                _write(writes)
        if error is not None:
            raise error
    return outcomes


_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}  # by process (a forked child makes its own) and width


def _start(planned: _Planned, width: int) -> Future:
    """The cluster half of a planned dispatch: in this thread when one wide or its client gains nothing by more,
    else in the process's pool."""
    if width == 1 or not getattr(planned.cluster, "concurrent_writes", False):
        future: Future = Future()
        try:
            future.set_result(_act(planned))
        except Exception as exc:
            future.set_exception(exc)
        return future
    pool = _POOLS.get((os.getpid(), width))
    if pool is None:
        pool = _POOLS[os.getpid(), width] = ThreadPoolExecutor(width, thread_name_prefix="dispatch")
    return pool.submit(_in_thread, planned)


def _in_thread(planned: _Planned) -> _Done:
    """`_act` in a pool thread, which must not use the database: its connection would be outside the transaction
    that holds the row (a dispatch that did is a bug, raised as one)."""
    try:
        return _act(planned)
    finally:
        if connection.connection is not None:
            connection.close()
            raise RuntimeError("the cluster half of a dispatch used the database; that belongs in _plan or _record")


def _settle(flight: list) -> None:
    """Waits for the dispatches still in flight; their rows stay ADMITTED (the next try finds what they created)."""
    for planned, future in flight:
        if future is not None and (exc := future.exception()) is not None:
            logger.warning("dispatch of %s not written after an earlier error: %s", planned.workload.pk, exc)
    flight.clear()


def _plan(workload: Workload, store: DataStore | None, clusters: Callable[[Backend], Cluster], now: datetime,
          retries: Retries | None) -> _Planned:
    """What a locked row's dispatch creates and with which client (connecting records a failed backend)."""
    attempt = attempt_of(workload)
    main = workload_objects.main_of(workload, attempt)  # a Job, or a long-running kind's Deployment (issue 43)
    pod = task_data.prepare(workload, main.manifest, store)  # a task's data steps and credentials, in its pod
    cluster = clusters(workload.pool.backend)
    return _Planned(workload, attempt, main, pod, cluster, retries or retries_for(cluster), now)


def _act(planned: _Planned) -> _Done:
    """The cluster half of a dispatch: the main object and those it owns, no database. A Conflict whose object is
    ours is "found"; one that is not ours, or an answer refused for good, is "failed"; a transient answer whose
    tries ran out is `error`."""
    workload, attempt, main, cluster, retries = (planned.workload, planned.attempt, planned.main, planned.cluster,
                                                 planned.retries)
    prefix = settings.OSMO_LABEL_PREFIX
    word, manifest = main.word, main.manifest
    name, namespace, backend = manifest["metadata"]["name"], attempt.namespace, workload.pool.backend
    try:
        job = _create_main(cluster, main, namespace, kube_names.labelled(
            prefix, {MANAGED: MANAGED_VALUE, "project": attempt.project}), retries)
        done = _Done("created", f"{word} {namespace}/{name} created on backend {backend.name}.")
    except Conflict:
        existing = job = retries.call(lambda: workload_objects.read(cluster, main, namespace))
        if not owned_by(existing, attempt.workload_id, prefix):
            return _Done("failed", code="JOB_NOT_OURS", message=(
                f"A {word} {namespace}/{name} exists on backend {backend.name} and is not this workload's (its "
                f"{prefix}workload label is {(existing['metadata'].get('labels') or {}).get(prefix + 'workload')!r})."))
        job = retries.call(lambda: workload_objects.roll(cluster, main, namespace))
        done = _Done("found", (f"{word} {namespace}/{name} found on backend {backend.name}, created by an earlier "
                               "try" + (" (rolled to the request)" if main.kind is not None and word == "Deployment"
                                        else "") + "."))
    except ClusterError as exc:
        if retries.transient(exc):  # the row stays ADMITTED, for another try later
            return _Done("retrying", error=exc, message=(
                f"Backend {backend.name} did not take the Job {namespace}/{name} yet: "
                f"{' '.join(filter(None, (retries.summary(), 'Last: ' + exc.message)))} It is tried again later."))
        return _Done("failed", code="JOB_REFUSED", message=(
            f"Backend {backend.name} refused the Job {namespace}/{name}: {exc.message}"
            + (f" {retries.summary()}" if retries.retried else "")))
    made, not_ours = workload_objects.companions(cluster, workload, attempt, job, retries,
                                                 template=links.template_for)
    if not_ours:  # the Service or Ingress name is somebody else's: take ours back, then fail
        cluster.delete_object(main.kind, name, namespace=namespace)
        return _Done("failed", code="OBJECT_NOT_OURS", message=not_ours)
    if made:
        done.message += f" With {made}."
    # A Job's own objects (a long-running kind's were its companions): cluster errors propagate, the next try
    # finds them all.
    owned = []
    if main.kind is None and has_peers(attempt):
        owned.append((SERVICE, service_manifest(attempt, job, prefix=prefix), "SERVICE_NOT_OURS"))
    if main.kind is None and attempt.files:
        owned.append((CONFIG_MAP, files_manifest(attempt, job, prefix=prefix), "CONFIGMAP_NOT_OURS"))
    secret = task_data.secret_body(workload, namespace, job, planned.pod)
    if secret is not None:  # before the pods need it: they wait for it, they never read another's
        owned.append((SECRET, secret, "SECRET_NOT_OURS"))
    if main.kind is None and attempt.engine is not None and attempt.engine.kind == "kai" and \
            (attempt.gang is None or attempt.gang.lead):  # a gang's other members join the lead's PodGroup
        owned.append((KAI_PODGROUP, podgroup_manifest(attempt, job, prefix=prefix), "PODGROUP_NOT_OURS"))
    for kind, body, code in owned:
        not_ours = workload_objects.ensure(cluster, kind, body, attempt, prefix, retries)
        if not_ours:  # our Job would join somebody else's gang or name: take it back, then fail
            if main.kind is None:
                cluster.delete_job(namespace, name)
            else:
                cluster.delete_object(main.kind, name, namespace=namespace)
            return _Done("failed", code=code, message=not_ours)
    if owned and owned[0][0] is SERVICE:
        done.message += f" Its pods reach each other as {name}-<index>.{name} (headless Service {name})."
    if main.kind is None and attempt.engine is not None and attempt.engine.kind == "kai":
        group = attempt.gang.lead_job if attempt.gang else name
        done.message += f" Queued by KAI Scheduler in queue {attempt.engine.queue} as PodGroup {group}."
    elif main.kind is None and attempt.engine is not None:
        done.message += f" Queued by Kueue in LocalQueue {namespace}/{attempt.engine.queue} (suspended until admitted)."
    if retries.retried:
        done.message += f" {retries.summary()}"
    return done


def _record(planned: _Planned, done: _Done, writes: list) -> str | ClusterError:
    """Writes what `_act` found: a failed workload or the event of a transient answer here; a row made SCHEDULING
    and its event appended to `writes` (the caller writes them all at once)."""
    workload, attempt = planned.workload, planned.attempt
    if done.outcome == "failed":
        attempts.finish(workload, Status.FAILED_BACKEND_ERROR, done.code, done.message, now=planned.now)
        return "failed"
    if done.outcome == "retrying":
        WorkloadEvent.objects.create(workload=workload, at=planned.now, status=Status.ADMITTED,
                                     reason="DISPATCH_RETRYING", message=done.message, pools=[attempt.pool])
        return done.error  # raised once this transaction has kept the event
    name = planned.main.manifest["metadata"]["name"]
    writes.append(_Scheduled(workload.pk, name, attempt.namespace, planned.now, done.message, attempt.pool))
    return done.outcome
