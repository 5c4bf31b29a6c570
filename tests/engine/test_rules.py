import pytest

from pools.engine import (
    NODE_TOKENS,
    OPERATORS,
    NodeResources,
    RenderError,
    Rule,
    RuleError,
    RuleReport,
    check_rule,
    evaluate_rules,
    failure_message,
    validate_rule_shape,
)

VARIABLES = {"USER_CPU": 4, "USER_GPU": 0, "USER_MEMORY": "64Gi", "USER_STORAGE": "10Gi", "TIER": "gold"}
BIG = NodeResources("big", cpu="64", gpu="8", memory="512Gi", storage="1Ti")
SMALL = NodeResources("small", cpu="2", gpu="0", memory="8Gi", storage="100Gi")
CPU_FITS = Rule("LE", "{{USER_CPU}}", "{{K8_CPU}}", "Value {{USER_CPU}} too high for CPU")
MEMORY_FITS = Rule("LE", "{{USER_MEMORY}}", "{{K8_MEMORY}}", "Value {{USER_MEMORY}} too high for memory")
CPU_POSITIVE = Rule("GT", "{{USER_CPU}}", "0", "Value {{USER_CPU}} needs to be greater than 0 for CPU")


def test_it_exposes_operators_and_node_tokens():
    assert OPERATORS == ("GT", "GE", "LT", "LE", "EQ", "NE")
    assert NODE_TOKENS == ("K8_CPU", "K8_GPU", "K8_MEMORY", "K8_STORAGE")


def test_it_round_trips_a_rule_through_a_dict():
    data = {"operator": "LE", "left_operand": "{{USER_CPU}}", "right_operand": 8, "assert_message": "m"}
    rule = Rule.from_dict(data)
    assert rule == Rule("LE", "{{USER_CPU}}", 8, "m")
    assert rule.to_dict() == data


def test_it_defaults_a_missing_assert_message_to_empty():
    rule = Rule.from_dict({"operator": "EQ", "left_operand": "a", "right_operand": "a"})
    assert rule.assert_message == ""
    assert rule.to_dict()["assert_message"] == ""


def test_it_refuses_to_build_a_rule_without_operands():
    with pytest.raises(RuleError, match="right_operand"):
        Rule.from_dict({"operator": "EQ", "left_operand": "a"})


def test_rules_are_immutable():
    with pytest.raises(AttributeError):
        CPU_FITS.operator = "GT"


def test_it_recognises_node_rules_by_their_k8_variables():
    assert CPU_FITS.is_node_rule
    assert not CPU_POSITIVE.is_node_rule
    assert Rule("EQ", "1", "1", "node has {{K8_GPU}} gpus").is_node_rule
    assert Rule("LE", "{{ USER_GPU }}", "{{ K8_CUSTOM }}").is_node_rule
    assert not Rule("LE", 1, 2).is_node_rule


def test_it_gives_node_tokens():
    assert BIG.tokens() == {"K8_CPU": "64", "K8_GPU": "8", "K8_MEMORY": "512Gi", "K8_STORAGE": "1Ti"}


@pytest.mark.parametrize(
    ("operator", "left", "right", "expected"),
    [
        ("GT", 2, 1, True),
        ("GT", 1, 1, False),
        ("GE", 1, 1, True),
        ("GE", 0, 1, False),
        ("LT", 1, 2, True),
        ("LT", 2, 2, False),
        ("LE", 2, 2, True),
        ("LE", 3, 2, False),
        ("EQ", 2, 2, True),
        ("EQ", 2, 3, False),
        ("NE", 2, 3, True),
        ("NE", 2, 2, False),
    ],
)
def test_it_applies_every_operator(operator, left, right, expected):
    assert check_rule(Rule(operator, left, right), {}) is expected
    assert check_rule(Rule(operator, str(left), str(right)), {}) is expected


@pytest.mark.parametrize(
    ("operator", "left", "right", "expected"),
    [
        ("LE", "64Gi", "2Ti", True),
        ("GT", "1Gi", "1G", True),
        ("LT", "1G", "1Gi", True),
        ("EQ", "1Gi", "1073741824", True),
        ("EQ", "1024Mi", "1Gi", True),
        ("EQ", "500m", "0.5", True),
        ("LT", "500m", "1", True),
        ("GE", "1.5T", "1500G", True),
        ("GT", "512Mi", "512Gi", False),
        ("LE", 4, "4000m", True),
    ],
)
def test_it_compares_quantities_across_units(operator, left, right, expected):
    assert check_rule(Rule(operator, left, right), {}) is expected


def test_it_renders_operands_with_their_native_values():
    assert check_rule(Rule("LE", "{{USER_MEMORY}}", "{{K8_MEMORY}}"), {**VARIABLES, "K8_MEMORY": "512Gi"})
    assert check_rule(Rule("GE", "{{USER_GPU}}", "0"), VARIABLES)
    assert not check_rule(Rule("GT", "{{USER_GPU}}", "0"), VARIABLES)


def test_it_compares_strings_for_equality():
    assert check_rule(Rule("EQ", "{{TIER}}", "gold"), VARIABLES)
    assert not check_rule(Rule("EQ", "{{TIER}}", "silver"), VARIABLES)
    assert check_rule(Rule("NE", "{{TIER}}", "silver"), VARIABLES)
    assert not check_rule(Rule("EQ", "gold", 1), VARIABLES)


@pytest.mark.parametrize("operator", ["GT", "GE", "LT", "LE"])
def test_it_refuses_to_order_strings_that_are_not_quantities(operator):
    with pytest.raises(RuleError) as caught:
        check_rule(Rule(operator, "{{TIER}}", "silver"), VARIABLES)
    assert "'gold'" in caught.value.message
    assert "'silver'" in caught.value.message


def test_it_refuses_an_unknown_operator_listing_the_valid_ones():
    with pytest.raises(RuleError) as caught:
        check_rule(Rule("le", 1, 2), {})
    assert "'le'" in caught.value.message
    assert "GT, GE, LT, LE, EQ, NE" in caught.value.message


def test_it_raises_render_errors_for_undefined_operands():
    with pytest.raises(RenderError) as caught:
        check_rule(Rule("LE", "{{USER_FOO}}", 1), {})
    assert caught.value.path == "left_operand"
    assert "USER_FOO" in caught.value.message


def test_it_renders_the_assert_message():
    assert failure_message(CPU_POSITIVE, VARIABLES) == "Value 4 needs to be greater than 0 for CPU"


def test_it_falls_back_to_a_description_when_the_message_is_empty():
    assert failure_message(Rule("LE", "{{USER_MEMORY}}", "1Gi"), VARIABLES) == "64Gi LE 1Gi failed"


def test_it_falls_back_to_a_description_when_the_message_cannot_render():
    rule = Rule("LE", "{{USER_MEMORY}}", "1Gi", "too much {{ NOPE }}")
    assert failure_message(rule, VARIABLES) == "64Gi LE 1Gi failed"


def test_it_falls_back_to_the_raw_operands_when_they_cannot_render():
    rule = Rule("LE", "{{ NOPE }}", "1Gi")
    assert failure_message(rule, VARIABLES) == "{{ NOPE }} LE 1Gi failed"


def test_a_report_is_ok_without_errors():
    assert RuleReport(errors=[], node_failures={}).ok
    assert RuleReport().ok
    assert not RuleReport(errors=["x"], node_failures={}).ok


def test_it_passes_when_every_rule_holds():
    report = evaluate_rules([CPU_POSITIVE, CPU_FITS, MEMORY_FITS], VARIABLES, [BIG])
    assert report.ok
    assert report.errors == []
    assert report.node_failures == {}


def test_it_reports_a_failing_static_rule_with_its_rendered_message():
    report = evaluate_rules([CPU_POSITIVE], {**VARIABLES, "USER_CPU": 0}, [BIG])
    assert report.errors == ["Value 0 needs to be greater than 0 for CPU"]


def test_it_checks_static_rules_without_nodes():
    assert evaluate_rules([CPU_POSITIVE], VARIABLES, []).ok


def test_it_passes_node_rules_when_one_node_satisfies_them_all():
    report = evaluate_rules([CPU_FITS, MEMORY_FITS], VARIABLES, [SMALL, BIG])
    assert report.ok
    assert report.node_failures == {
        "small": ["Value 4 too high for CPU", "Value 64Gi too high for memory"],
    }


def test_it_needs_one_node_to_satisfy_all_node_rules_at_once():
    cpu_node = NodeResources("cpu-node", cpu="64", gpu="0", memory="1Gi", storage="1Ti")
    memory_node = NodeResources("memory-node", cpu="1", gpu="0", memory="1Ti", storage="1Ti")
    report = evaluate_rules([CPU_FITS, MEMORY_FITS], VARIABLES, [cpu_node, memory_node])
    assert not report.ok
    assert len(report.errors) == 1
    message = report.errors[0]
    assert message.startswith("No node satisfies the resource rules:")
    assert "cpu-node: Value 64Gi too high for memory" in message
    assert "memory-node: Value 4 too high for CPU" in message
    assert report.node_failures == {
        "cpu-node": ["Value 64Gi too high for memory"],
        "memory-node": ["Value 4 too high for CPU"],
    }


def test_it_lists_every_failed_rule_of_every_node():
    tiny = NodeResources("tiny", cpu="1", gpu="0", memory="1Gi", storage="1Gi")
    report = evaluate_rules([CPU_FITS, MEMORY_FITS], VARIABLES, [SMALL, tiny])
    assert report.node_failures["small"] == ["Value 4 too high for CPU", "Value 64Gi too high for memory"]
    assert report.node_failures["tiny"] == ["Value 4 too high for CPU", "Value 64Gi too high for memory"]
    assert report.errors[0].count("Value 4 too high for CPU") == 2


def test_node_tokens_win_over_variables():
    report = evaluate_rules([CPU_FITS], {**VARIABLES, "K8_CPU": "1000"}, [SMALL])
    assert not report.ok
    assert report.node_failures == {"small": ["Value 4 too high for CPU"]}


def test_it_reports_static_and_node_failures_together():
    variables = {**VARIABLES, "USER_CPU": 0, "USER_MEMORY": "1Ti"}
    report = evaluate_rules([CPU_POSITIVE, MEMORY_FITS], variables, [SMALL])
    assert len(report.errors) == 2
    assert report.errors[0] == "Value 0 needs to be greater than 0 for CPU"
    assert report.errors[1].startswith("No node satisfies")


def test_it_says_when_no_node_is_available_to_check_against():
    report = evaluate_rules([CPU_POSITIVE, CPU_FITS], VARIABLES, [])
    assert not report.ok
    assert len(report.errors) == 1
    assert "No node is available" in report.errors[0]
    assert "1" in report.errors[0]


def test_it_turns_an_undefined_variable_into_an_error_entry():
    rule = Rule("GT", "{{USER_FOO}}", "0", "Value {{USER_FOO}}")
    report = evaluate_rules([CPU_POSITIVE, rule], VARIABLES, [BIG])
    assert len(report.errors) == 1
    assert report.errors[0].startswith("rule 1 (GT): ")
    assert "USER_FOO" in report.errors[0]


def test_it_turns_an_undefined_variable_in_a_node_rule_into_an_error_entry():
    rule = Rule("LE", "{{USER_FOO}}", "{{K8_CPU}}")
    report = evaluate_rules([rule], VARIABLES, [BIG])
    assert report.errors[0].startswith("rule 0 (LE): ")
    assert "USER_FOO" in report.errors[0]
    assert report.errors[-1].startswith("No node satisfies")


def test_it_turns_an_unorderable_comparison_into_an_error_entry():
    report = evaluate_rules([Rule("GT", "{{TIER}}", "silver")], VARIABLES, [])
    assert report.errors[0].startswith("rule 0 (GT): ")


def test_it_turns_an_unknown_operator_into_an_error_entry():
    report = evaluate_rules([Rule("ABOUT", 1, 1)], VARIABLES, [])
    assert report.errors[0].startswith("rule 0 (ABOUT): ")
    assert "GT, GE" in report.errors[0]


def test_it_turns_bad_template_syntax_into_an_error_entry():
    report = evaluate_rules([Rule("GT", "{{ USER_CPU", "0")], VARIABLES, [BIG])
    assert report.errors[0].startswith("rule 0 (GT): ")
    assert "syntax" in report.errors[0]


def test_it_ignores_node_specific_errors_when_another_node_fits():
    broken = NodeResources("broken", cpu="lots", gpu="0", memory="1Ti", storage="1Ti")
    report = evaluate_rules([CPU_FITS], VARIABLES, [broken, BIG])
    assert report.ok
    assert report.node_failures["broken"][0].startswith("rule 0 (LE): ")


def test_it_accepts_rules_given_as_dicts():
    report = evaluate_rules([CPU_POSITIVE.to_dict(), {"operator": "EQ"}, {}], VARIABLES, [])
    assert len(report.errors) == 2
    assert report.errors[0].startswith("rule 1 (EQ): ")
    assert report.errors[1].startswith("rule 2 (?): ")


def test_it_refuses_an_operator_that_is_not_a_string():
    with pytest.raises(RuleError, match="valid operators"):
        check_rule(Rule(["LE"], 1, 2), {})


def test_it_accepts_a_well_formed_rule_shape():
    data = {
        "operator": "LE",
        "left_operand": "{{USER_MEMORY}}",
        "right_operand": "{{K8_MEMORY}}",
        "assert_message": "Value {{USER_MEMORY}} too high for memory",
    }
    assert validate_rule_shape(data) == Rule.from_dict(data)
    assert (
        validate_rule_shape({"operator": "GT", "left_operand": 1, "right_operand": 0.5}).assert_message == ""
    )


@pytest.mark.parametrize(
    ("data", "path", "fragment"),
    [
        (["LE", 1, 2], "[2]", "must be an object"),
        ({"operator": "LE", "left_operand": 1, "right_operand": 2, "extra": 1, "z": 2}, "[2]", "extra, z"),
        ({"operator": "LE", "left_operand": 1}, "[2]", "right_operand"),
        ({"operator": "le", "left_operand": 1, "right_operand": 2}, "[2].operator", "GT, GE, LT, LE, EQ, NE"),
        ({"operator": "ABOUT", "left_operand": 1, "right_operand": 2}, "[2].operator", "'ABOUT'"),
        ({"operator": 3, "left_operand": 1, "right_operand": 2}, "[2].operator", "valid operators"),
        ({"operator": "LE", "left_operand": True, "right_operand": 2}, "[2].left_operand", "bool"),
        ({"operator": "LE", "left_operand": 1, "right_operand": None}, "[2].right_operand", "NoneType"),
        ({"operator": "LE", "left_operand": [1], "right_operand": 2}, "[2].left_operand", "list"),
        ({"operator": "LE", "left_operand": "{{ x", "right_operand": 2}, "[2].left_operand", "syntax"),
        ({"operator": "LE", "left_operand": 1, "right_operand": "{% if %}"}, "[2].right_operand", "syntax"),
        (
            {"operator": "LE", "left_operand": 1, "right_operand": 2, "assert_message": "{{ x"},
            "[2].assert_message",
            "syntax",
        ),
        (
            {"operator": "LE", "left_operand": 1, "right_operand": 2, "assert_message": 5},
            "[2].assert_message",
            "string",
        ),
    ],
)
def test_it_refuses_malformed_rule_shapes_with_a_path(data, path, fragment):
    with pytest.raises(RuleError) as caught:
        validate_rule_shape(data, "[2]")
    assert caught.value.path == path
    assert fragment in caught.value.message


def test_it_nests_rule_shape_paths_under_the_given_prefix():
    with pytest.raises(RuleError) as caught:
        validate_rule_shape({"operator": "X", "left_operand": 1, "right_operand": 2}, "default_cpu[0]")
    assert str(caught.value).startswith("default_cpu[0].operator: ")


def test_it_uses_a_bare_path_without_a_prefix():
    with pytest.raises(RuleError) as caught:
        validate_rule_shape({"operator": "X", "left_operand": 1, "right_operand": 2})
    assert caught.value.path == "operator"
