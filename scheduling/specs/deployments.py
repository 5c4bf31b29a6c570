"""The objects of a long-running workload (pure: no Django; issue 43, docs/researcher/kinds.md): a notebook is a
StatefulSet of one pod behind a headless Service, an inference a Deployment of N replicas behind a ClusterIP
Service, a compute a Deployment without a port (gpuctl writes the same kinds). A training stays the Indexed Job
of `scheduling.specs.jobs`.

Everything a Job carries carries over: our labels on the object and its pods, the planned nodes as a required node
affinity (the admission's plan binds on the default scheduler), the priority class, the engine's queue. What
differs:
- The object is named as the attempt's Job would be (`job_name`), so dispatch finds its own after a 409, and a
  resubmission of an inference (same row, same attempt) patches the same Deployment.
- `restartPolicy: Always` (the only one apps/v1 allows): a long-running pod is restarted in place, never retried
  by us.
- The selector is the workload label alone: selectors are immutable, and a rolling update changes everything else.
- A rolling update never surges (`maxSurge: 0`, `maxUnavailable: 1`): at no time does the Deployment hold more than
  its replicas' pods, so its quota use stays replicas x request all the while (the admission counts exactly that).
- A port becomes the user container's `http` port and a TCP readiness probe on it: a notebook is RUNNING, an
  inference replica counted ready, once it answers there.
- The Service is owned by the Deployment or StatefulSet (`owned_service`), so deleting the one removes the other."""

import copy
from typing import Any

from scheduling.specs.jobs import (
    KAI_QUEUE_LABEL,
    KAI_SCHEDULER,
    KUEUE_QUEUE_LABEL,
    USER_CONTAINER,
    Attempt,
    job_name,
    labelled,
    pin_to_nodes,
)

DEPLOYMENT, STATEFULSET, SERVICE = "Deployment", "StatefulSet", "Service"
MAIN_KIND = {"notebook": STATEFULSET, "inference": DEPLOYMENT, "compute": DEPLOYMENT}
PORT_NAME = "http"
# How often and how long a readiness probe waits (the kubelet's defaults, written out so that a reader sees them).
PROBE = {"periodSeconds": 10, "timeoutSeconds": 1, "failureThreshold": 3, "successThreshold": 1}


def selector(attempt: Attempt, prefix: str) -> dict[str, str]:
    return {f"{prefix}workload": attempt.workload_id}


def _user_container(spec: dict[str, Any]) -> dict[str, Any] | None:
    containers = spec.get("containers") or []
    for container in containers:
        if container.get("name") == USER_CONTAINER:
            return container
    return containers[0] if containers else None


def pod_template(attempt: Attempt, *, prefix: str, port: int | None,
                 priority_classes: dict[str, str] | None = None) -> dict[str, Any]:
    """The pod template of a long-running kind: the rendered template with our labels, the plan, the port."""
    ours, names = labelled(attempt, prefix)
    template = copy.deepcopy(attempt.pod_template or {})
    spec = template.setdefault("spec", {})
    spec["restartPolicy"] = "Always"
    engine = attempt.engine
    if attempt.nodes and engine is None:
        pin_to_nodes(spec, attempt.nodes)
    priority_class = (engine.priority_class if engine is not None else "") or \
        (priority_classes or {}).get(attempt.priority)
    if priority_class:
        spec["priorityClassName"] = priority_class
    if engine is not None and engine.kind == "kai":
        spec["schedulerName"] = KAI_SCHEDULER
        ours[KAI_QUEUE_LABEL] = engine.queue
    elif engine is not None and engine.kind == "kueue":
        ours[KUEUE_QUEUE_LABEL] = engine.queue
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **ours}
    if names:
        metadata["annotations"] = {**(metadata.get("annotations") or {}), **names}
    container = _user_container(spec)
    if port and container is not None:
        ports = [p for p in container.get("ports") or [] if p.get("name") != PORT_NAME
                 and p.get("containerPort") != port]
        container["ports"] = [*ports, {"name": PORT_NAME, "containerPort": port, "protocol": "TCP"}]
        container.setdefault("readinessProbe", {"tcpSocket": {"port": port}, **PROBE})
    return template


def _metadata(attempt: Attempt, prefix: str) -> dict[str, Any]:
    ours, names = labelled(attempt, prefix)
    engine = attempt.engine
    if engine is not None and engine.kind == "kueue":
        ours[KUEUE_QUEUE_LABEL] = engine.queue
    metadata: dict[str, Any] = {"name": job_name(attempt.workload_id, attempt.attempt),
                                "namespace": attempt.namespace, "labels": ours}
    if names:
        metadata["annotations"] = names
    return metadata


def main_manifest(attempt: Attempt, kind: str, *, prefix: str, port: int | None,
                  priority_classes: dict[str, str] | None = None) -> dict[str, Any]:
    """The Deployment (inference, compute) or StatefulSet (notebook) of `attempt`."""
    metadata = _metadata(attempt, prefix)
    template = pod_template(attempt, prefix=prefix, port=port, priority_classes=priority_classes)
    spec: dict[str, Any] = {"replicas": attempt.replicas, "selector": {"matchLabels": selector(attempt, prefix)},
                            "template": template}
    if MAIN_KIND[kind] == STATEFULSET:
        spec.update(serviceName=metadata["name"], podManagementPolicy="Parallel",
                    updateStrategy={"type": "RollingUpdate"})
        return {"apiVersion": "apps/v1", "kind": STATEFULSET, "metadata": metadata, "spec": spec}
    spec.update(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
                revisionHistoryLimit=2)
    return {"apiVersion": "apps/v1", "kind": DEPLOYMENT, "metadata": metadata, "spec": spec}


def owner_reference(owner: dict[str, Any]) -> list[dict[str, Any]]:
    """`owner` (as the API server answered it, with its uid) as the ownerReferences of what goes with it."""
    metadata = owner.get("metadata") or {}
    if not metadata.get("uid"):
        return []
    return [{"apiVersion": owner.get("apiVersion") or "apps/v1", "kind": owner.get("kind"),
             "name": metadata.get("name"), "uid": metadata["uid"], "blockOwnerDeletion": False}]


def service_manifest(attempt: Attempt, kind: str, *, prefix: str, port: int,
                     owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Service in front of the pods: headless for a notebook's StatefulSet (its pod's stable name), a
    ClusterIP for an inference's replicas. Named as its Deployment or StatefulSet."""
    metadata = _metadata(attempt, prefix)
    metadata.get("labels", {}).pop(KUEUE_QUEUE_LABEL, None)  # a Service is nothing Kueue queues
    if owner:
        metadata["ownerReferences"] = owner_reference(owner)
    spec: dict[str, Any] = {"selector": selector(attempt, prefix), "type": "ClusterIP",
                            "ports": [{"name": PORT_NAME, "port": port, "targetPort": port, "protocol": "TCP"}]}
    if MAIN_KIND[kind] == STATEFULSET:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = False
    return {"apiVersion": "v1", "kind": SERVICE, "metadata": metadata, "spec": spec}


def rollout_patch(main: dict[str, Any]) -> dict[str, Any]:
    """The merge patch that rolls a running Deployment to `main` (a new image, command, env, fewer replicas): its
    template and replicas; the selector, immutable, is the same by construction."""
    return {"metadata": {"labels": main["metadata"]["labels"]},
            "spec": {"replicas": main["spec"]["replicas"], "template": main["spec"]["template"]}}


def port_forward_line(namespace: str, name: str, port: int) -> str:
    """What to type without an Ingress: kubectl's port-forward to the Service, the same port locally."""
    return f"kubectl port-forward -n {namespace} service/{name} {port}:{port}"
