"""The Job controller of the simulated cluster: batch Jobs users create, their pods placed where GPUs are free,
and the Job objects and pods they make at any resourceVersion.

A Job is kept in the state file as a record (the normalised Job, when it was created and deleted, and where its
pods went); pods of the simulation whose GPUs a Job took do not run while it holds them. Pods that find no room
when their Job is created wait Unschedulable (with the kube-scheduler's FailedScheduling words) and are bound at
the first tick they all fit (`retry_unbound`, run by the first reader of each tick), as a kube-scheduler keeps
them queued: the fleet's own work often takes a planned node's GPUs between the sync admission planned from and
the Job's creation.
"""

import copy
import math
import re
from collections.abc import Callable
from typing import Any

from ..interface import ClusterError, Conflict, NotFound
from .fleet import RV_PER_TICK, Catalog
from .randomness import compact_dumps, stable_hash, stable_rng, stable_suffix, stable_uid, timestamp
from .store import Base, View
from .workloads import pod_ip, qos_class

DURATION_ANNOTATION = "sim.runwhere.ai/duration-seconds"
OUTCOME_ANNOTATION = "sim.runwhere.ai/outcome"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
KAI_SCHEDULER = "kai-scheduler"
GPU = "nvidia.com/gpu"

_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def _gpu_quantity(value: Any) -> int:
    if value is None:
        return 0
    try:
        return int(str(value))
    except ValueError:
        raise ClusterError(f"nvidia.com/gpu must be a whole number, got {value!r}", 422) from None


def _effective_gpus(pod_spec: dict) -> int:
    """The `kubectl describe node` rule: max(largest init container, sum of containers) plus sidecars."""
    def gpus(container: dict) -> int:
        resources = container.get("resources") or {}
        requests = resources.get("requests") or {}
        return _gpu_quantity(requests.get("nvidia.com/gpu", (resources.get("limits") or {}).get("nvidia.com/gpu")))

    init = pod_spec.get("initContainers") or []
    sidecars = sum(gpus(c) for c in init if c.get("restartPolicy") == "Always")
    largest_init = max([gpus(c) for c in init if c.get("restartPolicy") != "Always"], default=0)
    return max(largest_init, sum(gpus(c) for c in pod_spec.get("containers") or []) + sidecars)


effective_gpus = _effective_gpus


def _tolerates(tolerations: list[dict], taint: dict) -> bool:
    for toleration in tolerations:
        if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
            continue
        operator = toleration.get("operator", "Equal")
        if not toleration.get("key") and operator == "Exists":
            return True
        if toleration.get("key") != taint.get("key"):
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def _requirement_holds(expression: dict, fields: dict[str, str]) -> bool:
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
    value = fields.get(key)
    return {"In": value in values, "NotIn": value not in values, "Exists": key in fields,
            "DoesNotExist": key not in fields}.get(operator, False)


def _affinity_matches(affinity: dict, labels: dict[str, str], name: str = "") -> bool:
    """The kube-scheduler's required node affinity: any term whose label expressions and field expressions
    (`metadata.name`, the only field kube allows there) all hold."""
    required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if not required:
        return True
    fields = {"metadata.name": name}
    # An empty term matches no node.
    return any((term.get("matchExpressions") or term.get("matchFields"))
               and all(_requirement_holds(e, labels) for e in term.get("matchExpressions") or [])
               and all(_requirement_holds(e, fields) for e in term.get("matchFields") or [])
               for term in required.get("nodeSelectorTerms") or [])


def waited(record: dict) -> dict | None:
    """How a Job placed after its creation waited: the KAI scheduler's gang, or a default-scheduler Job whose pods
    found no room when it was created (`retry`: the kube-scheduler tries its pods again as capacity frees)."""
    return record.get("kai") or record.get("retry")


def as_of(record: dict, rv: int) -> dict:
    """The record as it stood at `rv`: a Job placed later had every pod unbound before then."""
    kai = waited(record)
    if kai is None or (kai["placed_rv"] is not None and kai["placed_rv"] <= rv):
        return record
    return {**record, "start_tick": kai["created_tick"],
            "pods": [{"node": None, "slots": [], "taken": [], "gpus": pod["gpus"], "name": pod["name"]}
                     for pod in record["pods"]]}


class JobController:
    """Creates, finds and deletes the Job records of one cluster's state, and builds their objects and pods."""

    def __init__(self, catalog: Catalog, clock: Callable[[], float]):
        self.seed, self.tick_seconds = catalog.seed, catalog.tick_seconds
        self._catalog, self._clock = catalog, clock
        self._job_pods: dict[tuple, str] = {}

    # ---- the Cluster interface's Jobs: create, get, delete --------------------------------------------------

    @staticmethod
    def normalise_job(namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        """A copy of `body` checked and defaulted as the API server would, or the error it would answer."""
        if not isinstance(namespace, str) or not _DNS_LABEL_RE.fullmatch(namespace):
            raise ClusterError(f"invalid namespace {namespace!r}", 422)
        if not isinstance(body, dict):
            raise ClusterError("a Job must be a JSON object", 400)
        job = copy.deepcopy(body)
        metadata = job.setdefault("metadata", {})
        name = metadata.get("name")
        if not isinstance(name, str) or not _DNS_LABEL_RE.fullmatch(name):
            raise ClusterError(f"Job.batch {name!r} is invalid: metadata.name: Invalid value: must be a lowercase "
                               "RFC 1123 label of at most 63 characters", 422)
        if metadata.get("namespace", namespace) != namespace:
            raise ClusterError("the namespace of the provided object does not match the namespace sent on the "
                               "request", 400)
        if job.get("kind", "Job") != "Job":
            raise ClusterError(f"expected a Job, got {job.get('kind')!r}", 400)
        spec = job.get("spec") or {}
        pod_spec = ((spec.get("template") or {}).get("spec")) or {}
        containers = pod_spec.get("containers")
        if not isinstance(containers, list) or not containers:
            raise ClusterError(f'Job.batch "{name}" is invalid: spec.template.spec.containers: Required value', 422)
        if pod_spec.get("restartPolicy") not in ("Never", "OnFailure"):
            raise ClusterError(f'Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: Required value: '
                               'valid values: "OnFailure", "Never"', 422)
        _effective_gpus(pod_spec)  # refuses malformed GPU quantities now rather than at placement
        for container in [*containers, *(pod_spec.get("initContainers") or [])]:
            resources = container.setdefault("resources", {})
            limits = resources.get("limits") or {}
            requests = resources.setdefault("requests", {})
            for key, value in limits.items():
                requests.setdefault(key, value)  # the API server defaults requests to limits
        metadata["namespace"] = namespace
        metadata["generation"] = 1
        job["apiVersion"], job["kind"] = "batch/v1", "Job"
        try:
            parallelism = int(spec.get("parallelism", 1))
            completions = None if spec.get("completions") is None else int(spec["completions"])
        except (TypeError, ValueError):
            raise ClusterError(f'Job.batch "{name}" is invalid: spec.parallelism and spec.completions must be '
                               "integers", 422) from None
        spec.setdefault("parallelism", parallelism)
        spec.setdefault("completions", completions if completions is not None else parallelism)
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completionMode", "NonIndexed")
        spec.setdefault("suspend", False)
        spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
        spec.setdefault("manualSelector", False)
        job["spec"] = spec
        job.pop("status", None)
        return job

    def create(self, state: dict[str, Any], rv: int, view: View, namespace: str, job: dict[str, Any]) -> dict:
        """Records `job`, as normalise_job returned it, as created at `rv`, and places its pods (a change made
        under SimulatedCluster._mutate)."""
        name = job["metadata"]["name"]
        if self._live_job(state, namespace, name, rv) is not None:
            raise Conflict(f'jobs.batch "{name}" already exists', 409)
        job["metadata"]["uid"] = uid = stable_uid(self.seed, "job", namespace, name, rv)
        job["metadata"]["creationTimestamp"] = timestamp(math.floor(self._clock()))
        self._stamp_job_uid(job, uid)
        tick = rv // RV_PER_TICK
        gang = self.gang_scheduled(job)
        record = {"namespace": namespace, "name": name, "uid": uid, "created_rv": rv, "deleted_rv": None,
                  "orphaned": False, "job": job, **self._schedule_job(job, tick, view, state, rv, place=not gang)}
        if gang:
            # Placed later, all pods at once, by the KAI scheduler (kai.py); until then every pod waits unbound.
            record["kai"] = {"created_tick": tick, "placed_rv": None, "settled": False}
        elif record["pods"] and all(pod["node"] is None for pod in record["pods"]):
            # The kube-scheduler keeps an unschedulable pod in its queue and binds it once a node has room: the
            # retry pass (retry_unbound) places these pods at the first tick they all fit.
            record["retry"] = {"created_tick": tick, "placed_rv": None, "settled": False,
                               "message": self.nodes_message(view, self._free_slots(view, state, tick, rv),
                                                             job["spec"]["template"]["spec"],
                                                             record["pods"][0]["gpus"])}
        state["jobs"].append(record)
        return record

    def create_controlled(self, state: dict[str, Any], rv: int, view: View, obj: dict[str, Any]) -> None:
        """The pods of a Deployment or StatefulSet (issue 43), as their controllers and the kubelet make them:
        `replicas` pods of its template, placed as a Job's are, running until it is deleted, Ready once running
        (the simulation's servers answer at once). A Deployment's pods are owned by its ReplicaSet
        `<name>-<pod-template-hash>` and carry that hash; a StatefulSet's are `<name>-<ordinal>`, owned by it."""
        metadata, spec = obj["metadata"], obj.get("spec") or {}
        name, namespace, uid = metadata["name"], metadata["namespace"], metadata["uid"]
        replicas = max(0, min(int(spec.get("replicas", 1)), 64))
        template = copy.deepcopy(spec.get("template") or {})
        job = {"metadata": {"name": name, "namespace": namespace, "uid": uid, "labels": metadata.get("labels") or {},
                            "annotations": {DURATION_ANNOTATION: str(10 ** 9)}},
               "spec": {"parallelism": replicas, "completions": replicas, "template": template}}
        tick = rv // RV_PER_TICK
        scheduled = self._schedule_job(job, tick, view, state, rv)
        hash_ = f"{stable_hash(uid, 'pod-template') % 16 ** 10:010x}"
        controller = {"kind": obj["kind"], "name": name, "uid": uid, "hash": hash_}
        for number, pod in enumerate(scheduled["pods"]):
            pod["name"] = f"{name}-{number}" if obj["kind"] == "StatefulSet" else \
                f"{name}-{hash_}-{stable_suffix(5, uid, number)}"
        record = {"namespace": namespace, "name": name, "uid": uid, "created_rv": rv, "deleted_rv": None,
                  "orphaned": False, "job": job, "controller": controller, **scheduled}
        if record["pods"] and all(pod["node"] is None for pod in record["pods"]):
            record["retry"] = {"created_tick": tick, "placed_rv": None, "settled": False,
                               "message": self.nodes_message(view, self._free_slots(view, state, tick, rv),
                                                             template.get("spec") or {}, record["pods"][0]["gpus"])}
        state["jobs"].append(record)

    @staticmethod
    def delete_controlled(state: dict[str, Any], rv: int, namespace: str, name: str) -> None:
        for record in state["jobs"]:
            if "controller" in record and (record["namespace"], record["name"]) == (namespace, name) and \
                    record["deleted_rv"] is None:
                record["deleted_rv"] = rv

    @staticmethod
    def retry_due(state: dict[str, Any]) -> bool:
        """Whether a default-scheduler Job still waits for room for its pods."""
        return any(not record.get("retry", {"settled": True})["settled"] for record in state["jobs"])

    def retry_unbound(self, state: dict[str, Any], rv: int, view: View) -> bool:
        """The kube-scheduler's retry at `rv`: the pods of each waiting Job (oldest first) bound where they fit
        now; a Job deleted or suspended meanwhile stops waiting. True if it changed anything."""
        tick, changed, free = rv // RV_PER_TICK, False, None
        for record in sorted(state["jobs"], key=lambda r: r["created_rv"]):
            retry = record.get("retry")
            if retry is None or retry["settled"]:
                continue
            if record["deleted_rv"] is not None and record["deleted_rv"] <= rv:
                retry["settled"] = changed = True
                continue
            pod_spec = record["job"]["spec"]["template"]["spec"]
            free = self._free_slots(view, state, tick, rv) if free is None else free
            trial = {name: list(slots) for name, slots in free.items()}
            eligible = self.eligible_nodes(view, pod_spec)
            placed = [self.place_pod(trial, eligible, pod["gpus"], record["uid"], number)
                      for number, pod in enumerate(record["pods"])]
            if any(node is None for node, _, _ in placed):
                continue
            record["pods"] = [{"node": node, "slots": slots, "taken": taken, "gpus": pod["gpus"], "name": pod["name"]}
                              for (node, slots, taken), pod in zip(placed, record["pods"], strict=True)]
            record["start_tick"] = tick
            retry.update(placed_rv=rv, settled=True)
            free, changed = trial, True
        return changed

    def nodes_message(self, view: View, free: dict[str, list[tuple[int, int]]], pod_spec: dict, gpus: int) -> str:
        """The kube-scheduler's FailedScheduling words: how many nodes are available and why the others are not."""
        reasons: dict[str, int] = {}
        for name in view.node_keys:
            verdict = self.node_verdict(view, name, pod_spec)
            if verdict is None and sum(size for _, size in free.get(name, [])) < gpus:
                verdict = f"Insufficient {GPU}"
            if verdict is not None:
                reasons[verdict] = reasons.get(verdict, 0) + 1
        available = len(view.node_keys) - sum(reasons.values())
        histogram = ", ".join(sorted(f"{count} {reason}" for reason, count in reasons.items()))  # kube's order
        return f"{available}/{len(view.node_keys)} nodes are available" + (f": {histogram}." if histogram else ".")

    @staticmethod
    def gang_scheduled(job: dict) -> bool:
        """Whether the Job's pods are left to the KAI scheduler (its pod template names kai-scheduler)."""
        return ((job["spec"].get("template") or {}).get("spec") or {}).get("schedulerName") == KAI_SCHEDULER

    def delete(self, state: dict[str, Any], rv: int, namespace: str, name: str, propagation_policy: str) -> str:
        """Marks the Job deleted at `rv` (a change made under SimulatedCluster._mutate); its uid."""
        record = self._live_job(state, namespace, name, rv)
        if record is None:
            raise NotFound(f'jobs.batch "{name}" not found', 404)
        record["deleted_rv"] = rv
        record["orphaned"] = propagation_policy == "Orphan"
        return record["uid"]

    def get(self, state: dict[str, Any], rv: int, namespace: str, name: str) -> dict[str, Any]:
        record = self._live_job(state, namespace, name, rv)
        if record is None:
            raise NotFound(f'jobs.batch "{name}" not found', 404)
        return self.job_object(record, rv)

    def objects_at(self, state: dict[str, Any], rv: int, selected: Callable[[dict], bool]) -> dict[str, str]:
        """The Jobs alive at `rv` whose labels `selected` accepts, as compact JSON by namespace/name."""
        objects = {}
        for record in state["jobs"]:
            if record["created_rv"] <= rv and (record["deleted_rv"] is None or record["deleted_rv"] > rv) \
                    and "controller" not in record and selected(record["job"]["metadata"].get("labels") or {}):
                objects[f"{record['namespace']}/{record['name']}"] = compact_dumps(self.job_object(record, rv))
        return objects

    # ---- what the Jobs add to a view ------------------------------------------------------------------------

    def with_jobs(self, base: Base, jobs: list[dict], rv: int, tick: int):
        """The pods of `base` with those of `jobs` added, and those whose GPUs the Jobs took removed."""
        jobs = [as_of(record, rv) for record in jobs]
        reserved: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for record in jobs:
            gone_tick = record["deleted_rv"] // RV_PER_TICK if record["deleted_rv"] else None
            for pod in record["pods"]:
                end = record["start_tick"] + 1 + record["run_ticks"]
                if gone_tick is not None and not record["orphaned"]:
                    end = min(end, gone_tick)
                for index in pod["slots"]:
                    reserved.setdefault((pod["node"], index), []).append((record["start_tick"], end))
        pods = dict(base.pods)
        work = []
        for entry in base.work:
            pod_key, node, index, start, _, _ = entry
            windows = reserved.get((node, index))
            if windows and any(begin <= start < end for begin, end in windows):
                del pods[pod_key]
            else:
                work.append(entry)
        for record in jobs:
            deleted = record["deleted_rv"] is not None and record["deleted_rv"] <= rv
            if deleted and not record["orphaned"]:
                continue
            for number, pod in enumerate(record["pods"]):
                stage = self._job_pod_stage(record, pod, tick)
                memo_key = (record["uid"], number, stage, deleted)
                text = self._job_pods.get(memo_key)
                if text is None:
                    text = compact_dumps(self._job_pod(record, number, stage, orphan=deleted))
                    if len(self._job_pods) > 20_000:
                        self._job_pods.clear()
                    self._job_pods[memo_key] = text
                key = f"{record['namespace']}/{pod['name']}"
                pods[key] = text
                if pod["node"]:
                    work.append((key, pod["node"], -1, record["start_tick"], pod["gpus"],
                                 stage in ("Pending", "Running")))
        return pods, work, sorted(pods)

    # ---- records, placement, and the objects of Jobs and their pods -----------------------------------------

    @staticmethod
    def _live_job(state: dict[str, Any], namespace: str, name: str, rv: int) -> dict | None:
        for record in state["jobs"]:
            if (record["namespace"], record["name"]) == (namespace, name) and record["created_rv"] <= rv and (
                    record["deleted_rv"] is None or record["deleted_rv"] > rv) and "controller" not in record:
                return record
        return None

    @staticmethod
    def _stamp_job_uid(job: dict, uid: str) -> None:
        name = job["metadata"]["name"]
        owned = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                 "controller-uid": uid, "job-name": name}
        job["metadata"]["labels"] = {**(job["metadata"].get("labels") or {}), **owned}
        job["spec"]["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        template = job["spec"].setdefault("template", {})
        template.setdefault("metadata", {})
        template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}), **owned}

    def _schedule_job(self, job: dict, tick: int, view: View, state: dict, rv: int, *,
                      place: bool = True) -> dict[str, Any]:
        """Place each pod on a node where it fits now and reserve the simulated GPU slots it takes over (with
        `place` False, every pod is left unbound)."""
        spec = job["spec"]
        pod_spec = spec["template"]["spec"]
        annotations = job["metadata"].get("annotations") or {}
        rng = stable_rng(self.seed, "job", job["metadata"]["uid"])
        try:
            seconds = float(annotations.get(DURATION_ANNOTATION, rng.randint(60, 600)))
        except ValueError:
            raise ClusterError(f"{DURATION_ANNOTATION} must be a number of seconds", 422) from None
        outcome = "Failed" if annotations.get(OUTCOME_ANNOTATION) == "Failed" else "Succeeded"
        deadline = spec.get("activeDeadlineSeconds")
        reason = "BackoffLimitExceeded" if outcome == "Failed" else None
        if deadline is not None and float(deadline) < seconds:
            seconds, outcome, reason = float(deadline), "Failed", "DeadlineExceeded"
        run_ticks = max(1, math.ceil(seconds / self.tick_seconds))
        count = 0 if spec.get("suspend") else max(0, min(int(spec["parallelism"]), int(spec["completions"]), 64))
        gpus = _effective_gpus(pod_spec)
        pods = []
        if place:
            free = self._free_slots(view, state, tick, rv)
            eligible = self.eligible_nodes(view, pod_spec)
            for number in range(count):
                node, slots, taken = self.place_pod(free, eligible, gpus, job["metadata"]["uid"], number)
                pods.append({"node": node, "slots": slots, "taken": taken, "gpus": gpus})
        else:
            pods = [{"node": None, "slots": [], "taken": [], "gpus": gpus} for _ in range(count)]
        for number, pod in enumerate(pods):
            pod["name"] = f"{job['metadata']['name']}-{stable_suffix(5, job['metadata']['uid'], number)}"
        return {"pods": pods, "start_tick": tick, "run_ticks": run_ticks, "outcome": outcome, "reason": reason}

    # ---- placement, shared with the KAI scheduler -----------------------------------------------------------

    @staticmethod
    def node_verdict(view: View, name: str, pod_spec: dict) -> str | None:
        """Why a pod of `pod_spec` can never go to node `name` now (kube's words), or None if it may."""
        node = view.node_objs[name]
        labels = node["metadata"]["labels"]
        selector = pod_spec.get("nodeSelector") or {}
        if any(labels.get(key) != value for key, value in selector.items()) or not _affinity_matches(
                pod_spec.get("affinity"), labels, name):
            return "node(s) didn't match Pod's node affinity/selector"
        tolerations = pod_spec.get("tolerations") or []
        for taint in node["spec"].get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(tolerations, taint):
                return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
        ready = next((c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready"), "")
        if ready != "True":
            return "node(s) were not ready"
        return None

    def eligible_nodes(self, view: View, pod_spec: dict) -> list[str]:
        """The Ready nodes whose labels and taints admit a pod of `pod_spec`, in the view's order."""
        return [name for name in view.node_keys if self.node_verdict(view, name, pod_spec) is None]

    @staticmethod
    def place_pod(free: dict[str, list[tuple[int, int]]], eligible: list[str], gpus: int, uid: str,
                  number: int) -> tuple[str | None, list[int], list[int]]:
        """The node (the fullest that fits), the GPU slots for one pod and the GPUs it takes of each, taken out of
        `free` (a slot's GPUs left over stay free for other pods of users' Jobs, as a kube-scheduler counts GPUs,
        not slots); (None, [], []) when none of `eligible` has room."""
        candidates = []
        for name in eligible:
            available = sum(size for _, size in free.get(name, []))
            if available >= gpus:
                candidates.append((available - gpus, stable_hash(uid, number, name), name))
        if not candidates:
            return None, [], []
        _, _, chosen = min(candidates)
        left = dict(free[chosen])
        fitting = sorted((size, index) for index, size in left.items() if size >= gpus)
        order = [fitting[0][1]] if fitting and gpus else []
        order += [index for index, _ in sorted(left.items(), key=lambda item: -item[1]) if index not in order]
        slots, taken, need = [], [], gpus
        for index in order:
            if need <= 0:
                break
            amount = min(need, left[index])
            left[index] -= amount
            need -= amount
            slots.append(index)
            taken.append(amount)
        free[chosen] = [(index, size) for index, size in left.items() if size > 0]
        return chosen, slots, taken

    def free_slots(self, view: View, state: dict, tick: int, rv: int) -> dict[str, list[tuple[int, int]]]:
        """The GPU slots of each node that no running pod of the simulation nor live Job holds at `rv`."""
        return self._free_slots(view, state, tick, rv)

    def _free_slots(self, view: View, state: dict, tick: int, rv: int) -> dict[str, list[tuple[int, int]]]:
        busy = {(node, index) for _, node, index, _, _, holds in view.work if holds}
        used: dict[tuple[str, int], float] = {}
        for record in state["jobs"]:
            if record["created_rv"] > rv or (record["deleted_rv"] is not None and record["deleted_rv"] <= rv):
                continue
            record = as_of(record, rv)
            if tick >= record["start_tick"] + 1 + record["run_ticks"]:
                continue
            for pod in record["pods"]:
                # A pod recorded before `taken` was kept holds its slots whole.
                for index, amount in zip(pod["slots"], pod.get("taken") or [math.inf] * len(pod["slots"]),
                                         strict=True):
                    used[(pod["node"], index)] = used.get((pod["node"], index), 0) + amount
        free = {}
        for name, slots in self._catalog.node_slots.items():
            free[name] = [(index, size - used.get((name, index), 0)) for index, size in slots
                          if (name, index) not in busy and size - used.get((name, index), 0) > 0]
        return free

    @staticmethod
    def _job_pod_stage(record: dict, pod: dict, tick: int) -> str:
        if pod["node"] is None:
            return "Unschedulable"
        elapsed = tick - record["start_tick"]
        if elapsed < 1:
            return "Pending"
        if elapsed < 1 + record["run_ticks"]:
            return "Running"
        return record["outcome"]

    def _job_pod(self, record: dict, number: int, stage: str, *, orphan: bool) -> dict:
        job = record["job"]
        pod = record["pods"][number]
        template = copy.deepcopy(job["spec"]["template"])
        t = self.tick_seconds
        start = record["start_tick"]
        kai = waited(record)
        created, running = timestamp((kai["created_tick"] if kai else start) * t), timestamp((start + 1) * t)
        ended = timestamp((start + 1 + record["run_ticks"]) * t)
        pending_rv = max(start * RV_PER_TICK, kai["placed_rv"] or 0) if kai else start * RV_PER_TICK
        metadata = {
            "name": pod["name"],
            "generateName": f"{record['name']}-",
            "namespace": record["namespace"],
            "uid": stable_uid(self.seed, "job-pod", record["uid"], number),
            "resourceVersion": str({"Pending": pending_rv, "Unschedulable": start * RV_PER_TICK,
                                    "Running": (start + 1) * RV_PER_TICK}.get(
                stage, (start + 1 + record["run_ticks"]) * RV_PER_TICK)),
            "creationTimestamp": created,
            "labels": (template.get("metadata") or {}).get("labels") or {},
            "annotations": (template.get("metadata") or {}).get("annotations") or {},
        }
        if job["spec"].get("completionMode") == "Indexed":
            # As the Job controller marks each pod of an Indexed Job: which replica it is.
            index = {COMPLETION_INDEX: str(number)}
            metadata["labels"] = {**metadata["labels"], **index}
            metadata["annotations"] = {**metadata["annotations"], **index}
        controller = record.get("controller")
        if controller is not None:  # a Deployment's (through its ReplicaSet) or a StatefulSet's
            del metadata["generateName"]
            if controller["kind"] == "StatefulSet":
                owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": controller["name"]}
                metadata["labels"] = {**metadata["labels"], "statefulset.kubernetes.io/pod-name": pod["name"]}
            else:
                owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                         "name": f"{controller['name']}-{controller['hash']}"}
                metadata["labels"] = {**metadata["labels"], "pod-template-hash": controller["hash"]}
            metadata["ownerReferences"] = [{**owner, "uid": stable_uid(self.seed, "owner", record["uid"]),
                                            "controller": True, "blockOwnerDeletion": True}]
        elif not orphan:
            metadata["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": record["name"],
                                            "uid": record["uid"], "controller": True, "blockOwnerDeletion": True}]
        spec = template.get("spec") or {}
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("serviceAccountName", "default")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec["tolerations"] = [*(spec.get("tolerations") or []),
                               {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300},
                               {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                                "tolerationSeconds": 300}]
        containers = spec.get("containers") or []
        init = spec.get("initContainers") or []
        if stage == "Unschedulable":
            message = (record.get("retry") or {}).get("message") or (
                f"0/{len(self._catalog.nodes)} nodes are available: no node matches the pod's node selector, "
                "tolerations and nvidia.com/gpu request.")
            if record.get("kai"):
                group = (metadata["annotations"] or {}).get("pod-group-name", record["name"])
                message = (f"Waiting for kai-scheduler to place PodGroup {record['namespace']}/{group} whole; its "
                           "status.schedulingConditions say why it is not placed yet.")
            status = {"phase": "Pending", "qosClass": qos_class(containers), "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastTransitionTime": created,
                "message": message}]}
            return {"metadata": metadata, "spec": spec, "status": status}
        node = self._catalog.nodes[pod["node"]]
        spec["nodeName"] = node.name
        if stage == "Pending":
            state = {"waiting": {"reason": "PodInitializing" if init else "ContainerCreating"}}
        elif stage == "Running":
            state = {"running": {"startedAt": running}}
        else:
            failed = stage == "Failed"
            state = {"terminated": {"exitCode": 1 if failed else 0, "reason": "Error" if failed else "Completed",
                                    "startedAt": running, "finishedAt": ended}}
        ready = stage == "Running"
        status = {
            "phase": stage,
            "hostIP": node.ip,
            "hostIPs": [{"ip": node.ip}],
            "startTime": timestamp(start * t),  # bound then (a Job of kai-scheduler waits unbound before)
            "qosClass": qos_class(init + containers),
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": timestamp(start * t)},
                {"type": "Initialized", "status": "True" if stage != "Pending" or not init else "False",
                 "lastTransitionTime": running if init else timestamp(start * t)},
                {"type": "ContainersReady", "status": str(ready), "lastTransitionTime": running},
                {"type": "Ready", "status": str(ready), "lastTransitionTime": running},
            ],
            "containerStatuses": [{"name": c.get("name", ""), "image": c.get("image", ""), "ready": ready,
                                   "restartCount": 0, "started": ready, "state": state} for c in containers],
        }
        if stage != "Pending":
            status["podIP"] = pod_ip(node, pod["name"])
        return {"metadata": metadata, "spec": spec, "status": status}

    def job_object(self, record: dict, rv: int) -> dict[str, Any]:
        record = as_of(record, rv)
        job = copy.deepcopy(record["job"])
        tick = rv // RV_PER_TICK
        t = self.tick_seconds
        stages = [self._job_pod_stage(record, pod, tick) for pod in record["pods"]]
        finished_tick = record["start_tick"] + 1 + record["run_ticks"]
        status: dict[str, Any] = {"startTime": job["metadata"]["creationTimestamp"]}
        active = sum(stage in ("Pending", "Running", "Unschedulable") for stage in stages)
        if active:
            status["active"] = active
        status["ready"] = sum(stage == "Running" for stage in stages)
        succeeded = sum(stage == "Succeeded" for stage in stages)
        failed = sum(stage == "Failed" for stage in stages)
        if succeeded:
            status["succeeded"] = succeeded
        if failed:
            status["failed"] = failed
        status["uncountedTerminatedPods"] = {}
        changed = record["created_rv"]
        if job["spec"].get("suspend"):
            status["conditions"] = [{"type": "Suspended", "status": "True", "reason": "JobSuspended",
                                     "message": "Job suspended", "lastProbeTime": job["metadata"]["creationTimestamp"],
                                     "lastTransitionTime": job["metadata"]["creationTimestamp"]}]
        elif stages and not active:
            at = timestamp(finished_tick * t)
            changed = max(changed, finished_tick * RV_PER_TICK)
            if failed:
                reason = record.get("reason") or "BackoffLimitExceeded"
                message = ("Job was active longer than specified deadline" if reason == "DeadlineExceeded"
                           else "Job has reached the specified backoff limit")
                status["conditions"] = [
                    {"type": "FailureTarget", "status": "True", "reason": reason, "message": message,
                     "lastProbeTime": at, "lastTransitionTime": at},
                    {"type": "Failed", "status": "True", "reason": reason, "message": message,
                     "lastProbeTime": at, "lastTransitionTime": at}]
            else:
                status["completionTime"] = at
                status["conditions"] = [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": at,
                     "lastTransitionTime": at},
                    {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                     "message": "Reached expected number of succeeded pods", "lastProbeTime": at,
                     "lastTransitionTime": at}]
        elif tick > record["start_tick"]:
            changed = max(changed, (record["start_tick"] + 1) * RV_PER_TICK)
        job["metadata"]["resourceVersion"] = str(changed)
        job["status"] = status
        return job
