"""The objects dispatch writes for a workload of each kind (issue 43): a training's Job (and KAI's PodGroup, in
dispatch), a notebook's StatefulSet, an inference's or compute's Deployment; then, owned by it, the Service of a
kind with a port and, when an admin wrote a link template for its pool or backend, the Ingress
(`scheduling.specs.ingress`). Each is created under its fixed name; a 409 reads it back and accepts it when it is
this workload's; an inference's Deployment found that way is patched to the request (the rolling update of a
resubmission, `scheduling.submit.rollout`)."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from pools.cluster import Cluster, Conflict, ObjectKind
from pools.cluster.kinds import INGRESS, SERVICE, WORKLOAD_KINDS
from pools.cluster.retries import Retries
from pools.engine import ConfigError
from scheduling.models import Kind, Workload
from scheduling.specs import deployments, ingress
from scheduling.specs.jobs import Attempt, job_manifest, owned_by


@dataclass
class Main:
    kind: ObjectKind | None  # None: a batch/v1 Job (create_job, get_job)
    manifest: dict[str, Any]

    @property
    def word(self) -> str:
        return self.manifest["kind"]


def port_of(workload: Workload) -> int | None:
    """The port of a notebook or inference (its request's, else its kind's default); None for the others."""
    if workload.kind not in (Kind.NOTEBOOK, Kind.INFERENCE):
        return None
    return (workload.request or {}).get("port") or {"notebook": 8888, "inference": 8000}[workload.kind]


def main_of(workload: Workload, attempt: Attempt) -> Main:
    prefix = settings.OSMO_LABEL_PREFIX
    if workload.kind == Kind.TRAINING:
        return Main(None, job_manifest(attempt, prefix=prefix, ttl_seconds=settings.OSMO_JOB_TTL_SECONDS,
                                       priority_classes=settings.OSMO_PRIORITY_CLASSES))
    manifest = deployments.main_manifest(attempt, workload.kind, prefix=prefix, port=port_of(workload),
                                         priority_classes=settings.OSMO_PRIORITY_CLASSES)
    return Main(WORKLOAD_KINDS[manifest["kind"]], manifest)


def kind_of(workload: Workload) -> ObjectKind | None:
    """The kind of the workload's main object (None: a Job)."""
    if workload.kind == Kind.TRAINING:
        return None
    return WORKLOAD_KINDS[deployments.MAIN_KIND[workload.kind]]


def create(cluster: Cluster, main: Main, namespace: str) -> dict[str, Any]:
    if main.kind is None:
        return cluster.create_job(namespace, main.manifest)
    return cluster.create_object(main.kind, main.manifest, namespace=namespace)


def read(cluster: Cluster, main: Main, namespace: str) -> dict[str, Any]:
    name = main.manifest["metadata"]["name"]
    if main.kind is None:
        return cluster.get_job(namespace, name)
    return cluster.get_object(main.kind, name, namespace=namespace)


def roll(cluster: Cluster, main: Main, namespace: str) -> dict[str, Any]:
    """Found ours after a 409: a Deployment takes the request's template and replicas (a no-op when they are the
    same); a Job or StatefulSet is left as it is."""
    if main.kind is None or main.word != deployments.DEPLOYMENT:
        return read(cluster, main, namespace)
    return cluster.patch_object(main.kind, main.manifest["metadata"]["name"], deployments.rollout_patch(main.manifest),
                                namespace=namespace)


def ensure(cluster: Cluster, kind: ObjectKind, body: dict[str, Any], attempt: Attempt, prefix: str,
            retries: Retries) -> str:
    """Creates `body` (an object the main one owns: a Job's PodGroup, headless Service or files, a long-running
    kind's Service or Ingress); "" when it is there now (created, or found ours), else why it is not ours."""
    namespace = attempt.namespace
    try:
        retries.call(lambda: cluster.create_object(kind, body, namespace=namespace))
    except Conflict:
        existing = retries.call(lambda: cluster.get_object(kind, body["metadata"]["name"], namespace=namespace))
        if not owned_by(existing, attempt.workload_id, prefix):
            return f"A {kind.kind} {namespace}/{body['metadata']['name']} exists and is not this workload's."
    return ""


def companions(cluster: Cluster, workload: Workload, attempt: Attempt, main: dict[str, Any],
               retries: Retries, *, template: Callable[[Workload], dict | None]) -> tuple[str, str]:
    """The Service and Ingress of a kind with a port, owned by `main` (as the API server answered it). Returns
    (what was made, for the event; why one is not ours, or "")."""
    port = port_of(workload)
    if port is None:
        return "", ""
    prefix = settings.OSMO_LABEL_PREFIX
    made = []
    service = deployments.service_manifest(attempt, workload.kind, prefix=prefix, port=port, owner=main)
    not_ours = ensure(cluster, SERVICE, service, attempt, prefix, retries)
    if not_ours:
        return "", not_ours
    made.append(f"Service {attempt.namespace}/{service['metadata']['name']}")
    link = template(workload)
    if link is not None:
        try:
            body = ingress.ingress_manifest(link, ingress.Target.of(workload_values(workload), service, port),
                                            labels=service["metadata"]["labels"], owner=main)
        except ConfigError as exc:  # this workload's name makes no host: no link, the port-forward line stays
            made.append(f"no Ingress ({exc.message})")
            return ", ".join(made), ""
        not_ours = ensure(cluster, INGRESS, body, attempt, prefix, retries)
        if not_ours:
            return "", not_ours
        made.append(f"Ingress {attempt.namespace}/{body['metadata']['name']}")
    return ", ".join(made), ""


def workload_values(workload: Workload) -> dict[str, str]:
    """What a link template may name: the workload's name and short id, its project, submitter, namespace."""
    return {"name": workload.name, "id": workload.short_id, "project": workload.project_label,
            "user": workload.submitter_name, "namespace": workload.namespace or (
                workload.project.namespace if workload.project_id else "")}
