"""The simulated cluster's KAI scheduler: it places the Jobs whose pod template names `schedulerName:
kai-scheduler`, through their PodGroups, and writes back what KAI writes (docs/admin/engines.md; KAI's
behaviour as KAI Scheduler's own documentation describes it).

A Job of kai-scheduler is created with every pod unbound (jobs.py); a scheduling pass then places its group whole
or not at all. A group is a PodGroup (`scheduling.run.ai/v2alpha2`) with the waiting Jobs whose pod template names
it in its `pod-group-name` annotation (else by the Job's name), in the Job's namespace: as KAI groups pods by that
annotation whatever owns them, several Jobs may make one gang (issue 41: an OSMO task group whose tasks differ in
image or resources runs as one Job per member, each `kai.scheduler/skip-podgrouper: "true"`, and only the lead
Job's PodGroup exists). The group's pods are all its Jobs' pods, each Job's with its own pod spec (node selector,
affinity, tolerations, GPUs); its request is the sum over its Jobs of pods x the Job's pod request. A pass runs
when such a Job is created and at most once a tick while one waits or one of those placed has just ended
(SimulatedCluster._current). Its rules, in this order, for each waiting group (higher priority class first, then
older first, by its oldest Job; a group that cannot go does not hold back those behind it):

- The PodGroup must exist; until it does the group waits and nothing is written.
- It must have `minMember` pods: those of its waiting Jobs plus those of its Jobs placed before and still running.
  With fewer (a member Job not created yet, or deleted), it waits as `Unschedulable` with KAI's words ("Job is not
  ready for scheduling. Waiting for 5 pods, currently 2 exist, 0 are gated ..."), and is placed in the pass that
  finds them all.
- Its `spec.queue` (else the lead Job's `kai.scheduler/queue` label; the lead is the Job named as the PodGroup,
  else the oldest) must name an existing Queue: `QueueDoesNotExist`. The priority class likewise: the PodGroup's,
  else the lead Job's pod template's.
- Non-preemptible groups (`spec.preemptibility: non-preemptible`, or without one a priority class of value 100
  or more: `build` 100, `inference` 125; `train` 50 and `build-preemptible` 75 are preemptible; an unknown class
  counts as 50) must stay within `quota`, for the leaf and each of its parents: the GPUs of non-preemptible groups
  running in the queue plus the request must not exceed `spec.resources.gpu.quota` (-1: no bound):
  `NonPreemptibleOverQuota`.
- Every group must stay within `limit`, leaf and parents: the GPUs of all groups running in the queue plus the
  request must not exceed `spec.resources.gpu.limit` unless it is -1 (an absent limit is 0, as in KAI): `OverLimit`.
- All the group's pods, of all its Jobs, must fit at once, each on a node that its own Job's pod template
  (nodeSelector, affinity, tolerations) admits, Ready, with free GPUs (the same placement as other Jobs: the
  fullest node that fits first; the Jobs asking most GPUs a pod are placed first). With
  `topologyConstraint.requiredTopologyLevel` (a node label key) all pods of the group go to nodes sharing one
  value of it; with `preferredTopologyLevel` one value is tried first, then any node. Else none is placed:
  `Unschedulable`, with kube's kind of message ("0/14 nodes are available: 12 Insufficient nvidia.com/gpu, 2
  node(s) didn't match Pod's node affinity/selector.", for the pods of the Job that found no room).
Only GPUs are checked against quotas and limits (the group's total); CPU and memory are counted in the figures.
There is no preemption nor reclaim, and a Topology object is not required to exist.

What it writes, as new versions of the objects (so lists and watches see them like any other change):
- a group that waits: its PodGroup's `status.schedulingConditions` = `[{"type": "UnschedulableOnNodePool",
  "nodePool": "default", "reason": <code>, "message": <text>, "transitionID": "<n>", "lastTransitionTime":
  <RFC 3339>, "reasons": [{"reason": <code>, "message": <text>, "details": {"queueDetails": {"name": <queue>,
  "queueDeservedResources", "queueAllocatedResources", "queueAllocatedNonPreemptibleResources",
  "queueRequestedResources", "queueResourceLimits", "podGroupRequestedResources"}}}]}]`, the queue being the one
  that refused it (the leaf for QueueDoesNotExist, with only its name, and for Unschedulable). Resources are
  `{"gpu": GPUs, "cpu": millicores, "memory": MB}`, KAI's Queue units; transitionID counts from "0" and moves,
  with lastTransitionTime, only when the reason or message changes;
- a group placed: the pods of every one of its Jobs bound in that pass, and its PodGroup's
  `status.schedulingConditions` removed (the conditions of a group are always on its one PodGroup);
- every Queue: `status.allocated`, `status.allocatedNonPreemptible` and `status.requested` (allocated plus what
  waiting groups ask), each `{"gpu", "cpu", "memory"}` in the same units, a parent counting its children.
"""

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pools.engine.errors import QuantityError
from pools.engine.quantity import parse_quantity

from ..kinds import KAI_PODGROUP, KAI_QUEUE
from .fleet import RV_PER_TICK
from .jobs import JobController, effective_gpus
from .objects import CustomObjects
from .randomness import timestamp
from .store import View

QUEUE_LABEL = "kai.scheduler/queue"
GROUP_ANNOTATION = "pod-group-name"
NODE_POOL = "default"
CONDITION = "UnschedulableOnNodePool"
PRIORITY_CLASSES = {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
NON_PREEMPTIBLE_FROM = 100
QUEUE_DOES_NOT_EXIST, OVER_LIMIT, OVER_QUOTA, UNSCHEDULABLE = (
    "QueueDoesNotExist", "OverLimit", "NonPreemptibleOverQuota", "Unschedulable")
RESOURCES = ("gpu", "cpu", "memory")


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(float(value), 3)


def _resources(values) -> dict[str, int | float]:
    return {resource: _number(value) for resource, value in zip(RESOURCES, values, strict=True)}


def _amount(value: Any, scale: int) -> float:
    try:
        return float(parse_quantity(value) * scale)
    except QuantityError:
        return 0.0


def pod_request(pod_spec: dict) -> tuple[float, float, float]:
    """One pod's (GPUs, CPU millicores, memory MB), by the `kubectl describe node` rule for init containers."""
    def of(container: dict, name: str, scale: int) -> float:
        resources = container.get("resources") or {}
        value = (resources.get("requests") or {}).get(name, (resources.get("limits") or {}).get(name))
        return 0.0 if value is None else _amount(value, scale)

    def total(name: str, scale: int) -> float:
        init = pod_spec.get("initContainers") or []
        sidecars = sum(of(c, name, scale) for c in init if c.get("restartPolicy") == "Always")
        largest = max([of(c, name, scale) for c in init if c.get("restartPolicy") != "Always"], default=0.0)
        return max(largest, sum(of(c, name, scale) for c in pod_spec.get("containers") or []) + sidecars)

    return float(effective_gpus(pod_spec)), total("cpu", 1000), total("memory", 1) / 1_000_000


@dataclass
class _Group:
    records: list[dict]  # its waiting Jobs (one, or the members of a multi-Job gang), in creation order
    namespace: str
    name: str  # the PodGroup's
    queue: str
    value: int  # the priority class's
    preemptible: bool
    request: tuple[float, float, float]  # the whole gang's, over all its Jobs
    podgroup: dict | None
    lead: bool  # whether `queue`, `value` and `preemptible` come from the Job named as the PodGroup
    created_rv: int  # its oldest Job's
    pods: int  # of all its waiting Jobs
    running: int = 0  # pods of Jobs of the same PodGroup placed before and still running

    def join(self, other: "_Group") -> None:
        """Adds another Job naming the same PodGroup (a member of a multi-Job gang)."""
        self.records.extend(other.records)
        self.request = tuple(a + b for a, b in zip(self.request, other.request, strict=True))
        self.pods += other.pods
        if other.lead and not self.lead:  # without a PodGroup spec, the lead Job's labels and class count
            self.queue, self.value, self.preemptible, self.lead = (other.queue, other.value, other.preemptible,
                                                                   True)


@dataclass
class _Member:
    """One Job of a group being placed: its pods' spec, GPUs and the nodes that admit them."""
    index: int  # in the group's records
    record: dict
    pod_spec: dict
    gpus: int
    eligible: list[str]


class KaiScheduler:
    """Runs scheduling passes over one cluster's state (changes made under SimulatedCluster._mutate)."""

    def __init__(self, jobs: JobController, custom: CustomObjects, clock: Callable[[], float]):
        self._jobs, self._custom, self._clock = jobs, custom, clock

    @staticmethod
    def due(state: dict[str, Any], tick: int) -> bool:
        """Whether a pass at `tick` may change anything: a group waits, or one placed has ended or gone."""
        for record in state["jobs"]:
            kai = record.get("kai")
            if kai is None or kai["settled"]:
                continue
            if kai["placed_rv"] is None or record["deleted_rv"] is not None \
                    or tick >= record["start_tick"] + 1 + record["run_ticks"]:
                return True
        return False

    def run(self, state: dict[str, Any], rv: int, view: View) -> bool:
        """One pass at `rv`: place what fits, explain what does not, update the Queues. True if it changed
        anything."""
        tick = rv // RV_PER_TICK
        changed = False
        queues = {name: obj for (_, name), obj in self._custom.live(state, rv, KAI_QUEUE).items()}
        podgroups = self._custom.live(state, rv, KAI_PODGROUP)
        allocated: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        guaranteed: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        waiting: dict[tuple[str, str], _Group] = {}
        running: dict[tuple[str, str], int] = defaultdict(int)
        for record in state["jobs"]:
            kai = record.get("kai")
            if kai is None or kai["settled"]:
                continue
            gone = record["deleted_rv"] is not None and record["deleted_rv"] <= rv
            if kai["placed_rv"] is None:
                if gone or not record["pods"]:
                    kai["settled"] = changed = True
                    continue
                group = self._group(record, podgroups)
                key = (group.namespace, group.name)
                if key in waiting:  # another Job of the same PodGroup: one gang (issue 41)
                    waiting[key].join(group)
                else:
                    waiting[key] = group
                continue
            if gone or tick >= record["start_tick"] + 1 + record["run_ticks"]:
                kai["settled"] = changed = True
                continue
            group = self._group(record, podgroups)
            running[(group.namespace, group.name)] += len(record["pods"])
            self._add(queues, kai.get("queue") or group.queue, group.request, allocated,
                      None if group.preemptible else guaranteed)
        requested: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
        for name, values in allocated.items():
            requested[name] = list(values)
        for group in waiting.values():
            group.running = running.get((group.namespace, group.name), 0)
            if group.podgroup is not None:
                self._add(queues, group.queue, group.request, requested, None)
        order = sorted(waiting.values(), key=lambda g: (-g.value, g.created_rv, g.namespace, g.name))
        free = self._jobs.free_slots(view, state, tick, rv) if order else {}
        for group in order:
            if group.podgroup is None:
                continue  # KAI waits for the PodGroup: nothing to explain yet
            refusal = self._ready(group) or self._admit(group, queues, allocated, guaranteed, requested)
            if refusal is None:
                placed, message = self._place(group, view, free)
                if placed is None:
                    refusal = (UNSCHEDULABLE, message, group.queue)
                else:
                    for record, pods in zip(group.records, placed, strict=True):  # every Job's pods bound at once
                        record["pods"] = [{**pod, "name": old["name"]} for pod, old in zip(pods, record["pods"],
                                                                                             strict=True)]
                        record["start_tick"] = tick
                        record["kai"].update(placed_rv=rv, queue=group.queue)
                    self._add(queues, group.queue, group.request, allocated,
                              None if group.preemptible else guaranteed)
                    changed = True
            changed |= self._write_condition(state, rv, group, refusal, queues, allocated, guaranteed, requested)
        for name, queue in queues.items():
            status = {"allocated": _resources(allocated[name]),
                      "allocatedNonPreemptible": _resources(guaranteed[name]),
                      "requested": _resources(requested[name])}
            current = queue.get("status") or {}
            if any(current.get(key) != value for key, value in status.items()):
                self._custom.patch(state, rv, KAI_QUEUE, None, name, {"status": status})
                changed = True
        return changed

    # ---- one group ------------------------------------------------------------------------------------------

    def _group(self, record: dict, podgroups: dict[tuple[str, str], dict]) -> _Group:
        job = record["job"]
        template = job["spec"].get("template") or {}
        pod_spec = template.get("spec") or {}
        annotations = {**(job["metadata"].get("annotations") or {}),
                       **((template.get("metadata") or {}).get("annotations") or {})}
        name = annotations.get(GROUP_ANNOTATION) or record["name"]
        podgroup = podgroups.get((record["namespace"], name))
        spec = (podgroup or {}).get("spec") or {}
        labels = {**(job["metadata"].get("labels") or {}), **((template.get("metadata") or {}).get("labels") or {})}
        queue = spec.get("queue") or labels.get(QUEUE_LABEL) or ""
        value = PRIORITY_CLASSES.get(spec.get("priorityClassName") or pod_spec.get("priorityClassName") or "",
                                     PRIORITY_CLASSES["train"])
        preemptibility = spec.get("preemptibility")
        preemptible = preemptibility == "preemptible" or (preemptibility != "non-preemptible"
                                                           and value < NON_PREEMPTIBLE_FROM)
        count = len(record["pods"])
        request = tuple(amount * count for amount in pod_request(pod_spec))
        return _Group([record], record["namespace"], name, queue, value, preemptible, request, podgroup,
                      lead=record["name"] == name, created_rv=record["created_rv"], pods=count)

    @staticmethod
    def _chain(queues: dict[str, dict], leaf: str) -> list[str]:
        """The leaf and its parents that exist, leaf first."""
        chain: list[str] = []
        name: str | None = leaf
        while name and name in queues and name not in chain:
            chain.append(name)
            name = (queues[name].get("spec") or {}).get("parentQueue")
        return chain

    def _add(self, queues: dict[str, dict], leaf: str, request, into: dict, also: dict | None) -> None:
        for name in self._chain(queues, leaf):
            for totals in (into, also) if also is not None else (into,):
                values = totals[name]
                for i, amount in enumerate(request):
                    values[i] += amount

    @staticmethod
    def _gpu(queue: dict, field: str) -> float:
        resources = ((queue.get("spec") or {}).get("resources") or {}).get("gpu") or {}
        try:
            return float(resources.get(field, 0))
        except (TypeError, ValueError):
            return 0.0

    def _admit(self, group: _Group, queues, allocated, guaranteed, requested) -> tuple[str, str, str] | None:
        """(code, message, queue) when the queues refuse the group, else None."""
        if group.queue not in queues:
            return QUEUE_DOES_NOT_EXIST, f"Queue '{group.queue}' does not exist", group.queue
        gpus = group.request[0]
        chain = self._chain(queues, group.queue)
        if not group.preemptible:
            for name in chain:
                quota = self._gpu(queues[name], "quota")
                if quota >= 0 and guaranteed[name][0] + gpus > quota:
                    return OVER_QUOTA, (
                        f"Non-preemptible workload is over quota. Workload requested {_number(gpus)} GPUs, but "
                        f"{name} quota is {_number(quota)} GPUs, while {_number(guaranteed[name][0])} GPUs are "
                        "already allocated for non-preemptible pods. Use a preemptible workload to go over quota."
                    ), name
        for name in chain:
            limit = self._gpu(queues[name], "limit")
            if limit != -1 and allocated[name][0] + gpus > limit:
                return OVER_LIMIT, (
                    f"{name} quota has reached the allowable limit of GPUs. Limit is {_number(limit)} GPUs, "
                    f"currently {_number(allocated[name][0])} GPUs allocated and workload requested "
                    f"{_number(gpus)} GPUs"), name
        return None

    @staticmethod
    def _ready(group: _Group) -> tuple[str, str, str] | None:
        """KAI considers a PodGroup only once it has minMember pods (of all its Jobs, those running included)."""
        wanted = int(((group.podgroup or {}).get("spec") or {}).get("minMember") or 0)
        existing = group.pods + group.running
        if wanted > existing:
            return UNSCHEDULABLE, (f"Job is not ready for scheduling. Waiting for {wanted} pods, currently "
                                   f"{existing} exist, 0 are gated (PodGroup {group.namespace}/{group.name} has "
                                   "fewer pods than its minMember)"), group.queue
        return None

    def _place(self, group: _Group, view: View, free: dict[str, list[tuple[int, int]]]):
        """(pods of each of the group's Jobs, "") with every pod placed and `free` updated, or (None, why) leaving
        `free` as it was. Each Job's pods go to nodes its own pod spec admits; those asking most GPUs go first."""
        members = []
        for index, record in enumerate(group.records):
            pod_spec = record["job"]["spec"]["template"]["spec"]
            members.append(_Member(index, record, pod_spec, record["pods"][0]["gpus"],
                                   self._jobs.eligible_nodes(view, pod_spec)))
        if len(members) > 1:
            members.sort(key=lambda member: -member.gpus)  # stable: then in creation order
        count = group.pods

        def attempt(nodes_of):  # nodes_of(member): the nodes its pods may go to in this attempt
            trial = dict(free)  # place_pod replaces a node's list, never changes it
            placed: list[list[dict]] = [[] for _ in group.records]
            done = 0
            for member in members:
                nodes, uid = nodes_of(member), member.record["uid"]
                for number in range(len(member.record["pods"])):
                    node, slots, taken = self._jobs.place_pod(trial, nodes, member.gpus, uid, number)
                    if node is None:
                        return None, done, trial, member
                    placed[member.index].append({"node": node, "slots": slots, "taken": taken,
                                                 "gpus": member.gpus})
                    done += 1
            return placed, done, trial, None

        constraint = ((group.podgroup or {}).get("spec") or {}).get("topologyConstraint") or {}
        required, preferred = constraint.get("requiredTopologyLevel"), constraint.get("preferredTopologyLevel")
        level = required or preferred
        best: tuple[int, str] = (-1, "")
        if level:  # the whole group within one value of the level
            within: list[dict[str, list[str]]] = [defaultdict(list) for _ in group.records]  # each Job's nodes
            for member in members:  # of each value
                mine = within[member.index]
                for name in member.eligible:
                    value = view.node_objs[name]["metadata"]["labels"].get(level)
                    if value is not None:
                        mine[value].append(name)
            if len(members) == 1:
                domains = within[0]
            else:  # every node of a value admitting one Job's pods or another's
                domains = {}
                for mine in within:
                    for value, names in mine.items():
                        known = domains.setdefault(value, [])
                        known.extend(name for name in names if name not in known)

            def room(value: str) -> int:
                return sum(size for name in domains[value] for _, size in free.get(name, []))

            for value in sorted(domains, key=lambda value: (room(value), value)):  # the fullest that fits first
                placed, done, trial, _ = attempt(lambda member, value=value: within[member.index].get(value, []))
                if placed is not None:
                    free.update(trial)
                    return placed, ""
                best = max(best, (done, value))
        if not required:
            placed, done, trial, failed = attempt(lambda member: member.eligible)
            if placed is not None:
                free.update(trial)
                return placed, ""
            why = self._nodes_message(view, trial, failed.pod_spec, failed.gpus)
            if done:
                why = (f"Resources were found for {done} pods while {count} are required for gang "
                       f"scheduling. {why}")
            return None, why
        why = self._nodes_message(view, free, members[0].pod_spec, members[0].gpus)
        if best[0] < 0:
            return None, f"No node admitting the pods has label {required}. {why}"
        return None, (f"No {required} domain has room for all {count} pods of the gang (the roomiest, "
                      f"{best[1]}, has room for {best[0]}). {why}")

    def _nodes_message(self, view: View, free: dict[str, list[tuple[int, int]]], pod_spec: dict, gpus: int) -> str:
        return self._jobs.nodes_message(view, free, pod_spec, gpus)

    # ---- what KAI writes back -------------------------------------------------------------------------------

    def _write_condition(self, state, rv: int, group: _Group, refusal, queues, allocated, guaranteed,
                         requested) -> bool:
        podgroup = group.podgroup
        current = list((podgroup.get("status") or {}).get("schedulingConditions") or [])
        previous = next((c for c in current if c.get("nodePool") == NODE_POOL and c.get("type") == CONDITION), None)
        if refusal is None:
            if previous is None:
                return False
            kept = [c for c in current if c is not previous]
            patch = {"status": {"schedulingConditions": kept or None}}
        else:
            code, message, queue = refusal
            details: dict[str, Any] = {"name": queue}
            if queue in queues:
                spec = (queues[queue].get("spec") or {}).get("resources") or {}
                details.update(
                    queueDeservedResources={r: (spec.get(r) or {}).get("quota", 0) for r in RESOURCES},
                    queueAllocatedResources=_resources(allocated[queue]),
                    queueAllocatedNonPreemptibleResources=_resources(guaranteed[queue]),
                    queueRequestedResources=_resources(requested[queue]),
                    queueResourceLimits={r: (spec.get(r) or {}).get("limit", 0) for r in RESOURCES})
            details["podGroupRequestedResources"] = _resources(group.request)
            reasons = [{"reason": code, "message": message, "details": {"queueDetails": details}}]
            same = previous is not None and (previous.get("reason"), previous.get("message")) == (code, message)
            if same and previous.get("reasons") == reasons:
                return False
            if same:  # only the queue's figures moved: the same transition
                transition, at = previous.get("transitionID") or "0", previous.get("lastTransitionTime")
            else:
                try:
                    transition = str(int(previous.get("transitionID") or 0) + 1) if previous is not None else "0"
                except ValueError:
                    transition = "0"
                at = timestamp(math.floor(self._clock()))
            condition = {"type": CONDITION, "nodePool": NODE_POOL, "reason": code, "message": message,
                         "transitionID": transition, "lastTransitionTime": at, "reasons": reasons}
            others = [c for c in current if c is not previous]
            patch = {"status": {"schedulingConditions": [*others, condition]}}
        return self._custom.patch(state, rv, KAI_PODGROUP, group.namespace, group.name, patch) is not False
