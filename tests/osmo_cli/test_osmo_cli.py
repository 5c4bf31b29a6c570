"""OSMO's CLI against a served site (live_server), every command as the CLI sends it (tests/osmo_cli/client.py), each
answer's shape checked field by field against what the CLI reads. The world is tests/support/workloads.py's (seed
002's pool, a `training` pool, projects vision and nlp); the token is made with `manage.py token create`."""

import datetime as dt
import time

import pytest
import yaml

from pools.models import Pool, Profile
from scheduling.models import Workload
from tests.osmo_cli.client import PLAIN, OsmoClient, OsmoError, claims
from tests.scheduling.conftest import SHARED
from tests.support.commands import run

OSMO_TIME = "%Y-%m-%dT%H:%M:%S.%f"
TEMPLATED = """workflow:
  name: "{{ name }}"
  resources:
    big: {gpu: 2, cpu: 2, memory: 4Gi}
  groups:
  - name: train
    tasks:
    - name: worker-0
      image: nvcr.io/nvidia/pytorch:24.05-py3
      command: [python, train.py, "--data={{ dataset }}"]
      resource: big
    - name: worker-1
      image: nvcr.io/nvidia/pytorch:24.05-py3
      command: [python, train.py, "--data={{ dataset }}"]
      resource: big
default-values:
  name: templated-train
  dataset: mnist
"""
USAGE_FIELDS = {"quota_used", "quota_free", "quota_limit", "total_usage", "total_capacity", "total_free"}


def osmo_time(value: str) -> dt.datetime:
    """Parsed as the CLI parses it (convert_utc_datetime_to_user_zone): a `Z` or an offset fails."""
    return dt.datetime.strptime(value.replace("T", " "), OSMO_TIME.replace("T", " "))


def is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@pytest.fixture
def osmo(world, live_server):
    secret = run("token", "create", "researcher", "laptop", "--expires-days", "7").strip()
    client = OsmoClient(live_server.url)
    client.login(secret)
    # Our own door for what OSMO has no word for: the project the researcher's workflows count against.
    assert client.request("PATCH", "api/profile/", payload={"default_project": "vision"})["default_project"] == \
        "vision"
    return client


@pytest.fixture
def staff_osmo(world, live_server, django_user_model):
    django_user_model.objects.create_user("ops", is_staff=True, is_superuser=True)
    client = OsmoClient(live_server.url)
    client.login(run("token", "create", "ops", "admin-laptop").strip())
    return client


def test_login_answers_a_jwt_the_cli_reads_and_refresh_posts_again(world, live_server):
    secret = run("token", "create", "researcher", "laptop", "--expires-days", "7").strip()
    client = OsmoClient(live_server.url)

    answer = client.login(secret)

    read = claims(answer["token"])
    assert read["name"] == client.name == "researcher" and read["exp"] > time.time()
    # The CLI refreshes when exp is within 3 s: make it so, and the next call posts the same path again.
    first = client.id_token
    client.id_token = first.split(".")[0] + "." + _with_exp(first, time.time()) + "." + first.split(".")[2]
    assert client.profile_list()["profile"]["username"] == "researcher"
    assert client.refreshes == 1 and client.id_token != first
    # The stale token itself, its payload changed, is refused: the signature no longer matches.
    client.id_token = first.split(".")[0] + "." + _with_exp(first, time.time() + 60) + "." + first.split(".")[2]
    with pytest.raises(OsmoError) as forged:
        client.profile_list()
    assert forged.value.status == 401


def _with_exp(jwt: str, exp: float) -> str:
    import base64
    import json

    body = {**claims(jwt), "exp": int(exp)}
    return base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")


def test_every_command_of_the_cli_against_the_served_site(osmo, staff_osmo, world):
    # ---- osmo pool list ----------------------------------------------------------------------------------------
    pools = osmo.pool_list()
    assert set(pools) == {"node_sets", "resource_sum"} and set(pools["resource_sum"]) == USAGE_FIELDS
    listed = {p["name"]: p for s in pools["node_sets"] for p in s["pools"]}
    assert set(listed) == {"default", SHARED, "training"}
    for pool in listed.values():
        assert set(pool) == {"name", "description", "status", "resource_usage"}
        assert set(pool["resource_usage"]) == USAGE_FIELDS and all(map(is_number, pool["resource_usage"].values()))
    training = listed["training"]["resource_usage"]
    assert (training["total_capacity"], training["quota_limit"], training["total_free"]) == (16, 4, 16)
    assert pools["resource_sum"]["total_capacity"] == 16 + 8 + 8  # each node once
    one = osmo.pool_list(pools=["training"])
    assert [p["name"] for s in one["node_sets"] for p in s["pools"]] == ["training"]

    # ---- osmo profile list / set pool ---------------------------------------------------------------------------
    settings = osmo.profile_list()
    assert set(settings) == {"profile", "pools", "roles", "token"}
    assert set(settings["profile"]) == {"username", "email_notification", "slack_notification", "pool"}
    assert settings["profile"]["pool"] is None and set(settings["pools"]) == {"default", SHARED, "training"}
    assert settings["token"]["name"] == "laptop" and osmo_time(settings["token"]["expires_at"])
    assert sorted(settings["roles"]) == ["osmo-shared", "osmo-training"]
    osmo.profile_set_pool("training")
    assert osmo.profile_list()["profile"]["pool"] == "training"
    with pytest.raises(OsmoError) as refused:
        osmo.profile_set_pool("no-such-pool")
    assert refused.value.status == 400 and '"field":"pool"' in refused.value.text.replace(" ", "")
    # What the CLI prints is the message alone, not the JSON it came in (an error_code says it is OSMO-shaped).
    assert refused.value.code == "USER" and refused.value.message.startswith("pool: ")
    assert not refused.value.message.startswith("{")

    # ---- osmo resource list (no --pool: the profile's pool) / resource info ------------------------------------
    resources = osmo.resource_list()["resources"]
    assert {r["hostname"] for r in resources} == {"training-h100-000", "training-h100-001"}
    for resource in resources:
        assert {"hostname", "exposed_fields", "resource_type", "allocatable_fields", "usage_fields",
                "platform_allocatable_fields", "pool_platform_labels", "config_fields", "taints",
                "backend"} <= set(resource)
        assert resource["exposed_fields"]["node"] == resource["hostname"]
        assert resource["exposed_fields"]["pool/platform"] == ["training/h100"]
        assert set(resource["allocatable_fields"]) == set(resource["usage_fields"]) == {"cpu", "gpu", "memory",
                                                                                      "storage"}
        assert resource["allocatable_fields"]["gpu"] == 8 and resource["allocatable_fields"]["cpu"] == 128
        assert resource["allocatable_fields"]["memory"] == 1024 * 1024 ** 3  # bytes: the CLI reads a number so
        assert resource["resource_type"] in ("RESERVED", "SHARED", "UNUSED")
    every = osmo.resource_list(pools=[SHARED], platforms=["a100_platform"])["resources"]
    assert [r["exposed_fields"]["pool/platform"] for r in every] == [[f"{SHARED}/a100_platform"]]
    with pytest.raises(OsmoError, match="does not exist"):
        osmo.resource_list(pools=["no-such-pool"])
    info = osmo.resource_info("training-h100-000")["resources"]
    assert len(info) == 1 and info[0]["pool_platform_labels"] == {"training": ["h100"]}
    assert set(info[0]["config_fields"]["training"]["h100"]) == {"host_network", "privileged", "default_mounts",
                                                                 "allowed_mounts"}
    assert {"cpu", "gpu", "memory", "storage", "node", "pool/platform"} == set(info[0]["exposed_fields"])
    with pytest.raises(OsmoError) as missing:
        osmo.resource_info("no-such-node")
    assert missing.value.status == 404 and missing.value.text.startswith("{")
    assert missing.value.code == "NOTFOUND" and "no-such-node" in missing.value.message

    # ---- osmo workflow submit: plain, templated with --set, dry run, without --pool ------------------------------
    plain = osmo.submit(PLAIN, pool="training")
    assert set(plain) >= {"name", "overview", "logs", "spec", "dashboard_url", "warnings"}
    assert plain["name"] == "plain-train-1" and isinstance(plain["spec"], str)
    dry = osmo.submit(TEMPLATED, pool="training", set_variables=["dataset=imagenet"], dry_run=True)
    assert isinstance(dry["spec"], str) and "--data=imagenet" in dry["spec"]
    assert yaml.safe_load(dry["spec"])["workflow"]["name"] == "templated-train"
    assert not Workload.objects.filter(workflow__startswith="templated-train").exists()
    templated = osmo.submit(TEMPLATED, pool="training", set_variables=["dataset=imagenet"])
    assert templated["name"] == "templated-train-1"
    stored = Workload.objects.get(workflow="templated-train-1")
    assert stored.request["command"] == ["python", "train.py", "--data=imagenet"] and stored.replicas == 2
    with pytest.raises(OsmoError) as unusable:  # a refused file: the CLI's "Workflow submit failed:", exit 1
        osmo.submit("workflow:\n  name: typo\n  tasks:\n  - name: t\n    image: busybox\n    comand: [ls]\n",
                    pool="training")
    assert unusable.value.status == 400 and unusable.value.code == "USAGE" and unusable.value.submission
    assert unusable.value.message.startswith("workflow.tasks[0].comand: unknown field")
    defaulted = osmo.submit(PLAIN)  # no --pool: the profile's pool
    assert Workload.objects.get(workflow=defaulted["name"]).pools == ["training"]

    # ---- osmo workflow list / query ---------------------------------------------------------------------------
    workflows = osmo.workflow_list()["workflows"]
    assert {w["name"] for w in workflows} == {"plain-train-1", "plain-train-2", "templated-train-1"}
    for workflow in workflows:
        assert {"user", "name", "submit_time", "status", "priority", "labels", "overview"} <= set(workflow)
        osmo_time(workflow["submit_time"])
    query = osmo.query("templated-train-1")
    assert query["submitted_by"] == "researcher" and query["status"] in ("PENDING", "RUNNING")
    osmo_time(query["submit_time"])
    assert [g["name"] for g in query["groups"]] == ["train"]
    tasks = query["groups"][0]["tasks"]
    assert [t["name"] for t in tasks] == ["worker-0", "worker-1"]
    for task in tasks:
        assert {"name", "retry_id", "status", "start_time"} <= set(task) and task["retry_id"] == 0
        assert task["start_time"] is None or osmo_time(task["start_time"])

    # ---- logs, error logs (no pod has run here: the CLI prints the one-line reason), events, spec -------------
    for error in (False, True):
        with pytest.raises(OsmoError) as no_pod:
            osmo.logs("templated-train-1", task="worker-1", last_n_lines=5, error=error)
        assert no_pod.value.status == 404 and no_pod.value.text.startswith('{"detail"')
    events = osmo.events("templated-train-1")
    assert events and all("[train] PENDING SUBMITTED" in line or "[train]" in line for line in events)
    osmo_time(events[0].split(" ", 1)[0])
    assert "--data=imagenet" in "\n".join(osmo.spec("templated-train-1"))
    assert "{{ dataset }}" in "\n".join(osmo.spec("templated-train-1", template=True))
    assert yaml.safe_load("\n".join(osmo.spec("plain-train-1")))["workflow"]["name"] == "plain-train"

    # ---- osmo workflow cancel ----------------------------------------------------------------------------------
    assert osmo.cancel("plain-train-1")["name"] == "plain-train-1"
    assert osmo.query("plain-train-1")["status"].startswith("FAILED") or \
        osmo.query("plain-train-1")["groups"][0]["stopping"]

    # ---- osmo token list / user list / version -----------------------------------------------------------------
    tokens = osmo.token_list()
    assert isinstance(tokens, list) and [t["token_name"] for t in tokens] == ["laptop"]
    assert {"token_name", "description", "expires_at", "roles"} <= set(tokens[0])
    dt.datetime.strptime(tokens[0]["expires_at"].split("T")[0], "%Y-%m-%d")
    with pytest.raises(OsmoError) as not_staff:
        osmo.user_list()
    assert not_staff.value.status == 403
    users = staff_osmo.user_list()
    assert {u["id"] for u in users["users"]} == {"researcher", "other", "ops"} and users["total_results"] == 3
    assert all(set(u) >= {"id", "created_at"} for u in users["users"])
    version = osmo.version()
    assert (version["major"], version["minor"], version["revision"]) == ("6", "4", "0")


def test_the_default_pool_is_used_by_our_own_api_too(osmo, researcher_api, world):
    osmo.profile_set_pool(SHARED)
    assert Profile.objects.get(user=world["researcher"]).default_pool == Pool.objects.get(name=SHARED)

    answer = researcher_api.post("/api/workloads/?dry_run=1", {
        "name": "no-pool", "project": "vision", "image": "busybox", "command": ["true"],
        "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}}, format="json")

    assert answer.status_code == 200, answer.json()
    assert [c["pool"] for c in answer.json()["candidates"]] == [SHARED]  # not the project's default, training
    assert researcher_api.get("/api/profile/").json()["default_pool"] == SHARED
