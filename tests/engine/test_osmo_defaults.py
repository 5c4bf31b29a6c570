"""The defaults NVIDIA OSMO ships, as real-world fixtures for the engine."""

import json
from pathlib import Path

import pytest

from pools.engine import NodeResources, Rule, evaluate_rules, merge_all, render, validate_rule_shape

DEFAULTS_PATH = Path(__file__).resolve().parents[2] / "pools" / "config" / "defaults" / "osmo-defaults.json"


@pytest.fixture(scope="module")
def osmo_defaults():
    return json.loads(DEFAULTS_PATH.read_text())


@pytest.fixture(scope="module")
def variables(osmo_defaults):
    return {**osmo_defaults["pools"]["default"]["common_default_variables"], "USER_CONTAINER_NAME": "user"}


@pytest.fixture(scope="module")
def rules(osmo_defaults):
    names = ["default_cpu", "default_memory", "default_storage", "default_gpu"]
    return [Rule.from_dict(rule) for name in names for rule in osmo_defaults["resource_validations"][name]]


def _pod(osmo_defaults, variables):
    templates = osmo_defaults["pod_templates"]
    merged = merge_all([templates["default_ctrl"], templates["default_user"], templates["gpu_toleration"]])
    return render(merged, variables)


def test_it_merges_and_renders_the_default_pod_templates(osmo_defaults, variables):
    assert _pod(osmo_defaults, variables) == {
        "spec": {
            "containers": [
                {
                    "name": "osmo-ctrl",
                    "resources": {
                        "limits": {"cpu": 1, "memory": "1Gi", "ephemeral-storage": "1Gi"},
                        "requests": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"},
                    },
                },
                {
                    "name": "user",
                    "resources": {
                        "limits": {
                            "cpu": 1,
                            "memory": "1Gi",
                            "nvidia.com/gpu": 0,
                            "ephemeral-storage": "1Gi",
                        },
                        "requests": {
                            "cpu": 1,
                            "memory": "1Gi",
                            "nvidia.com/gpu": 0,
                            "ephemeral-storage": "1Gi",
                        },
                    },
                },
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {"nvidia.com/gpu.present": "true"},
        }
    }


def test_it_keeps_the_default_zero_gpus_as_an_int(osmo_defaults, variables):
    user = _pod(osmo_defaults, variables)["spec"]["containers"][1]
    gpus = user["resources"]["limits"]["nvidia.com/gpu"]
    assert gpus == 0
    assert type(gpus) is int


def test_it_does_not_change_the_loaded_defaults(osmo_defaults, variables):
    before = json.dumps(osmo_defaults, sort_keys=True)
    _pod(osmo_defaults, variables)
    assert json.dumps(osmo_defaults, sort_keys=True) == before


def test_every_default_rule_has_a_valid_shape(osmo_defaults):
    validations = osmo_defaults["resource_validations"]
    shapes = {name: [validate_rule_shape(rule, f"{name}[{index}]") for index, rule in enumerate(rules)]
              for name, rules in validations.items()}
    # Every rule is accepted as written (nothing dropped or defaulted), and there are rules to check.
    assert {name: [rule.to_dict() for rule in rules] for name, rules in shapes.items()} == validations
    assert sorted(shapes) == ["default_cpu", "default_gpu", "default_memory", "default_storage"]
    assert all(len(rules) == 2 for rules in shapes.values())


def test_the_default_rules_pass_on_a_large_gpu_node(rules, variables):
    node = NodeResources("n1", cpu="64", gpu="8", memory="512Gi", storage="1Ti")
    report = evaluate_rules(rules, variables, [node])
    assert report.ok, report.errors
    assert report.node_failures == {}


def test_the_default_rules_fail_on_a_node_short_of_memory_naming_memory(rules, variables):
    node = NodeResources("n1", cpu="64", gpu="8", memory="512Mi", storage="1Ti")
    report = evaluate_rules(rules, variables, [node])
    assert not report.ok
    assert len(report.errors) == 1
    assert report.errors[0].startswith("No node satisfies the resource rules:")
    assert "n1" in report.errors[0]
    assert report.node_failures == {"n1": ["Value 1Gi too high for memory"]}


def test_the_default_rules_refuse_zero_cpu(rules, variables):
    node = NodeResources("n1", cpu="64", gpu="8", memory="512Gi", storage="1Ti")
    report = evaluate_rules(rules, {**variables, "USER_CPU": 0}, [node])
    assert report.errors == ["Value 0 needs to be greater than 0 for CPU"]


def test_the_default_rules_refuse_more_gpus_than_the_node_has(rules, variables):
    node = NodeResources("n1", cpu="64", gpu="8", memory="512Gi", storage="1Ti")
    report = evaluate_rules(rules, {**variables, "USER_GPU": 16}, [node])
    assert report.node_failures == {"n1": ["GPU value 16 too high for GPU"]}
