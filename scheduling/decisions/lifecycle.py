"""What a dispatched workload's Job and pods say it is now (pure: no Django; docs/researcher/workloads.md,
"After admission"). `observe` reads the facts the sync stored (`pools.inventory.jobs`) and answers the change to make,
if any: SCHEDULING with why it waits, RUNNING once every replica runs, COMPLETED, or a failure, the exit code
going through the exit actions (COMPLETE / FAIL / RESCHEDULE, OSMO's). A change that leaves pods running
(`stop`) first deletes the Job."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pools.engine.exit_actions import exit_code_ranges

COMPLETE, FAIL, RESCHEDULE = "COMPLETE", "FAIL", "RESCHEDULE"
EVICTION_REASONS = frozenset({"Evicted", "NodeLost", "NodeAffinity", "Preempting", "Terminated", "Shutdown",
                              "UnexpectedAdmissionError"})


@dataclass(frozen=True)
class Current:
    status: str
    replicas: int
    attempt: int
    exit_actions: dict[str, str]  # the request's, else the pool's default_exit_actions, else {}
    max_retries: int
    image_pull_limit: timedelta
    planned: dict[str, int] = field(default_factory=dict)  # admission's plan, node -> replicas ({}: an engine's)
    placement_grace: timedelta = timedelta(seconds=120)
    create_failure_limit: timedelta = timedelta(seconds=300)
    kind: str = "training"  # a long-running kind (notebook, inference, compute) never completes: observe_service


@dataclass(frozen=True)
class Run:
    job: dict[str, Any]  # job_facts ({} until its event came)
    pods: dict[str, dict[str, Any]]  # pod name -> pod_run_facts
    gone: bool = False
    engine: dict[str, Any] = field(default_factory=dict)  # engine_facts: why KAI or Kueue holds it back, or {}
    lost: dict[str, str] = field(default_factory=dict)  # planned node -> why admission could no longer use it
    create_failure: dict[str, Any] = field(default_factory=dict)  # the Job controller's FailedCreate, or {}


@dataclass
class Outcome:
    status: str  # the new status; "RESCHEDULE" for a new attempt
    reason: str
    message: str
    exit_code: int | None = None
    stop: bool = False  # pods may still run: delete the Job first
    waiting: list[str] = field(default_factory=list)  # why a SCHEDULING workload waits (kube-scheduler's words)
    engine: dict[str, Any] = field(default_factory=dict)  # the engine's reason, when it holds the workload back
    started: bool = False


def action_for(code: int, actions: dict[str, str]) -> str:
    """The exit action of `code`: the first action whose codes include it; else 0 completes, the rest fail."""
    for action in (COMPLETE, FAIL, RESCHEDULE):
        codes = actions.get(action)
        if codes and any(low <= code <= high for low, high in exit_code_ranges(codes)):
            return action
    return COMPLETE if code == 0 else FAIL


def after_exit(current: Current, code: int, *, job_finished: bool, why: str) -> Outcome:
    action = action_for(code, current.exit_actions)
    stop = not job_finished
    if action == COMPLETE:
        return Outcome("COMPLETED", "COMPLETED", f"{why} Exit code {code}: complete.", code, stop)
    if action == RESCHEDULE:
        if current.attempt <= current.max_retries:
            return Outcome("RESCHEDULE", "RESCHEDULE", f"{why} Exit code {code}: rescheduled as attempt "
                                                       f"{current.attempt + 1}.", code, stop)
        return Outcome("FAILED", "RETRIES_EXHAUSTED", f"{why} Exit code {code} asks for a reschedule, but all "
                                                      f"{current.max_retries} retries are spent.", code, stop)
    return Outcome("FAILED", "EXIT_CODE", f"{why} Exit code {code}: failed.", code, stop)


def observe(current: Current, run: Run, now: datetime) -> Outcome | None:
    """The change the facts call for, or None when the workload's status already says it."""
    if current.kind != "training":
        return observe_service(current, run, now)
    pods = run.pods
    job = run.job
    finished = job.get("finished", "")
    for name, pod in sorted(pods.items()):
        if pod.get("disrupted") or (pod.get("reason") in EVICTION_REASONS and pod.get("phase") == "Failed"):
            why = pod.get("disrupted") or pod.get("reason")
            return Outcome("FAILED_EVICTED", "EVICTED", f"Pod {name} was evicted from node {pod.get('node') or '?'}"
                           f" ({why}{': ' + pod['message'] if pod.get('message') else ''}).", stop=not finished)
    failed = [(name, pod) for name, pod in sorted(pods.items())
              if pod.get("phase") == "Failed" and pod.get("exit_code") not in (None, 0)]
    if finished == "Failed" and job.get("reason") == "DeadlineExceeded":
        return Outcome("FAILED_EXEC_TIMEOUT", "EXEC_TIMEOUT", f"The Job ran past its deadline: {job.get('message')}.")
    if failed and not finished:
        # backoffLimit 0: the Job controller fails the Job and stops the other replicas. Waiting for it, rather than
        # deleting the Job, keeps the pods and their logs until ttlSecondsAfterFinished (issue 26).
        return None
    if failed:
        name, pod = failed[0]
        return after_exit(current, int(pod["exit_code"]), job_finished=bool(finished),
                          why=f"Pod {name} on node {pod.get('node') or '?'} failed.")
    if finished == "Complete":
        return after_exit(current, 0, job_finished=True, why="Every replica succeeded.")
    if finished == "Failed":
        return Outcome("FAILED_BACKEND_ERROR", "JOB_FAILED", f"The Job failed: {job.get('reason')}: "
                                                             f"{job.get('message')}")
    for name, pod in sorted(pods.items()):
        since = pod.get("image_pull_since")
        if since and now - datetime.fromisoformat(since) >= current.image_pull_limit and not pod.get("deleted"):
            return Outcome("FAILED_IMAGE_PULL", "IMAGE_PULL", f"Pod {name} could not pull its image for "
                           f"{_minutes(current.image_pull_limit)} ({pod.get('waiting')}: "
                           f"{pod.get('waiting_message') or 'no message'}).", stop=True)
    if run.gone:
        return Outcome("FAILED_BACKEND_ERROR", "JOB_DELETED", "The Job was deleted from the cluster by someone "
                                                              "else before it finished.")
    broken = placement_broken(current, run, now)
    if broken is not None:
        return broken
    refused = run.create_failure if not any(not pod.get("deleted") for pod in pods.values()) else {}
    since = _time(refused.get("since"))
    if since is not None and now - since >= current.create_failure_limit:
        return Outcome("FAILED_BACKEND_ERROR", "CREATE_FAILED", f"The Job could not create its pods for "
                       f"{_minutes(current.create_failure_limit)}: {refused.get('message')}", stop=True)
    running = sum(1 for pod in pods.values() if pod.get("phase") == "Running" and not pod.get("deleted"))
    succeeded = sum(1 for pod in pods.values() if pod.get("phase") == "Succeeded")
    if current.status == "RUNNING":
        return None
    if running and running + succeeded >= current.replicas:
        return Outcome("RUNNING", "RUNNING", f"All {current.replicas} replica(s) running.", started=True)
    waiting = [create_failure_message(refused)] if refused else []
    if run.engine.get("code"):  # the engine's reason comes first: the kube-scheduler never saw the pods
        waiting.append(engine_message(run.engine))
    for name, pod in sorted(pods.items()):
        if pod.get("unschedulable") and run.engine.get("code"):
            continue  # the engine's own reason, above, says more than its "waiting for the scheduler"
        if pod.get("unschedulable"):
            waiting.append(f"Pod {name} is unschedulable: {pod['unschedulable']}")
        elif pod.get("waiting") and pod.get("waiting") not in ("ContainerCreating", "PodInitializing"):
            waiting.append(f"Pod {name} waits: {pod['waiting']}"
                           + (f": {pod['waiting_message']}" if pod.get("waiting_message") else ""))
    if not waiting:  # nothing holds it back (any more): an empty list clears the reasons shown
        return Outcome("SCHEDULING", "WAITING", "", waiting=[]) if current.status == "SCHEDULING" else None
    return Outcome("SCHEDULING", "WAITING", "; ".join(waiting), waiting=waiting, engine=run.engine)


def ready_replicas(run: Run) -> int:
    """Pods of a long-running workload that are Ready (kubectl's READY): what AVAILABLE counts."""
    return sum(1 for pod in run.pods.values() if pod.get("ready") and not pod.get("deleted") and
               not pod.get("deleting"))


def observe_service(current: Current, run: Run, now: datetime) -> Outcome | None:
    """A notebook, inference or compute: its controller restarts and replaces pods, so an exit or an eviction is
    no end; it is RUNNING once its replicas are Ready (a notebook's one pod, every replica of an inference: the
    status word AVAILABLE with ready/desired, `status_word`), back to SCHEDULING never (a rolling update keeps
    it RUNNING), and ends only when stopped, or when its image cannot be pulled. Its Deployment or StatefulSet is
    not watched, so `run.gone` (a Job's) says nothing here."""
    for name, pod in sorted(run.pods.items()):
        since = pod.get("image_pull_since")
        if since and now - datetime.fromisoformat(since) >= current.image_pull_limit and not pod.get("deleted"):
            return Outcome("FAILED_IMAGE_PULL", "IMAGE_PULL", f"Pod {name} could not pull its image for "
                           f"{_minutes(current.image_pull_limit)} ({pod.get('waiting')}: "
                           f"{pod.get('waiting_message') or 'no message'}).", stop=True)
    if current.status == "RUNNING":
        return None
    ready = ready_replicas(run)
    if ready >= current.replicas:
        return Outcome("RUNNING", "RUNNING", f"{ready}/{current.replicas} replica(s) ready.", started=True)
    broken = placement_broken(current, run, now)
    if broken is not None:
        return broken
    waiting = []
    for name, pod in sorted(run.pods.items()):
        if pod.get("deleted"):
            continue
        if pod.get("unschedulable"):
            waiting.append(f"Pod {name} is unschedulable: {pod['unschedulable']}")
        elif pod.get("waiting") and pod.get("waiting") not in ("ContainerCreating", "PodInitializing"):
            waiting.append(f"Pod {name} waits: {pod['waiting']}"
                           + (f": {pod['waiting_message']}" if pod.get("waiting_message") else ""))
        elif pod.get("phase") == "Running" and not pod.get("ready"):
            waiting.append(f"Pod {name} runs and is not Ready yet (its port does not answer)")
    if not waiting:
        return Outcome("SCHEDULING", "WAITING", "", waiting=[]) if current.status == "SCHEDULING" else None
    return Outcome("SCHEDULING", "WAITING", "; ".join(waiting), waiting=waiting)


def status_word(kind: str, status: str, ready: int, desired: int) -> str:
    """What a page says of a workload's status: an inference that runs is AVAILABLE, with ready/desired."""
    if kind == "inference" and status == "RUNNING":
        return f"AVAILABLE {ready}/{desired}"
    return status


def placement_broken(current: Current, run: Run, now: datetime) -> Outcome | None:
    """Admission's plan no longer holds while pods still wait for a node (docs/architecture/decisions.md):
    a planned node that still owes replicas was lost (deleted, cordoned or not Ready: what admission itself would
    no longer place on), or a pod has found no node for the grace. Either ends the attempt and admits it again."""
    if not current.planned:
        return None
    live = [pod for pod in run.pods.values() if not pod.get("deleted")]
    bound: dict[str, int] = {}
    for pod in live:
        if pod.get("node"):
            bound[pod["node"]] = bound.get(pod["node"], 0) + 1
    if sum(bound.values()) >= current.replicas:
        return None  # every replica has its node: from here on, a lost node is an eviction
    lost = [(node, run.lost[node]) for node in sorted(current.planned)
            if node in run.lost and bound.get(node, 0) < current.planned[node]]
    if lost:
        nodes = ", ".join(f"{node} ({why})" for node, why in lost)
        return Outcome(RESCHEDULE, "PLACEMENT_LOST", f"Planned node{'s' if len(lost) > 1 else ''} {nodes} lost "
                       "before every pod was bound there; admitted again on other nodes.", stop=True)
    for name, pod in sorted(run.pods.items()):
        since = _time(pod.get("unschedulable_since"))
        if since and not pod.get("node") and not pod.get("deleted") and now - since >= current.placement_grace:
            return Outcome(RESCHEDULE, "UNSCHEDULABLE", f"Pod {name} found no node in its plan "
                           f"({', '.join(sorted(current.planned))}) for {_minutes(current.placement_grace)} "
                           f"({pod.get('unschedulable') or 'Unschedulable'}); admitted again.", stop=True)
    return None


ENGINE_NAMES = {"kai": "KAI Scheduler", "kueue": "Kueue"}


CREATE_FAILURE_PREFIX = "The Job cannot create its pods: "


def create_failure_message(facts: dict[str, Any]) -> str:
    """The API server's own words: `pods "..." is forbidden: no PriorityClass with name build was found`."""
    return f"{CREATE_FAILURE_PREFIX}{facts.get('message') or 'no message'}"


def engine_message(facts: dict[str, Any]) -> str:
    name = ENGINE_NAMES.get(facts.get("engine", ""), facts.get("engine", ""))
    return f"{name} holds it back ({facts.get('code')}): {facts.get('message') or 'no message'}"


def _time(text: str | None) -> datetime | None:
    try:
        found = datetime.fromisoformat(text) if text else None
    except (TypeError, ValueError):  # not a time the API server would write: no deadline, not a failed sweep
        return None
    return found if found is None or found.tzinfo is not None else None  # naive: not comparable with now


def _minutes(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 60} min" if seconds >= 60 and seconds % 60 == 0 else f"{seconds} s"
