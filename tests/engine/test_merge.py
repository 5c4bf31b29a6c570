import copy

import pytest

from pools.engine import EngineError, merge, merge_all

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_it_merges_dicts_key_by_key():
    base = {"spec": {"nodeSelector": {"a": "1"}, "hostNetwork": False}}
    override = {"spec": {"nodeSelector": {"b": "2"}, "priority": 5}}
    assert merge(base, override) == {
        "spec": {"nodeSelector": {"a": "1", "b": "2"}, "hostNetwork": False, "priority": 5}
    }


def test_it_lets_the_override_replace_scalars():
    assert merge({"a": 1, "b": "x"}, {"a": 2}) == {"a": 2, "b": "x"}
    assert merge(1, 2) == 2


def test_it_lets_the_override_replace_mismatched_types():
    assert merge({"a": {"x": 1}}, {"a": "flat"}) == {"a": "flat"}
    assert merge({"a": "flat"}, {"a": {"x": 1}}) == {"a": {"x": 1}}
    assert merge({"a": [1]}, {"a": {"x": 1}}) == {"a": {"x": 1}}
    assert merge({"a": {"x": 1}}, {"a": [1]}) == {"a": [1]}


def test_it_removes_a_key_whose_override_is_none():
    base = {"spec": {"nodeSelector": {"a": "1"}, "hostNetwork": True}}
    assert merge(base, {"spec": {"hostNetwork": None}}) == {"spec": {"nodeSelector": {"a": "1"}}}
    assert merge(base, {"spec": None}) == {}


def test_it_ignores_none_for_a_key_the_base_does_not_have():
    assert merge({"a": 1}, {"b": None, "c": {"d": None, "e": 2}}) == {"a": 1, "c": {"e": 2}}


def test_it_keeps_the_base_key_order():
    result = merge({"a": 1, "b": 2, "c": 3}, {"b": 20, "d": 4})
    assert list(result) == ["a", "b", "c", "d"]


def test_it_merges_env_by_name():
    base = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    override = {"env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]}
    assert merge(base, override) == {
        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}]
    }


def test_it_merges_containers_by_name_with_nested_resources_merged():
    base = {
        "spec": {
            "containers": [
                {"name": "ctrl", "image": "ctrl:1"},
                {
                    "name": "user",
                    "image": "user:1",
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1"}},
                    "env": [{"name": "A", "value": "1"}],
                    "args": ["--a"],
                },
            ]
        }
    }
    override = {
        "spec": {
            "containers": [
                {
                    "name": "user",
                    "resources": {"limits": {"nvidia.com/gpu": 8, "memory": "64Gi"}},
                    "env": [{"name": "B", "value": "2"}],
                    "args": ["--b", "--c"],
                },
                {"name": "sidecar", "image": "side:1"},
            ]
        }
    }
    assert merge(base, override) == {
        "spec": {
            "containers": [
                {"name": "ctrl", "image": "ctrl:1"},
                {
                    "name": "user",
                    "image": "user:1",
                    "resources": {
                        "limits": {"cpu": "1", "memory": "64Gi", "nvidia.com/gpu": 8},
                        "requests": {"cpu": "1"},
                    },
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "args": ["--b", "--c"],
                },
                {"name": "sidecar", "image": "side:1"},
            ]
        }
    }


@pytest.mark.parametrize(
    "key", ["containers", "initContainers", "ephemeralContainers", "volumes", "volumeMounts", "env", "ports"]
)
def test_it_merges_every_named_list_key_by_name(key):
    base = {key: [{"name": "a", "x": 1}, {"name": "b", "x": 2}]}
    override = {key: [{"name": "c", "x": 3}, {"name": "a", "y": 9}]}
    assert merge(base, override) == {
        key: [{"name": "a", "x": 1, "y": 9}, {"name": "b", "x": 2}, {"name": "c", "x": 3}]
    }


def test_it_removes_fields_of_a_named_item_with_none():
    base = {"volumes": [{"name": "data", "hostPath": {"path": "/d"}}]}
    override = {"volumes": [{"name": "data", "hostPath": None, "emptyDir": {}}]}
    assert merge(base, override) == {"volumes": [{"name": "data", "emptyDir": {}}]}


def test_it_replaces_a_named_list_when_an_item_lacks_a_name():
    base = {"ports": [{"name": "http", "containerPort": 80}]}
    override = {"ports": [{"containerPort": 8080}]}
    assert merge(base, override) == {"ports": [{"containerPort": 8080}]}
    assert merge(override, base) == base


def test_it_replaces_a_named_list_when_an_item_is_not_a_dict():
    assert merge({"env": [{"name": "A"}]}, {"env": ["A=1"]}) == {"env": ["A=1"]}


def test_it_keeps_the_base_items_when_a_named_list_override_is_empty():
    base = {"volumes": [{"name": "data"}]}
    assert merge(base, {"volumes": []}) == base


def test_it_does_not_merge_named_lists_under_other_keys():
    base = {"items": [{"name": "a", "x": 1}]}
    override = {"items": [{"name": "a", "y": 2}]}
    assert merge(base, override) == override


def test_it_replaces_args_and_command():
    base = {"args": ["--a", "--b"], "command": ["/bin/a"]}
    override = {"args": ["--c"], "command": ["/bin/b", "-x"]}
    assert merge(base, override) == override


def test_it_replaces_a_string_list_containing_name_without_error():
    base = {"spec": {"containers": [{"name": "user", "args": ["--name", "x"]}]}}
    override = {"spec": {"containers": [{"name": "user", "args": ["--name", "y", "name"]}]}}
    assert merge(base, override) == override
    assert merge({"args": ["name"]}, {"args": ["--name", "x"]}) == {"args": ["--name", "x"]}


def test_it_replaces_a_top_level_list():
    assert merge([{"name": "a"}], [{"name": "b"}]) == [{"name": "b"}]


def test_it_collapses_duplicate_tolerations():
    base = {"tolerations": [GPU_TOLERATION, dict(GPU_TOLERATION)]}
    override = {"tolerations": [dict(GPU_TOLERATION)]}
    assert merge(base, override) == {"tolerations": [GPU_TOLERATION]}


def test_it_replaces_the_same_toleration_in_place_so_its_seconds_can_change():
    taint = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
    base = {"tolerations": [{**taint, "tolerationSeconds": 300}, GPU_TOLERATION]}
    override = {"tolerations": [{**taint, "tolerationSeconds": 30}]}
    assert merge(base, override) == {"tolerations": [{**taint, "tolerationSeconds": 30}, GPU_TOLERATION]}


def test_it_appends_new_tolerations_after_the_base_ones():
    other = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}
    assert merge({"tolerations": [GPU_TOLERATION]}, {"tolerations": [other]}) == {
        "tolerations": [GPU_TOLERATION, other]
    }


def test_it_treats_a_missing_toleration_operator_as_equal():
    explicit = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
    implicit = {"key": "k", "value": "v", "effect": "NoSchedule"}
    assert merge({"tolerations": [explicit]}, {"tolerations": [implicit]}) == {"tolerations": [implicit]}


def test_it_tells_tolerations_apart_by_key_operator_value_and_effect():
    items = [
        {"key": "k", "operator": "Exists"},
        {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "k", "value": "a"},
        {"key": "k", "value": "b"},
        {"operator": "Exists"},
    ]
    assert merge({"tolerations": items[:2]}, {"tolerations": items[2:]}) == {"tolerations": items}


def test_it_replaces_tolerations_that_are_not_objects():
    assert merge({"tolerations": [GPU_TOLERATION]}, {"tolerations": ["x"]}) == {"tolerations": ["x"]}


def test_it_does_not_mutate_inputs_or_share_objects_with_them():
    base = {"spec": {"containers": [{"name": "u", "env": [{"name": "A"}]}], "tolerations": [GPU_TOLERATION]}}
    override = {"spec": {"containers": [{"name": "v", "args": ["x"]}], "nodeSelector": {"a": "b"}}}
    base_copy, override_copy = copy.deepcopy(base), copy.deepcopy(override)
    result = merge(base, override)
    assert base == base_copy
    assert override == override_copy
    result["spec"]["containers"][0]["env"].append({"name": "B"})
    result["spec"]["containers"][1]["args"].append("y")
    result["spec"]["tolerations"][0]["effect"] = "NoExecute"
    result["spec"]["nodeSelector"]["c"] = "d"
    assert base == base_copy
    assert override == override_copy


def test_it_folds_templates_in_order_with_later_ones_winning():
    first = {
        "spec": {"priority": 1, "nodeSelector": {"a": "1"}, "containers": [{"name": "u", "image": "i:1"}]}
    }
    second = {"spec": {"priority": 2, "containers": [{"name": "u", "image": "i:2"}]}}
    third = {"spec": {"priority": 3, "nodeSelector": {"a": None, "b": "2"}}}
    assert merge_all([first, second, third]) == {
        "spec": {"priority": 3, "nodeSelector": {"b": "2"}, "containers": [{"name": "u", "image": "i:2"}]}
    }
    assert merge_all([third, second, first])["spec"]["priority"] == 1


def test_it_folds_from_an_empty_document():
    assert merge_all([]) == {}
    document = {"a": {"b": 1}}
    result = merge_all([document])
    assert result == document
    assert result["a"] is not document["a"]


def test_it_accepts_any_iterable_of_documents():
    assert merge_all(iter([{"a": 1}, {"b": 2}])) == {"a": 1, "b": 2}


def test_it_refuses_a_document_that_is_not_an_object():
    with pytest.raises(EngineError) as caught:
        merge_all([{"a": 1}, ["not", "a", "dict"]])
    assert caught.value.path == "[1]"
