"""The batch/v1 Job of one attempt of a workload (pure: no Django; issue 13, docs/researcher/workloads.md,
"After admission"). One Job per attempt, named `wl-<first 12 of the uuid>-<attempt>` so that a retried create finds
its own Job (409, then read back and accepted when `<prefix>workload` names this workload); the gang is
`parallelism` = `completions` = replicas with `completionMode: Indexed`; retries are ours (`backoffLimit: 0`);
the exec timeout is `activeDeadlineSeconds`; Job and pods carry our labels.

On an engine backend (docs/admin/engines.md) the Job is the engine's to queue:
- KAI: `schedulerName: kai-scheduler`, the leaf queue as `kai.scheduler/queue`, KAI's priority class, and the gang
  as our own PodGroup (`podgroup_manifest`: minMember = replicas, the topology constraint), which the pods name
  (`pod-group-name`) while `kai.scheduler/skip-podgrouper` keeps KAI's pod-grouper away: for a batch Job the
  pod-grouper would make a PodGroup of minMember 1, which is no gang. Topology requests are also written as
  KAI's placement annotations.
- Kueue: `kueue.x-k8s.io/queue-name` names the project's LocalQueue and the Job starts suspended; Kueue unsuspends
  it once its ClusterQueue reserves the quota (Kueue's batch/Job integration gangs all `parallelism` pods).

On a default-scheduler backend our admission's plan binds (docs/architecture/decisions.md, "Placement holds"): the pods
carry a required node affinity to the planned nodes (one nodeSelectorTerm per planned node and term of the pod
template, each the template's term with `matchFields` metadata.name In [that node] ANDed in: a node field selector
takes one value, and terms are ORed, so a term of the pin's own would widen, not narrow), so the kube-scheduler
places them only inside the capacity admission reserved."""

import copy
from dataclasses import dataclass
from typing import Any

from pools.engine import kube_names
from pools.inventory.jobs import MANAGED_LABEL as MANAGED
from pools.inventory.jobs import MANAGED_VALUE
from scheduling.specs import osmo_groups, osmo_tokens

# The user container's name in every pod template (`USER_CONTAINER_NAME` unless a pool's variables rename it).
USER_CONTAINER = "user"
KAI_SCHEDULER = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
KAI_POD_GROUP = "pod-group-name"
KAI_SKIP_GROUPER = "kai.scheduler/skip-podgrouper"
KAI_TOPOLOGY = "kai.scheduler/topology"
KAI_REQUIRED = "kai.scheduler/topology-required-placement"
KAI_PREFERRED = "kai.scheduler/topology-preferred-placement"
PODGROUP_API = "scheduling.run.ai/v2alpha2"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"  # set by the Job controller on its pods
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
RENDEZVOUS_PORT = 29500  # MASTER_PORT of a gang (torch.distributed's default); a user's own env wins


@dataclass(frozen=True, slots=True)
class Engine:
    """Where an engine backend queues the Job: KAI's leaf queue or Kueue's LocalQueue."""

    kind: str  # "kai" or "kueue"
    queue: str
    priority_class: str = ""  # KAI: its class for our priority; "" keeps OSMO_PRIORITY_CLASSES'
    preemptible: bool = False
    topology: str = ""  # KAI: the pool's Topology object
    required: str = ""  # KAI: the node label every pod must share
    preferred: str = ""  # KAI: the node label pods should share


@dataclass(frozen=True, slots=True)
class Gang:
    """The members of an OSMO group whose tasks differ in pod shape, one workload and one Job each, started as one
    gang (docs/architecture/decisions.md, "A group of differing shapes")."""

    lead_job: str  # the Job of the lead's member: its PodGroup is the gang's (KAI), its replica 0 the master
    size: int  # the pods of every member
    hosts: tuple[tuple[str, str], ...]  # each task of the group -> its stable host, whichever member runs it
    lead: bool  # whether this member holds the lead, whose end is the group's


@dataclass(frozen=True, slots=True)
class Attempt:
    workload_id: str
    attempt: int
    project: str
    namespace: str
    pool: str
    platform: str
    priority: str
    replicas: int
    pod_template: dict[str, Any]  # the rendered template of the pool it was admitted to: {"spec": ...}
    exec_timeout_seconds: int | None = None
    engine: Engine | None = None
    nodes: tuple[str, ...] = ()  # the planned nodes the pods must go to (default scheduler); () leaves them free
    backend: str = ""  # the backend that writes the Job: its objects carry it, and only its sync reads them
    workflow: str = ""  # the OSMO workflow ID: fills `{{workflow_id}}`
    tasks: tuple[str, ...] = ()  # an OSMO group's task names by completion index: fill `{{host:TASK}}`
    files: tuple[dict[str, str], ...] = ()  # {path, contents} written into every replica (a ConfigMap)
    gang: Gang | None = None  # one member of a group of differing shapes


def job_name(workload_id: str, attempt: int) -> str:
    return kube_names.job_name(f"wl-{workload_id.replace('-', '')[:12]}-{attempt}")


def host_of(name: str, index: int) -> str:
    """The stable DNS name of the Job `name`'s replica `index` in its namespace: the Job controller names an indexed
    pod's host `<job>-<index>`, and the headless Service of the Job's name (the pods' `subdomain`) resolves it."""
    return f"{name}-{index}.{name}"


def has_peers(attempt: Attempt) -> bool:
    """Replicas that must find each other: a headless Service, stable hostnames and the launchers' env."""
    return attempt.replicas > 1 or attempt.gang is not None


def _filled(value: Any, attempt: Attempt, name: str) -> Any:
    """`value` with OSMO's tokens left for the Job (`scheduling.specs.osmo_tokens`) filled: the workflow ID and the
    tasks' hosts."""
    values = {osmo_tokens.host_token(task): host_of(name, index) for index, task in enumerate(attempt.tasks)}
    if attempt.gang is not None:
        values.update({osmo_tokens.host_token(task): host for task, host in attempt.gang.hosts})
    if attempt.workflow:
        values[osmo_tokens.WORKFLOW_ID] = attempt.workflow
    return osmo_tokens.fill(value, values) if values else value


FILES_VOLUME, DATA_VOLUME = "osmo-files", "osmo-data"


def _osmo_volumes(spec: dict[str, Any], attempt: Attempt, name: str) -> None:
    """An OSMO task's data directory (`{{output}}`, `{{input:N}}`: an emptyDir at /osmo/data) and a request's
    `files`, each mounted at its path from the ConfigMap of the Job's name (`files_manifest`), in every container."""
    volumes = spec.setdefault("volumes", [])
    mounts = []
    if attempt.tasks:
        volumes.append({"name": DATA_VOLUME, "emptyDir": {}})
        mounts.append({"name": DATA_VOLUME, "mountPath": osmo_tokens.DATA_DIR})
    if attempt.files:
        volumes.append({"name": FILES_VOLUME, "configMap": {"name": name, "defaultMode": 0o755}})
        mounts += [{"name": FILES_VOLUME, "mountPath": item["path"], "subPath": osmo_groups.file_key(index),
                    "readOnly": True} for index, item in enumerate(attempt.files) if "task" not in item]
        if any("task" in item for item in attempt.files):  # a task's own files, copied by its launcher
            mounts.append({"name": FILES_VOLUME, "mountPath": osmo_groups.FILES_DIR, "readOnly": True})
    for container in spec.get("containers") or []:
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), *mounts]


def _rendezvous(spec: dict[str, Any], attempt: Attempt, name: str) -> None:
    """Each container of a gang's pods gets the environment of the common launchers (docs/researcher/
    distributed.md): the master is replica 0, a replica's rank its completion index. Names the user set stay.
    In a gang of several members the master is the lead member's replica 0 and the size the gang's; a rank is an
    index only in the lead's member (the kubelet adds nothing to an index), so the others get none."""
    index = {"valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}
    gang = attempt.gang
    master = host_of(gang.lead_job, 0) if gang else host_of(name, 0)
    port, size = str(RENDEZVOUS_PORT), str(gang.size if gang else attempt.replicas)
    ranks = {"RANK": index, "NODE_RANK": index, "PET_NODE_RANK": index} if gang is None or gang.lead else {}
    wanted = {"MASTER_ADDR": {"value": master}, "MASTER_PORT": {"value": port}, "WORLD_SIZE": {"value": size},
              "PET_NNODES": {"value": size}, "PET_MASTER_ADDR": {"value": master}, "PET_MASTER_PORT": {"value": port},
              **ranks}
    for container in spec.get("containers") or []:
        env = list(container.get("env") or [])
        given = {item.get("name") for item in env}
        container["env"] = env + [{"name": key, **value} for key, value in wanted.items() if key not in given]


def labelled(attempt: Attempt, prefix: str) -> tuple[dict[str, str], dict[str, str]]:
    """Our labels of the Job, its pods and its PodGroup, and the annotations keeping the names they shortened."""
    return kube_names.labelled(prefix, {
        MANAGED: MANAGED_VALUE, "workload": attempt.workload_id, "project": attempt.project, "pool": attempt.pool,
        "platform": attempt.platform, "priority": attempt.priority, "attempt": str(attempt.attempt),
        **({"backend": attempt.backend} if attempt.backend else {})})


def _topology_annotations(engine: Engine) -> dict[str, str]:
    if not engine.topology or not (engine.required or engine.preferred):
        return {}
    found = {KAI_TOPOLOGY: engine.topology}
    if engine.required:
        found[KAI_REQUIRED] = engine.required
    if engine.preferred:
        found[KAI_PREFERRED] = engine.preferred
    return found


def pin_to_nodes(spec: dict[str, Any], nodes: tuple[str, ...] | list[str]) -> None:
    """Require the pod `spec` (changed in place) to run on one of `nodes`, whatever node affinity it had.

    A node field selector takes exactly one value (kube-apiserver's ValidateNodeFieldSelectorRequirement: "must be
    only one value when `operator` is 'In' or 'NotIn' for node field selector"), so each planned node has terms of
    its own: every term of the template's, with `metadata.name In [node]` ANDed in. Terms are ORed: the pods may
    go where the template allowed, and only to a planned node."""
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchFields": [*(term.get("matchFields") or []),
                                 {"key": "metadata.name", "operator": "In", "values": [node]}]}
        for node in sorted(set(nodes)) for term in terms]


def require_any(spec: dict[str, Any], alternatives: list[dict[str, Any]]) -> None:
    """Require the pod `spec` (changed in place) to run on a node meeting one of `alternatives` (node selector
    requirements) as well as what its node affinity asked: each term of the template's, once per alternative,
    with that requirement ANDed in (terms are ORed)."""
    if not alternatives:
        return
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    required["nodeSelectorTerms"] = [
        {**term, "matchExpressions": [*(term.get("matchExpressions") or []), requirement]}
        for requirement in alternatives for term in terms]


def job_manifest(attempt: Attempt, *, prefix: str, ttl_seconds: int,
                 priority_classes: dict[str, str] | None = None) -> dict[str, Any]:
    ours, names = labelled(attempt, prefix)
    engine = attempt.engine
    annotations: dict[str, str] = dict(names)
    if engine is not None and engine.kind == "kai":
        ours[KAI_QUEUE_LABEL] = engine.queue
        annotations.update(_topology_annotations(engine))
    elif engine is not None and engine.kind == "kueue":
        ours[KUEUE_QUEUE_LABEL] = engine.queue
    name = job_name(attempt.workload_id, attempt.attempt)
    template = _filled(copy.deepcopy(attempt.pod_template or {}), attempt, name)
    spec = template.setdefault("spec", {})
    spec["restartPolicy"] = "Never"
    if has_peers(attempt):
        spec["subdomain"] = name  # the headless Service (`service_manifest`)
        _rendezvous(spec, attempt, name)
    if attempt.tasks or attempt.files:
        _osmo_volumes(spec, attempt, name)
    if attempt.nodes and engine is None:
        pin_to_nodes(spec, attempt.nodes)
    priority_class = (engine.priority_class if engine is not None else "") or \
        (priority_classes or {}).get(attempt.priority)
    if priority_class:
        spec["priorityClassName"] = priority_class
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **ours}
    if engine is not None and engine.kind == "kai":
        spec["schedulerName"] = KAI_SCHEDULER
        group = attempt.gang.lead_job if attempt.gang else name  # a gang's members are one PodGroup
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations, KAI_POD_GROUP: group,
                                   KAI_SKIP_GROUPER: "true"}
    elif names:  # the pods' too: the sync reads a pod's pool from them
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **names}
    job_spec: dict[str, Any] = {
        "parallelism": attempt.replicas, "completions": attempt.replicas, "completionMode": "Indexed",
        "backoffLimit": 0, "ttlSecondsAfterFinished": ttl_seconds, "template": template,
    }
    if len(attempt.tasks) > 1 and (attempt.gang is None or attempt.gang.lead):
        # an OSMO group: its lead (replica 0) decides its end; the others are then stopped
        job_spec["successPolicy"] = {"rules": [{"succeededIndexes": "0"}]}
    if engine is not None and engine.kind == "kueue":
        job_spec["suspend"] = True
    if attempt.exec_timeout_seconds:
        job_spec["activeDeadlineSeconds"] = attempt.exec_timeout_seconds
    job_metadata: dict[str, Any] = {"name": name, "namespace": attempt.namespace, "labels": ours}
    if annotations:
        job_metadata["annotations"] = annotations
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": job_metadata, "spec": job_spec}


def podgroup_manifest(attempt: Attempt, job: dict[str, Any], *, prefix: str) -> dict[str, Any]:
    """KAI's PodGroup of a Job (KAI backends): the gang of all replicas, in the Job's queue, owned by the Job so
    that deleting the Job deletes it. A gang of several members has one, the lead member's, of all their pods."""
    engine = attempt.engine
    assert engine is not None and engine.kind == "kai"
    spec: dict[str, Any] = {"minMember": attempt.gang.size if attempt.gang else attempt.replicas, "queue": engine.queue,
                            "preemptibility": "preemptible" if engine.preemptible else "non-preemptible"}
    if engine.priority_class:
        spec["priorityClassName"] = engine.priority_class
    if engine.topology and (engine.required or engine.preferred):
        constraint = {"topology": engine.topology}
        if engine.required:
            constraint["requiredTopologyLevel"] = engine.required
        if engine.preferred:
            constraint["preferredTopologyLevel"] = engine.preferred
        spec["topologyConstraint"] = constraint
    owner = _owner(job)
    ours, names = labelled(attempt, prefix)
    return {"apiVersion": PODGROUP_API, "kind": "PodGroup",
            "metadata": {"name": job_name(attempt.workload_id, attempt.attempt), "namespace": attempt.namespace,
                         "labels": ours, **({"annotations": names} if names else {}),
                         **({"ownerReferences": owner} if owner else {})},
            "spec": spec}


def _owner(job: dict[str, Any]) -> list[dict[str, Any]]:
    metadata = job.get("metadata") or {}
    return [{"apiVersion": "batch/v1", "kind": "Job", "name": metadata.get("name"), "uid": metadata["uid"],
             "blockOwnerDeletion": False}] if metadata.get("uid") else []


def service_manifest(attempt: Attempt, job: dict[str, Any], *, prefix: str) -> dict[str, Any]:
    """The headless Service of a gang's Job (`has_peers`): named as the Job (the pods' `subdomain`), selecting its
    pods by the label the Job controller gives them, publishing them before they are ready (peers meet while
    starting), owned by the Job so that deleting the Job deletes it."""
    name = job_name(attempt.workload_id, attempt.attempt)
    ours, names = labelled(attempt, prefix)
    owner = _owner(job)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": attempt.namespace, "labels": ours,
                         **({"annotations": names} if names else {}), **({"ownerReferences": owner} if owner else {})},
            "spec": {"clusterIP": "None", "selector": {JOB_NAME_LABEL: name}, "publishNotReadyAddresses": True}}


def files_manifest(attempt: Attempt, job: dict[str, Any], *, prefix: str) -> dict[str, Any]:
    """The ConfigMap of an OSMO group's `files` (`file-<n>`, tokens filled as in the pods), owned by the Job."""
    name = job_name(attempt.workload_id, attempt.attempt)
    ours, names = labelled(attempt, prefix)
    owner = _owner(job)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": attempt.namespace, "labels": ours,
                         **({"annotations": names} if names else {}), **({"ownerReferences": owner} if owner else {})},
            "data": {osmo_groups.file_key(index): _filled(item["contents"], attempt, name)
                     for index, item in enumerate(attempt.files)}}


def owned_by(job: dict[str, Any], workload_id: str, prefix: str) -> bool:
    """Whether a Job read back after a 409 is this workload's (and ours)."""
    found = (job.get("metadata") or {}).get("labels") or {}
    return found.get(f"{prefix}workload") == workload_id and found.get(f"{prefix}{MANAGED}") == MANAGED_VALUE
