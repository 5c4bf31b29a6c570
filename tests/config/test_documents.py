"""Field rules of a single document (pure: no database)."""

import pytest

from pools.config.documents import pod_template_documents, pool_documents, validation_documents
from pools.engine import ConfigError, parse_json
from tests.conftest import seed_json_blocks


def pool(**fields):
    body = {"backend": "default", "platforms": {"p1": {}}}
    body.update(fields)
    return {"pools": {"training": body}}


def refused(data, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        pool_documents(data, **kwargs)
    return caught.value


def test_it_points_at_the_line_and_column_of_the_malformed_a100_template_of_seed_000():
    printed = seed_json_blocks("000")[1]
    with pytest.raises(ConfigError) as caught:
        parse_json(printed, source="a100_pod_template.json")
    assert "a100_pod_template.json is malformed JSON at line 14, column 1" in caught.value.message


def test_it_points_at_the_line_and_column_of_the_malformed_a100_template_of_seed_002():
    printed = seed_json_blocks("002")[1]
    with pytest.raises(ConfigError) as caught:
        parse_json(printed)
    assert "line 14, column 9" in caught.value.message
    assert caught.value.field == "line 14, column 9"


def test_it_refuses_an_empty_document_and_text_that_is_not_utf8():
    with pytest.raises(ConfigError, match="empty"):
        parse_json("  \n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        parse_json(b"\xff\xfe{}")


@pytest.mark.parametrize("name", ["1pool", "pool-", "-pool", "po ol", "pool_", "pööl", "a/b", ""])
def test_it_refuses_pool_names_outside_the_pattern(name):
    error = refused({"pools": {name: {"backend": "default"}}})
    assert "name" in error.message and "invalid" in error.message


@pytest.mark.parametrize("name", ["a", "heterogeneous_pool", "robotics-training", "team.gpu2", "A1"])
def test_it_accepts_names_inside_the_pattern(name):
    assert list(pool_documents({"pools": {name: {"backend": "default"}}})) == [name]


def test_it_refuses_a_platform_name_outside_the_pattern():
    error = refused(pool(platforms={"a100 platform": {}}))
    assert "platform name 'a100 platform' is invalid" in error.message


def test_it_refuses_template_and_validation_names_outside_the_pattern():
    with pytest.raises(ConfigError, match="invalid"):
        pod_template_documents({"bad name": {"spec": {}}})
    with pytest.raises(ConfigError, match="invalid"):
        validation_documents({"_hidden": []})
    error = refused(pool(common_pod_template=["ok", "not ok"]))
    assert "common_pod_template" in error.field


def test_it_refuses_a_default_platform_that_is_not_one_of_the_pools_platforms():
    error = refused(pool(default_platform="h100"))
    assert "default_platform 'h100' is not one of the pool's platforms (p1)" in error.message
    assert error.field == "training.default_platform"


def test_it_accepts_a_default_platform_that_is_one_of_the_pools_platforms():
    assert pool_documents(pool(default_platform="p1"))["training"].default_platform == "p1"


@pytest.mark.parametrize("value", ["2 hours", "h", "-1h", "P1M", "soon", "1h30"])
def test_it_refuses_timeouts_in_other_forms(value):
    error = refused(pool(default_exec_timeout=value))
    assert error.field == "training.default_exec_timeout"


@pytest.mark.parametrize("value", ["2h", "30m", "1d", "90s", "PT2H", "P1DT2H30M"])
def test_it_accepts_short_and_iso_timeouts(value):
    assert pool_documents(pool(max_queue_timeout=value))["training"].max_queue_timeout == value


def test_it_refuses_a_default_timeout_above_its_max():
    error = refused(pool(default_exec_timeout="9h", max_exec_timeout="PT8H"))
    assert "default_exec_timeout 9h is above max_exec_timeout PT8H" in error.message
    assert refused(pool(default_queue_timeout="2d", max_queue_timeout="1d"))


def test_it_accepts_a_default_timeout_equal_to_its_max_in_another_notation():
    assert pool_documents(pool(default_exec_timeout="120m", max_exec_timeout="PT2H"))


@pytest.mark.parametrize("operator", ["GTE", "gt", "==", "", None])
def test_it_refuses_rule_operators_other_than_the_six(operator):
    rule = {"operator": operator, "left_operand": "1", "right_operand": "2", "assert_message": "x"}
    with pytest.raises(ConfigError) as caught:
        validation_documents({"cpu": [rule]})
    assert "cpu" in caught.value.message and caught.value.field.startswith("cpu[0]")


@pytest.mark.parametrize("operator", ["GT", "GE", "LT", "LE", "EQ", "NE"])
def test_it_accepts_the_six_rule_operators(operator):
    rule = {"operator": operator, "left_operand": "{{USER_CPU}}", "right_operand": "{{K8_CPU}}"}
    assert validation_documents({"cpu": [rule]})["cpu"][0]["operator"] == operator


def test_it_refuses_a_rule_operand_that_does_not_parse_as_a_template():
    rule = {"operator": "LE", "left_operand": "{{USER_CPU", "right_operand": "1", "assert_message": ""}
    with pytest.raises(ConfigError) as caught:
        validation_documents({"cpu": [rule]})
    assert "left_operand" in caught.value.field


def test_it_refuses_unknown_rule_fields_by_name():
    rule = {"operator": "LE", "left_operand": "1", "right_operand": "2", "message": "x"}
    with pytest.raises(ConfigError, match="message"):
        validation_documents({"cpu": [rule]})


def test_it_refuses_topology_keys_that_repeat():
    keys = [{"key": "rack", "label": "topology.kubernetes.io/rack"}, {"key": "rack", "label": "example.com/rack"}]
    error = refused(pool(topology_keys=keys))
    assert "repeated: rack" in error.message


def test_it_refuses_a_topology_label_that_is_not_a_label_key():
    error = refused(pool(topology_keys=[{"key": "rack", "label": "not a label"}]))
    assert "topology_keys[0].label" in error.message


@pytest.mark.parametrize("memory", ["64GB", "1.5X", "lots", "Gi", ""])
def test_it_refuses_resource_variables_that_are_not_quantities(memory):
    error = refused(pool(common_default_variables={"USER_MEMORY": memory}))
    assert "USER_MEMORY" in error.message and error.field == "training.common_default_variables"


@pytest.mark.parametrize("value", ["64Gi", "500m", "1.5T", 16, 0, "1e3", "{{ USER_BASE_MEMORY }}"])
def test_it_accepts_quantities_in_binary_and_decimal_units(value):
    document = pool(common_default_variables={"USER_MEMORY": value})
    assert pool_documents(document)["training"].common_default_variables["USER_MEMORY"] == value


def test_it_refuses_quantity_variables_in_platforms_too():
    error = refused(pool(platforms={"p1": {"default_variables": {"USER_GPU": "two"}}}))
    assert "platforms.p1.default_variables" in error.message


@pytest.mark.parametrize(
    ("fields", "unknown"),
    [
        ({"colour": "blue"}, "colour"),
        ({"platforms": {"p1": {"hostnetwork_allowed": True}}}, "platforms.p1.hostnetwork_allowed"),
        ({"topology_keys": [{"key": "rack", "label": "a/b", "level": 1}]}, "topology_keys[0].level"),
    ],
)
def test_it_refuses_unknown_fields_with_their_names(fields, unknown):
    error = refused(pool(**fields))
    assert f"{unknown}: unknown field" in error.message


def test_it_refuses_a_template_with_unknown_top_level_fields():
    with pytest.raises(ConfigError) as caught:
        pod_template_documents({"l40s": {"spec": {}, "nodeSelector": {}}})
    assert "'nodeSelector'" in caught.value.message and caught.value.field == "l40s.nodeSelector"


def test_it_refuses_a_template_string_that_is_not_a_valid_template():
    with pytest.raises(ConfigError) as caught:
        pod_template_documents({"bad": {"spec": {"containers": [{"name": "{{ USER_CONTAINER_NAME "}]}}})
    assert caught.value.field.startswith("bad.spec.containers[0].name")


def test_it_refuses_wrong_value_types_naming_the_field():
    error = refused(pool(enable_maintenance="yes"))
    assert "enable_maintenance" in error.message
    error = refused(pool(common_pod_template="default_user"))
    assert "common_pod_template" in error.message


def test_it_requires_a_backend():
    error = refused({"pools": {"x": {"description": "no backend"}}})
    assert "backend: field is required" in error.message


def test_it_accepts_the_three_pool_shapes():
    body = {"backend": "default", "description": "d"}
    assert list(pool_documents({"pools": {"a": body}})) == ["a"]
    assert list(pool_documents({"a": body, "b": body})) == ["a", "b"]
    assert list(pool_documents({"name": "c", **body})) == ["c"]
    assert list(pool_documents(body, name="d")) == ["d"]


def test_it_refuses_a_document_whose_pool_name_disagrees_with_the_command():
    with pytest.raises(ConfigError, match="names pool 'a' but the document holds 'b'"):
        pool_documents({"pools": {"b": {"backend": "default"}}}, name="a")
    with pytest.raises(ConfigError, match="its name field says 'c'"):
        pool_documents({"pools": {"b": {"name": "c", "backend": "default"}}})


def test_it_unwraps_named_template_and_validation_documents():
    assert pod_template_documents({"l40s": {"spec": {}}}, name="l40s") == {"l40s": {"spec": {}}}
    assert pod_template_documents({"spec": {}}, name="l40s") == {"l40s": {"spec": {}}}
    rules = [{"operator": "GT", "left_operand": "{{USER_CPU}}", "right_operand": "0"}]
    assert validation_documents(rules, name="cpu")["cpu"][0]["assert_message"] == ""


def test_it_refuses_exit_actions_outside_osmos_vocabulary():
    assert refused(pool(default_exit_actions={"RETRY": "1"}))
    assert refused(pool(default_exit_actions={"FAIL": "one"}))
    assert pool_documents(pool(default_exit_actions={"COMPLETE": "0", "FAIL": "1-255"}))


def test_it_refuses_a_node_selector_that_is_not_made_of_labels():
    assert refused(pool(node_selector={"runwhere.ai/pool": "has space"}))
    assert pool_documents(pool(node_selector={"runwhere.ai/pool": "training"}))
