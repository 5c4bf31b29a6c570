import copy
import importlib

import pytest

from pools.engine import RenderError, check_syntax, referenced_variables, render
from pools.engine.render import env

# The package re-exports the function render(), which shadows the submodule attribute.
render_module = importlib.import_module("pools.engine.render")

VARIABLES = {
    "USER_CPU": 16,
    "USER_GPU": 0,
    "USER_MEMORY": "64Gi",
    "USER_STORAGE": "1Ti",
    "PRIVILEGED": False,
    "RATIO": 0.5,
    "NOTHING": None,
}


def test_it_keeps_zero_gpus_as_int():
    result = render("{{USER_GPU}}", VARIABLES)
    assert result == 0
    assert type(result) is int


def test_it_allows_whitespace_inside_a_lone_expression():
    assert render("{{ USER_CPU }}", VARIABLES) == 16
    assert render("{{USER_CPU }}", VARIABLES) == 16


def test_it_keeps_strings_as_strings():
    assert render("{{USER_MEMORY}}", VARIABLES) == "64Gi"


def test_it_keeps_booleans_floats_and_none_native():
    assert render("{{ PRIVILEGED }}", VARIABLES) is False
    assert render("{{ RATIO }}", VARIABLES) == 0.5
    assert render("{{ NOTHING }}", VARIABLES) is None


def test_it_evaluates_expressions_natively():
    assert render("{{ USER_CPU * 2 }}", VARIABLES) == 32
    assert render("{{ [USER_CPU, USER_GPU] }}", VARIABLES) == [16, 0]


def test_it_treats_whitespace_control_markers_as_part_of_the_braces():
    assert render("{{- USER_CPU -}}", VARIABLES) == 16


def test_it_renders_mixed_text_to_a_string():
    assert render("cpu-{{USER_CPU}}", VARIABLES) == "cpu-16"
    assert render("{{USER_CPU}}-{{USER_GPU}}", VARIABLES) == "16-0"
    assert render(" {{USER_CPU}}", VARIABLES) == " 16"


def test_it_keeps_a_trailing_newline():
    assert render("{{ USER_CPU }}\n", VARIABLES) == "16\n"


def test_it_renders_statements_to_a_string():
    assert render("{% if USER_GPU %}gpu{% else %}cpu{% endif %}", VARIABLES) == "cpu"
    assert render("{# only a comment #}", VARIABLES) == ""


def test_it_renders_an_expression_followed_by_a_comment_as_text():
    assert render("{{ USER_CPU }}{# cores #}", VARIABLES) == "16"


def test_it_leaves_raw_blocks_alone():
    assert render("{% raw %}{{ USER_CPU }}{% endraw %}", VARIABLES) == "{{ USER_CPU }}"


@pytest.mark.parametrize("value", [0, 1, 2.5, True, False, None, "plain text", "100Gi", "", "a } b { c"])
def test_it_returns_non_templates_unchanged(value):
    assert render(value, VARIABLES) is value


def test_it_does_not_touch_jinja_for_plain_strings(monkeypatch):
    def refuse(source):
        raise AssertionError(f"Jinja used for {source!r}")

    monkeypatch.setattr(render_module, "_compile", refuse)
    assert render({"a": "{not a template}", "b": ["100Gi", "x } y"]}, {}) == {
        "a": "{not a template}",
        "b": ["100Gi", "x } y"],
    }


def test_it_renders_nested_structures_with_native_values():
    template = {
        "spec": {
            "containers": [
                {
                    "name": "user-{{ USER_CPU }}",
                    "resources": {"limits": {"cpu": "{{USER_CPU}}", "nvidia.com/gpu": "{{USER_GPU}}"}},
                    "args": ["--memory", "{{ USER_MEMORY }}"],
                }
            ],
            "hostNetwork": True,
            "priority": 3,
        }
    }
    assert render(template, VARIABLES) == {
        "spec": {
            "containers": [
                {
                    "name": "user-16",
                    "resources": {"limits": {"cpu": 16, "nvidia.com/gpu": 0}},
                    "args": ["--memory", "64Gi"],
                }
            ],
            "hostNetwork": True,
            "priority": 3,
        }
    }


def test_it_never_renders_keys():
    assert render({"{{ USER_CPU }}": "{{ USER_CPU }}"}, VARIABLES) == {"{{ USER_CPU }}": 16}


def test_it_does_not_mutate_the_input_and_returns_a_new_structure():
    template = {"spec": {"containers": [{"resources": {"limits": {"cpu": "{{USER_CPU}}"}}}]}}
    snapshot = copy.deepcopy(template)
    result = render(template, VARIABLES)
    assert template == snapshot
    assert result is not template
    assert result["spec"] is not template["spec"]
    assert result["spec"]["containers"] is not template["spec"]["containers"]


def test_it_renders_tuples_as_lists():
    assert render(("{{ USER_CPU }}", 1), VARIABLES) == [16, 1]


def test_it_names_an_undefined_variable_and_where_it_was_used():
    template = {"spec": {"containers": [{"resources": {"limits": {"cpu": "{{ USER_FOO }}"}}}]}}
    with pytest.raises(RenderError) as caught:
        render(template, VARIABLES)
    assert caught.value.message == "undefined variable 'USER_FOO'"
    assert caught.value.path == "spec.containers[0].resources.limits.cpu"


def test_it_names_an_undefined_variable_inside_mixed_text():
    with pytest.raises(RenderError) as caught:
        render(["ok", "cpu-{{ USER_FOO }}"], VARIABLES)
    assert "USER_FOO" in caught.value.message
    assert caught.value.path == "[1]"


def test_it_joins_error_paths_onto_the_given_prefix():
    with pytest.raises(RenderError) as caught:
        render({"limits": {"cpu": "{{ USER_FOO }}"}}, VARIABLES, "pod_templates.default_user")
    assert caught.value.path == "pod_templates.default_user.limits.cpu"
    assert str(caught.value) == "pod_templates.default_user.limits.cpu: undefined variable 'USER_FOO'"


def test_it_quotes_keys_that_would_read_as_nested_fields():
    with pytest.raises(RenderError) as caught:
        render({"limits": {"nvidia.com/gpu": "{{ USER_FOO }}"}}, VARIABLES)
    assert caught.value.path == "limits['nvidia.com/gpu']"


def test_it_uses_the_given_path_for_a_lone_string():
    with pytest.raises(RenderError) as caught:
        render("{{ USER_FOO }}", VARIABLES, "spec.hostname")
    assert caught.value.path == "spec.hostname"


@pytest.mark.parametrize(
    "source", ["{{ USER_CPU ", "{{ USER_CPU }", "{% if %}", "{{ USER_CPU ) }}", "{% endfor %}"]
)
def test_it_reports_syntax_errors_with_jinja_message_and_line(source):
    with pytest.raises(RenderError) as caught:
        render({"cmd": source}, VARIABLES)
    assert caught.value.message.startswith("template syntax error:")
    assert "(line 1)" in caught.value.message
    assert caught.value.path == "cmd"


def test_it_reports_the_line_of_a_syntax_error():
    with pytest.raises(RenderError, match=r"line 3"):
        render("a\nb\n{{ USER_CPU ) }}", VARIABLES)


@pytest.mark.parametrize(
    "source",
    ["{{ ''.__class__ }}", "x{{ ''.__class__ }}", "{{ ''.__class__.__mro__[1].__subclasses__() }}"],
)
def test_it_refuses_sandbox_escapes(source):
    with pytest.raises(RenderError, match="unsafe"):
        render({"x": source}, VARIABLES)


def test_it_reports_runtime_failures_as_render_errors():
    with pytest.raises(RenderError, match="ZeroDivisionError"):
        render({"x": "{{ 1 / 0 }}"}, VARIABLES)
    with pytest.raises(RenderError) as caught:
        render({"x": "{{ USER_CPU.missing }}"}, VARIABLES)
    assert caught.value.path == "x"


def test_it_uses_a_strict_sandboxed_environment():
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    assert isinstance(env, SandboxedEnvironment)
    assert env.undefined is StrictUndefined
    assert env.autoescape is False
    assert env.keep_trailing_newline is True


def test_it_does_not_escape_html():
    assert render("{{ v }}!", {"v": "<b>&"}) == "<b>&!"


def test_it_compiles_each_template_string_once():
    source = "{{ USER_GPU }} gpus (cache test)"
    render(source, {"USER_GPU": 0})
    before = render_module._compile.cache_info()
    for gpus in range(1, 5):
        assert render(source, {"USER_GPU": gpus}) == f"{gpus} gpus (cache test)"
    after = render_module._compile.cache_info()
    assert after.hits - before.hits == 4
    assert after.misses == before.misses


def test_it_lists_referenced_variables_across_a_structure():
    template = {
        "a": "{{ USER_CPU }}",
        "b": ["x-{{ USER_GPU }}", {"c": "{% if K8_MEMORY %}{{ USER_MEMORY }}{% endif %}"}],
        "d": "plain",
        "e": 3,
    }
    assert referenced_variables(template) == {"USER_CPU", "USER_GPU", "K8_MEMORY", "USER_MEMORY"}


def test_it_does_not_count_locally_assigned_names_as_referenced():
    assert referenced_variables("{% for x in ITEMS %}{{ x }}{% endfor %}") == {"ITEMS"}


def test_it_finds_no_variables_in_plain_values():
    assert referenced_variables({"a": "plain", "b": [1, None, True]}) == set()


def test_it_reports_syntax_errors_while_listing_variables_with_the_path():
    with pytest.raises(RenderError) as caught:
        referenced_variables({"a": ["ok", "{{ broken"]})
    assert caught.value.path == "a[1]"


def test_it_accepts_valid_syntax():
    check_syntax({"a": ["{{ USER_CPU }}", "{% if x %}y{% endif %}", "plain", 4]})


def test_it_points_at_the_first_string_with_bad_syntax():
    with pytest.raises(RenderError) as caught:
        check_syntax({"a": "{{ ok }}", "b": ["{% if %}", "{{ also bad"]}, "pod_templates.x")
    assert caught.value.path == "pod_templates.x.b[0]"
    assert "template syntax error" in caught.value.message
