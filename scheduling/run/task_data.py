"""An OSMO task's data and credentials at dispatch (scheduling.specs.task_data builds the pod's part): the attempt's
Secret is written in the project's namespace, owned by the Job (the garbage collector deletes it with the Job), and
the pod spec names it. Credentials are opened here only, to be sent to the API server; nothing of them is logged,
kept in an event or put in the pod spec.

At submission, `with_stores` refuses the candidate pools that have no data store when the task moves data (its
inputs, its outputs): the copy would have nowhere to go."""

from dataclasses import replace

from django.conf import settings
from django.db.models import Q

from pools.engine import kube_names
from scheduling.models import Credential, DataStore, Workload
from scheduling.specs import data
from scheduling.specs import task_data as pure
from scheduling.specs.jobs import MANAGED, MANAGED_VALUE, USER_CONTAINER
from scheduling.specs.requests import WorkloadRequest


def moves_data(request: WorkloadRequest) -> bool:
    return bool(request.inputs or request.outputs)


def with_stores(verdicts: list, request: WorkloadRequest) -> list:
    """The pipeline's verdicts, with the accepted pools that have no data store refused when the task moves data."""
    if not moves_data(request):
        return verdicts
    stored = set(DataStore.objects.filter(pool__name__in=[v.pool for v in verdicts if v.accepted])
                 .values_list("pool__name", flat=True))
    return [v if not v.accepted or v.pool in stored else replace(
        v, accepted=False, step="data", code="NO_DATA_STORE",
        message=f"pool {v.pool} has no data store for the task's inputs and outputs (an admin sets one: "
                "`manage.py storage set`)") for v in verdicts]


UNREAD = object()  # `pod_data`'s store not read by the caller: read here


def pod_data(workload: Workload, secret: str, store_row: "DataStore | object | None" = UNREAD) -> pure.PodData:
    """`store_row`: the pool's DataStore (or None) when the caller read it already (dispatch's locked read)."""
    request = workload.request or {}
    inputs = data.parse_inputs(request.get("inputs"))
    outputs = data.parse_outputs(request.get("outputs"))
    uses = data.parse_credentials(request.get("credentials"))
    if not (workload.workflow or inputs or outputs):
        row = None
    elif store_row is UNREAD:
        row = DataStore.objects.filter(pool_id=workload.pool_id).first()
    else:
        row = store_row
    store = pure.Store(row.endpoint, row.bucket, row.prefix, row.region) if row is not None else None
    buckets = {data.split_url(item.url)[0] for item in [*inputs, *outputs] if item.url}
    names = {use.name for use in uses}
    owned = list(Credential.objects.filter(Q(name__in=names) | Q(cred_type=Credential.Type.DATA),
                                           user_id=workload.submitter_id)) if names or buckets else []
    payloads = {c.name: c.payload() for c in owned if c.name in names or c.cred_type == Credential.Type.DATA}
    data_credentials = {}
    for credential in owned:
        if credential.cred_type == Credential.Type.DATA and credential.profile.startswith("s3://"):
            bucket = data.split_url(credential.profile)[0]
            if bucket in buckets:
                data_credentials.setdefault(bucket, credential.name)
    if row is not None:
        payloads[""] = row.payload()
    return pure.plan(secret=secret, inputs=inputs, outputs=outputs, credentials=uses, payloads=payloads, store=store,
                     owner=workload.submitter_name or "anonymous", workflow=workload.workflow,
                     group=workload.group or workload.name, data_credentials=data_credentials)


def prepare(workload: Workload, manifest: dict, store_row: "DataStore | object | None" = UNREAD) -> pure.PodData:
    """Adds the task's data to the Job manifest (in place); the Secret it names is created by dispatch once the Job
    exists (`secret_body`). `store_row`: as `pod_data`'s."""
    pod = pod_data(workload, f"{manifest['metadata']['name']}-data", store_row)
    pure.apply(manifest["spec"]["template"]["spec"], pod, settings.OSMO_DATA_COPY_IMAGE, USER_CONTAINER)
    return pod


def secret_body(workload: Workload, namespace: str, job: dict, pod: pure.PodData) -> dict | None:
    """The attempt's Secret, owned by its Job (dispatch creates it, or accepts an earlier try's), or None."""
    if pod.empty or not pod.secret_data:
        return None
    labels = kube_names.labelled(settings.OSMO_LABEL_PREFIX, {MANAGED: MANAGED_VALUE, "workload": str(workload.pk)})[0]
    return pure.secret_manifest(pod.secret, namespace, labels, pod.secret_data, owner=job)
