"""The budgeted sandbox (pools.engine.sandbox): every way a short template could take memory or time is stopped
while it renders, before the memory is taken (peaks measured with tracemalloc), naming the limit and the line;
time is a clock the test steps, never the wall clock."""

import itertools
import tracemalloc

import jinja2
import pytest
from jinja2.sandbox import SandboxedEnvironment

from pools.engine import RenderError, render, sandbox
from pools.engine.sandbox import BudgetExceeded, Limits, render_text, template_line

MB = 1024 * 1024
STILL = Limits(clock=lambda: 0.0)  # time stands still: only the size budgets can stop these


def peak_of(action) -> tuple[int, object]:
    tracemalloc.start()
    try:
        try:
            result = action()
        except Exception as exc:  # the caller asserts which
            result = exc
        return tracemalloc.get_traced_memory()[1], result
    finally:
        tracemalloc.stop()


S = "{% set s = 'A' * 900000 %}"

HAZARDS = [
    ("{{ 'A' * 300000000 }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 300000000 * 'A' }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ ['A'] * 300000000 }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 7 ** 6000 }}", "OSMO_RENDER_MAX_INT_DIGITS"),
    ("{% set n = 10 ** 900 %}{{ n * n }}", "OSMO_RENDER_MAX_INT_DIGITS"),
    ("{{ ('9' * 2000)|int }}", "OSMO_RENDER_MAX_INT_DIGITS"),
    ("{{ 'A'|center(300000000) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 'A\nB'|indent(300000000) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 'A'.ljust(300000000) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 'A'.zfill(300000000) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ '{:>300000000}'.format(1) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ '{:>{w}}'.format(1, w=300000000) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ '%300000000d' % 1 }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ '%*d' % (300000000, 1) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ '%300000000d'|format(1) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ range(300000000)|list }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 'AAAA'|replace('A', 'B' * 900000) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 'AAAA'.replace('A', 'B' * 900000) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ 1111|replace('1', 'B' * 900000) }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ s + s }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{% set t = s ~ s %}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ ([s] * 100)|join }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ [s, s, s]|join }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ ''.join([s, s, s]) }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ [s, s, s]|tojson }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ [s, s, s] }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ 'A'|replace('A', [s, s, s]) }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ [s, s, s]|string }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ '{}'.format([s, s, s]) }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{% set x %}{{ s }}{{ s }}{% endset %}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{% macro m() %}{% for i in range(100) %}{{ s }}{% endfor %}{% endmacro %}{% set x = m() %}",
     "OSMO_RENDER_MAX_WORK"),
    (S + "{% set l = [] %}{% for i in range(100) %}{% if l.append(s ~ i) %}{% endif %}{% endfor %}",
     "OSMO_RENDER_MAX_WORK"),
    ("{% for i in range(2000) %}{{ 'A' * 1000 }}{% endfor %}", "OSMO_RENDER_MAX_OUTPUT"),
    ("{% set l = [1] %}{% for i in range(40) %}{% if l.extend(l) %}{% endif %}{% endfor %}", "OSMO_RENDER_MAX_VALUE"),
    ("{% set l = [] %}{{ l.extend([1]|slice(300000000)) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ [1]|batch(300000000, 'x')|list }}", "OSMO_RENDER_MAX_VALUE"),
    ("{{ [1, [2]]|tojson(indent=300000000) }}", "OSMO_RENDER_MAX_VALUE"),
    (S + "{{ s.translate({65: 'BBBBBBBBBB'}) }}", "OSMO_RENDER_MAX_VALUE"),
    ("{% for i in range(100000) %}" + "B" * 200 + "{% endfor %}", "OSMO_RENDER_MAX_OUTPUT"),
    ("{% set x %}{% for i in range(100000) %}" + "B" * 200 + "{% endfor %}{% endset %}", "OSMO_RENDER_MAX_WORK"),
]


@pytest.mark.parametrize(("source", "limit"), HAZARDS)
def test_it_stops_a_template_before_it_takes_the_memory(source, limit):
    peak, result = peak_of(lambda: render_text(source, {}, STILL))
    assert isinstance(result, BudgetExceeded), result
    assert result.limit == limit and limit in str(result)
    assert peak < 24 * MB, f"{peak / MB:.1f} MB"


def test_the_same_templates_take_the_memory_in_jinjas_own_sandbox():
    """What the budget prevents, measured on jinja2's sandbox (small enough to run)."""
    plain = SandboxedEnvironment()
    peak, _ = peak_of(lambda: plain.from_string("{{ ('A' * 900000 ~ 'B') * 40 }}").render())
    assert peak > 30 * MB


def stepping_clock(step: float):
    ticks = itertools.count()
    return lambda: next(ticks) * step


@pytest.mark.parametrize("source", [
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
    "{% macro m(n) %}{% for x in range(100000) %}{% endfor %}{{ m(n + 1) if n < 50 }}{% endmacro %}{{ m(0) }}",
    "{% for x in [2, 2] recursive %}{% for y in range(100000) %}{% endfor %}{{ loop([x - 1] * 1000) if x }}"
    "{% endfor %}",
])
def test_time_is_checked_as_it_runs_against_an_injected_clock(source):
    limits = Limits(max_seconds=2, clock=stepping_clock(0.001))
    with pytest.raises(BudgetExceeded) as caught:
        render_text(source, {}, limits)
    assert caught.value.limit == "OSMO_RENDER_MAX_SECONDS" and template_line(caught.value) == 1


def test_the_module_clock_is_read_when_no_clock_is_given(monkeypatch):
    monkeypatch.setattr(sandbox, "clock", stepping_clock(1.0))
    with pytest.raises(BudgetExceeded, match="OSMO_RENDER_MAX_SECONDS"):
        render_text("{% for i in range(10) %}{{ i }}{% endfor %}", {}, Limits(max_seconds=3))


@pytest.mark.parametrize(("source", "line", "kind"), [
    ("a\nb\n{{ 1/0 }}", 3, ZeroDivisionError),
    ("a\n{% macro m(n) %}\n{{ m(n + 1) }}\n{% endmacro %}\n{{ m(1) }}", 3, RecursionError),
    ("a\n\n\n{{ 'A' * 10**9 }}", 4, BudgetExceeded),
    ("{% macro m() %}\n\n{{ 7 ** 6000 }}{% endmacro %}\n{{ m() }}", 3, BudgetExceeded),
    ("x\n{{ 'a' + 1 }}", 2, TypeError),
])
def test_every_error_knows_its_template_line(source, line, kind):
    with pytest.raises(kind) as caught:
        render_text(source, {}, STILL)
    assert template_line(caught.value) == line


def test_ordinary_templates_render_as_in_jinjas_sandbox():
    sources = [
        "name: {{ name }}\n{% for i in range(3) %}- {{ i }} {{ loop.index }}/{{ loop.length }}\n{% endfor %}",
        "{{ '%05d' % 7 }} {{ '{:>4}|{}'.format(1, 'x') }} {{ 'a-b'.split('-')|join(',') }} {{ 2 ** 10 }}",
        "{% macro m(x) %}<{{ x|upper }}>{% endmacro %}{{ m('a') ~ m('b') }}{% set y %}{{ m('c') }}{% endset %}{{ y }}",
        "{{ [3, 1, 2]|sort|list }} {{ {'b': 1, 'a': 2}|dictsort }} {{ names|map('upper')|join(' ') }}",
        "{{ 'x' * 3 }}{{ [1] * 2 }}{{ 7 // 2 }}{{ 7 / 2 }}{{ 7 % 3 }}{{ 'a' + 'b' }}{{ (1, 2) + (3,) }}",
        "{% for k, v in {'a': 1}.items() %}{{ k }}={{ v }}{% else %}none{% endfor %}{{ 'AB'|center(6) }}",
        "{{ 'text'|indent(2, true) }} {{ 'a b c d'|wordwrap(3) }} {{ 'aXa'|replace('X', 'YY') }} {{ [1, 2]|sum }}",
        "{% set l = [] %}{% for i in range(3) %}{% if l.append(i) %}{% endif %}{% endfor %}{{ l }}{{ l|tojson }}",
    ]
    plain = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    variables = {"name": "n", "names": ["a", "b"]}
    for source in sources:
        assert render_text(source, variables) == plain.from_string(source).render(variables), source


def test_lorem_ipsum_is_not_offered():
    with pytest.raises(jinja2.UndefinedError):
        render_text("{{ lipsum(n=100000) }}", {})


def test_values_made_within_the_limits_still_render():
    limits = Limits(max_value=11, max_output=100, clock=lambda: 0.0)
    assert render_text("{{ 'A' * 11 }}", {}, limits) == "A" * 11
    assert render_text("{% for i in range(10) %}{{ 'A' * 10 }}{% endfor %}", {}, limits) == "A" * 100
    with pytest.raises(BudgetExceeded, match="OSMO_RENDER_MAX_VALUE = 11 "):
        render_text("{{ 'A' * 12 }}", {}, limits)
    with pytest.raises(BudgetExceeded, match="OSMO_RENDER_MAX_OUTPUT = 100 ") as caught:
        render_text("{{ 'x' }}\n{% for i in range(10) %}{{ 'A' * 10 }}{% endfor %}", {}, limits)
    assert template_line(caught.value) == 2


def test_pod_templates_render_in_the_same_budget_and_name_the_limit():
    """Pool templates are the admin's, but the values in them are the user's."""
    template = {"spec": {"containers": [{"name": "x", "args": ["{{ FILLER * COUNT }}"]}]}}
    peak, result = peak_of(lambda: render(template, {"FILLER": "A", "COUNT": 300_000_000}, "pod_template"))
    assert isinstance(result, RenderError) and "OSMO_RENDER_MAX_VALUE" in str(result)
    assert result.path == "pod_template.spec.containers[0].args[0]" and peak < 8 * MB
    with pytest.raises(RenderError, match=r"ZeroDivisionError.*line 1"):
        render({"a": "x {{ 1/0 }}"}, {})
