"""The pure shapes of an OSMO task's data and credentials (scheduling.specs.data, scheduling.specs.task_data):
what is accepted, what is refused and the place each refusal names, the dependency graph, and the pod's data steps
(order, the Secret's keys, no value in the pod spec)."""

import base64
import json

import pytest

from pools.engine import ConfigError
from scheduling.specs import data, task_data


def refused(function, *args) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        function(*args)
    return caught.value


@pytest.mark.parametrize(("value", "field"), [
    ([{"url": "gs://bucket/x"}], "inputs[0].url"),
    ([{"url": "s3://B/x"}], "inputs[0].url"),
    ([{"url": "s3://bucket/../x"}], "inputs[0].url"),
    ([{"task": "a", "url": "s3://bucket"}], "inputs[0]"),
    ([{"dataset": {"name": "d:v2"}}], "inputs[0].dataset.name"),
    ([{"task": "a", "regex": "("}], "inputs[0].regex"),
    ([{"tsk": "a"}], "inputs[0].tsk"),
    ([{"task": "a"}] * (data.MAX_INPUTS + 1), "inputs"),
])
def test_inputs_refused_naming_the_place(value, field):
    assert refused(data.parse_inputs, value).field == field


@pytest.mark.parametrize(("value", "field"), [
    ({"9x": "/a"}, "credentials.9x"),
    ({"c": "relative"}, "credentials.c"),
    ({"c": "/osmo/data/x"}, "credentials.c"),
    ({"c": {"1BAD": "k"}}, "credentials.c.1BAD"),
    ({"c": {"GOOD": "bad/key"}}, "credentials.c.GOOD"),
    ({"c": {"A": "k"}, "d": {"A": "k"}}, "credentials.d.A"),
    ({"c": "/a", "d": "/a"}, "credentials.d"),
])
def test_credential_uses_refused_naming_the_place(value, field):
    assert refused(data.parse_credentials, value).field == field


def test_a_long_chain_is_checked_without_nesting_and_a_cycle_is_named():
    tasks = [data.TaskDeps(f"workflow.tasks[{i}]", f"t{i}", f"g{i}",
                           [data.TaskInput(task=f"t{i - 1}")] if i else []) for i in range(1000)]
    assert data.dependencies(tasks)["g999"] == ["g998"]
    tasks[0] = data.TaskDeps("workflow.tasks[0]", "t0", "g0", [data.TaskInput(task="t999")])
    error = refused(data.dependencies, tasks)
    assert error.field == "workflow.tasks[0].inputs[0].task" and "g0 -> g999 -> g998" in error.message


def test_a_credential_body_is_osmos_and_no_refusal_echoes_a_value():
    stored = data.credential_body({"data_credential": {"access_key_id": "id", "access_key": "zq-secret",
                                                       "endpoint": "s3://bucket-a"}})
    assert (stored.cred_type, stored.profile) == ("DATA", "s3://bucket-a")
    error = refused(data.credential_body, {"generic_credential": {"credential": {"bad key": "zq-secret"}}})
    assert error.field == "generic_credential.credential.bad key" and "zq-secret" not in error.message
    error = refused(data.credential_body, {"generic_credential": {"credential": {"k": "x" * 70_000}}})
    assert "over the limit" in error.message


def test_the_pod_gets_its_steps_in_order_and_its_values_only_through_the_secret():
    pod = task_data.plan(
        secret="wl-1-data", inputs=[data.TaskInput(task="a", group="a-group"), data.TaskInput(url="s3://ext/p")],
        outputs=[data.TaskOutput(url="s3://ext/out")], credentials=data.parse_credentials({"hf": {"T": "token"}}),
        payloads={"hf": {"token": "zq-1"}, "mine": {"access_key_id": "i", "access_key": "zq-2"},
                  "": {"access_key_id": "s", "access_key": "zq-3"}},
        store=task_data.Store("http://s3.local", "store", "pre"), owner="ann", workflow="wf-1", group="b-group",
        data_credentials={"ext": "mine"})
    spec = {"containers": [{"name": "user", "image": "u", "command": ["python"], "args": ["train.py"]}]}
    task_data.apply(spec, pod, "python:3.12-alpine")
    assert [(c["name"], c.get("restartPolicy")) for c in spec["initContainers"]] == [
        ("osmo-download", None), ("osmo-upload", "Always")]
    assert spec["containers"][0]["command"][-3:] == ["osmo-task", "python", "train.py"]
    plan = json.loads(spec["initContainers"][0]["env"][0]["value"])
    assert [(d["bucket"], d["prefix"], d["dest"], d["cred"]) for d in plan["downloads"]] == [
        ("store", "pre/ann/wf-1/a-group", "/osmo/data/input/0", "STORE"), ("ext", "p", "/osmo/data/input/1", "C0")]
    assert [(u["bucket"], u["prefix"]) for u in plan["uploads"]] == [("store", "pre/ann/wf-1/b-group"), ("ext", "out")]
    assert sorted(pod.secret_data) == ["copy.C0.id", "copy.C0.key", "copy.STORE.id", "copy.STORE.key", "hf.token"]
    assert "zq-" not in json.dumps(spec)
    manifest = task_data.secret_manifest("wl-1-data", "ns", {}, pod.secret_data)
    assert base64.b64decode(manifest["data"]["hf.token"]) == b"zq-1"
