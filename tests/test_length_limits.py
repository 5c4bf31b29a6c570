"""Every length limit is checked before the database, naming the field (issue 39 point 6): a 129-character pool
name answered `the database refused a value: value too long for type character varying(128)` with field null.
This walks every text column (CharField with a max_length, no choices) of both apps: each is either written from
what a caller sends, and then its door is asked for a value one character over the column's length and must
answer a 4xx naming the field (the CLI: a message naming the option), or is written by the server itself, with
the reason it can never be too long. A new column fails the first test until it is put in one of the two."""

import json
from datetime import timedelta

import pytest
from django.apps import apps
from django.core.management import CommandError
from django.db import models
from django.utils import timezone

from tests.support import commands
from tests.support.fleet import pool_document

pytestmark = pytest.mark.django_db


def _columns() -> dict[str, int]:
    found = {}
    for model in apps.get_models():
        if model._meta.app_label not in ("pools", "scheduling"):
            continue
        for field in model._meta.get_fields():
            if isinstance(field, models.CharField) and field.max_length and not field.choices:
                found[f"{model._meta.label}.{field.name}"] = field.max_length
    return found


def _config(kind: str, document: dict):
    return lambda api, _client: api.put(f"/api/configs/{kind}/", document, format="json")


def _pool(**fields):
    return {"pools": {"p1": pool_document(**fields)}}


def _workload(**fields):
    body = {"name": "w", "image": "busybox", **fields}
    return lambda api, _client: api.post("/api/workloads/", body, format="json")


def _timeout_door(key: str):
    """A pool whose timeout `key` is a valid ISO-8601 duration as long as the value given."""
    return lambda v: _config("pool", _pool(**{key: "P" + "1" * (len(v) - 2) + "D"}))


def _cli(*args: str):
    return lambda _api, _client: commands.run(*args)


# column -> (the door, given a value one character too long: api, client -> response (or CLI output), the field
# (or the CLI option) the refusal names)
DOORS = {
    "pools.Pool.name": (lambda v: _config("pool", {"pools": {v: pool_document()}}), "name"),
    "pools.Platform.name": (lambda v: _config("pool", _pool(platforms={v: {}}, default_platform="")), "p1.platforms"),
    "pools.Pool.default_platform": (lambda v: _config("pool", _pool(platforms={v: {}}, default_platform=v)),
                                    "p1.platforms"),
    **{f"pools.Pool.{key}": (_timeout_door(key), f"p1.{key}") for key in (
        "default_exec_timeout", "default_queue_timeout", "max_exec_timeout", "max_queue_timeout")},
    "pools.PodTemplate.name": (lambda v: _config("pod_template", {v: {"spec": {}}}), "name"),
    "pools.ResourceValidation.name": (lambda v: _config("resource_validation", {v: []}), "name"),
    "pools.Department.name": (lambda v: _config("department", {v: {"name": v}}), "name"),
    "pools.Project.name": (lambda v: _config("project", {v: {"name": v}}), "name"),
    "pools.Project.namespace": (lambda v: _config("project", {"pj": {"namespace": v}}), "pj.namespace"),
    "pools.ProjectMember.name": (lambda v: _config("project", {"pj": {"members": {"users": [v]}}}),
                                 "pj.members.users"),
    "pools.Role.name": (lambda v: _config("role", {"name": v, "policies": []}), "name"),
    "pools.AccessToken.name": (lambda v: lambda api, _client: api.post(
        f"/api/auth/access_token/{v}", {"expires_at": (timezone.now() + timedelta(days=30)).date().isoformat()},
        format="json"), "name"),
    "pools.Backend.name": (lambda v: _cli("backend", "add", v, "--simulated"), "backend name"),
    "pools.Backend.kubeconfig_path": (lambda v: _cli("backend", "add", "b", "--kubeconfig", "/" + v[1:]),
                                      "--kubeconfig"),
    "pools.Backend.kube_context": (lambda v: _cli("backend", "add", "b", "--simulated", "--context", v), "--context"),
    "pools.Backend.same_cluster_as": (lambda v: _cli("backend", "add", "b", "--simulated", "--same-cluster-as", v),
                                      "--same-cluster-as"),
    "scheduling.Workload.name": (lambda v: _workload(name=v), "name"),
    "scheduling.Workload.workflow": (lambda v: _workload(workflow=v), "workflow"),
    "scheduling.Workload.group": (lambda v: _workload(group=v), "group"),
    "scheduling.Workload.exec_timeout": (lambda v: _workload(exec_timeout="P" + "1" * (len(v) - 2) + "D"),
                                         "exec_timeout"),
    "scheduling.Workload.queue_timeout": (lambda v: _workload(queue_timeout="P" + "1" * (len(v) - 2) + "D"),
                                          "queue_timeout"),
    "scheduling.Credential.name": (lambda v: lambda api, _client: api.post(
        f"/api/credentials/{v}", {"generic_credential": {"credential": {"k": "v"}}}, format="json"), "name"),
    "scheduling.Credential.profile": (lambda v: lambda api, _client: api.post("/api/credentials/c", {
        "data_credential": {"access_key_id": "i", "access_key": "k", "endpoint": f"s3://bkt/{v[9:]}"}},
        format="json"), "data_credential.endpoint"),
    **{f"scheduling.DataStore.{key}": (lambda v, option=option, good=good: _cli(
        "storage", "set", "default", *[word for name, value in good.items()
                                       for word in (name, v if name == option else value)]), option)
       for key, option, good in [(key, f"--{key}", {"--endpoint": "http://s3.local", "--bucket": "bkt",
                                                   "--prefix": "p", "--region": "us-east-1"})
                                 for key in ("endpoint", "bucket", "prefix", "region")]},
    "scheduling.NotificationPreference.webhook_url": (lambda v: lambda api, _client: api.put(
        "/api/profile/notifications/", {"webhook_url": "https://hooks.example.com/" + v[26:]}, format="json"),
        "webhook_url"),
}

# Columns the server writes itself, and why no caller's value can be too long for them.
SERVER_WRITTEN = {
    # What the cluster says, as the sync stores it: names and uids are bounded by the API server (names 253,
    # uids 36, resourceVersions well under 64), the phase and kinds are its enums.
    **dict.fromkeys(["pools.Node.name", "pools.Node.uid", "pools.Node.gpu_product", "pools.Node.gpu_family",
                     "pools.Node.status", "pools.Pod.uid", "pools.Pod.namespace", "pools.Pod.name",
                     "pools.Pod.node_name", "pools.Pod.phase", "pools.Pod.component", "pools.Pod.pool",
                     "pools.NodeEvent.node", "pools.NodeEvent.kind", "pools.ManagedJob.namespace",
                     "pools.ManagedJob.name", "pools.ManagedJob.workload", "pools.Backend.nodes_resource_version",
                     "pools.Backend.pods_resource_version", "pools.Backend.jobs_resource_version",
                     "pools.Backend.engine_resource_version", "pools.Backend.events_resource_version",
                     "pools.Backend.cluster_uid", "pools.SyncLog.level",
                     "scheduling.LogArchive.namespace", "scheduling.LogArchive.pod", "scheduling.LogArchive.container",
                     "scheduling.LogArchive.node", "scheduling.LogArchive.pod_ip", "scheduling.LogArchive.phase",
                     "scheduling.UsageInterval.pod_uid", "scheduling.UsageInterval.namespace",
                     "scheduling.UsageInterval.pod_name", "scheduling.UsageInterval.node_name"],
                    "the cluster's own values, as the sync reads them"),
    "scheduling.UsageHour.work_kind": "a copy of the workload's kind, one of scheduling.models.Kind's choices",
    # Copies of names a door above already bounds (pool, platform, project, department names: 128; user names:
    # Django's 150), kept on rows of history, usage and audit.
    **dict.fromkeys(["pools.ConfigRevision.name", "pools.ConfigRevision.author_name", "pools.AuditEvent.actor",
                     "pools.AuditEvent.token", "pools.AuditEvent.object", "pools.RoleAssignment.assigned_by",
                     "pools.AccessToken.created_by", "scheduling.Workload.project_name",
                     "scheduling.Workload.department_name", "scheduling.Workload.submitter_name",
                     "scheduling.Workload.pool_name", "scheduling.Workload.platform", "scheduling.Workflow.name",
                     "scheduling.Workflow.base", "scheduling.Workflow.submitter_name",
                     "scheduling.NotificationPreference.updated_by", "scheduling.Notification.target",
                     "scheduling.Notification.subject", "scheduling.UsageInterval.pool",
                     "scheduling.UsageInterval.platform", "scheduling.UsageInterval.project",
                     "scheduling.UsageInterval.department", "scheduling.UsageInterval.user",
                     "scheduling.UsageInterval.workload", "scheduling.UsageInterval.priority",
                     "scheduling.CapacityInterval.pool", "scheduling.UsageHour.pool", "scheduling.UsageHour.platform",
                     "scheduling.UsageHour.project", "scheduling.UsageHour.department", "scheduling.UsageHour.user",
                     "scheduling.ProjectPoolHour.pool", "scheduling.ProjectPoolHour.project",
                     "scheduling.ProjectPoolHour.department", "scheduling.PoolHour.pool",
                     "pools.SignInFailure.username"],
                    "a copy of a name whose door bounds it, or of a user name (150)"),
    # Made by the server: digests, prefixes, ids, our own codes and Kubernetes names we derive.
    **dict.fromkeys(["pools.AccessToken.digest", "pools.AccessToken.prefix", "pools.AuditEvent.request_id",
                     "pools.AuditEvent.kind", "pools.AuditEvent.action", "pools.AuditEvent.previous_hash",
                     "pools.AuditEvent.hash", "pools.Backend.sync_lease_owner", "pools.TablePreference.table",
                     "scheduling.Workload.job_name", "scheduling.Workload.namespace", "scheduling.Workload.stop_status",
                     "scheduling.Workload.stop_reason", "scheduling.WorkloadEvent.reason"],
                    "made by the server"),
}


def test_every_text_column_is_either_written_through_a_door_checked_here_or_by_the_server():
    columns = set(_columns())
    assert not set(DOORS) & set(SERVER_WRITTEN)
    assert columns - set(DOORS) - set(SERVER_WRITTEN) == set(), "a new column: add its door to DOORS, or say why"
    assert set(DOORS) | set(SERVER_WRITTEN) <= columns, "a column named here is gone"


@pytest.mark.parametrize("column", sorted(DOORS))
def test_one_character_over_the_column_is_refused_naming_the_field(column, api, client, defaults):
    door, field = DOORS[column]
    length = _columns()[column] + 1
    value = "a" * length
    try:
        answer = door(value)(api, client)
    except CommandError as exc:  # the CLI: one paragraph naming the option
        message = str(exc)
        assert field in message and "database" not in message, message
        return
    body = answer.json()
    assert 400 <= answer.status_code < 500, (answer.status_code, body)
    assert body["field"] == field and "database" not in body["detail"], json.dumps(body)
