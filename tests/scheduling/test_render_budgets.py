"""Issue 25, rendering with budgets, through OSMO's workflow path as a signed-in user sends it: a short
workflow file cannot take the server's memory or time, every template error is a 400 naming `file` and the
line, and YAML aliases cannot expand a small file into a huge row. Memory is measured with tracemalloc; time is
a clock the test steps (pools.engine.sandbox.clock), never the wall clock."""

import itertools
import re
import tracemalloc
from pathlib import Path

import pytest

from pools import render_limits
from pools.engine import jsonread, sandbox
from scheduling.models import Workload
from tests.scheduling.test_osmo import WORKFLOW, submit_workflow

pytestmark = pytest.mark.django_db

MB = 1024 * 1024

SHORT = """workflow:
  name: short
  resources:
    default: {cpu: 1, gpu: 0, memory: 1Gi}
  tasks:
  - name: one
    image: ubuntu:24.04
    command: ["{command}"]
"""


def workflow_with(command: str) -> str:
    return SHORT.replace("{command}", command)


def submit_measured(api, text: str):
    # The first request of a process imports the API's modules (about 30 MB): a refused submission first, so the
    # peak measured is the render's, whichever test runs first.
    assert submit_workflow(api, workflow_with("{{ 1/0 }}"), variables=()).status_code == 400
    tracemalloc.start()
    try:
        response = submit_workflow(api, text, variables=())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return response, peak


def assert_refused(response, line: int, limit: str | None = None) -> dict:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    answer = response.json()
    assert answer["field"] == "file" and answer["line"] == line, answer
    assert answer["detail"].startswith(f"file: line {line}: "), answer
    if limit:
        assert answer["limit"] == limit and limit in answer["detail"]
    assert not Workload.objects.exists()
    return answer


def test_a_repeated_string_is_refused_before_it_takes_the_memory(researcher_api):
    # The finding was 'A' * 300000000 (1.66 GB); a tenth of it shows the same without loading the machine.
    response, peak = submit_measured(researcher_api, workflow_with("{{ 'A' * 30000000 }}"))
    assert_refused(response, 8, "OSMO_RENDER_MAX_VALUE")
    assert peak < 20 * MB, f"{peak / MB:.1f} MB"


def test_the_rendered_file_has_an_output_limit_checked_while_it_renders(researcher_api):
    response, peak = submit_measured(researcher_api, workflow_with(
        "{% for i in range(1800) %}{{ 'A' * 1000 }}{% endfor %}"))
    assert_refused(response, 8, "OSMO_RENDER_MAX_OUTPUT")
    assert peak < 20 * MB, f"{peak / MB:.1f} MB"


def test_nested_loops_stop_at_the_time_budget(researcher_api, monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr(sandbox, "clock", lambda: next(ticks) * 0.01)  # 100 operations make the 1 s budget
    response = submit_workflow(researcher_api, workflow_with(
        "{% for i in range(2000) %}{% for j in range(2000) %}{% endfor %}{% endfor %}"), variables=())
    answer = assert_refused(response, 8, "OSMO_RENDER_MAX_SECONDS")
    assert "took too long" in answer["detail"]


@pytest.mark.parametrize(("expression", "says"), [
    ("{{ 1/0 }}", "ZeroDivisionError"),
    ("{{ 7**6000 }}", "OSMO_RENDER_MAX_INT_DIGITS"),
    ("{{ 'a' + 1 }}", "TypeError"),
    ("{{ ''.__class__ }}", "unsafe"),
    ("{{ nothing_given }}", "'nothing_given' is undefined"),
])
def test_every_template_error_is_a_400_naming_file_and_line(researcher_api, expression, says):
    response = submit_workflow(researcher_api, workflow_with(expression), variables=())
    answer = assert_refused(response, 8)
    assert says in answer["detail"]


def test_a_recursive_macro_is_a_400_naming_its_line(researcher_api):
    text = "{% macro m(n) %}\n{{ m(n + 1) }}\n{% endmacro %}\n" + workflow_with("{{ m(1) }}")
    answer = assert_refused(submit_workflow(researcher_api, text, variables=()), 2)
    assert "nest too deeply" in answer["detail"]


def test_a_syntax_error_names_its_line(researcher_api):
    assert_refused(submit_workflow(researcher_api, workflow_with("{{ oops( }}"), variables=()), 8)


def aliased(references: int) -> str:
    """A short file whose one 100 KB string is referenced `references` times."""
    return (f"default-values:\n  filler: &filler {'a' * 100_000}\n"
            + workflow_with("x").replace('["x"]', "[" + ", ".join(["*filler"] * references) + "]"))


def test_aliases_that_would_expand_a_small_file_into_a_huge_row_are_refused(researcher_api):
    # The finding: a 105 KB file, one 100 KB string referenced 1,000 times, stored as two 100 MB JSON values.
    text = aliased(1000)
    assert len(text) < 110_000
    response, peak = submit_measured(researcher_api, text)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == "file" and "OSMO_YAML_MAX_EXPANDED" in response.json()["detail"]
    assert not Workload.objects.exists() and peak < 40 * MB, f"{peak / MB:.1f} MB"


def test_the_limits_are_settings(researcher_api, settings):
    assert submit_workflow(researcher_api, query="?priority=LOW").status_code == 200
    settings.OSMO_RENDER_MAX_OUTPUT = 100
    Workload.objects.all().delete()
    response = submit_workflow(researcher_api, query="?priority=LOW")
    assert response.status_code == 400 and response.json()["limit"] == "OSMO_RENDER_MAX_OUTPUT"
    assert "OSMO_RENDER_MAX_OUTPUT = 100 " in response.json()["detail"]


def test_without_its_setting_the_yaml_limit_is_the_documented_default(researcher_api, settings, monkeypatch):
    documented = (Path(__file__).resolve().parents[2] / "docs" / "operations" / "settings.md").read_text()
    default = int(re.search(r"^\| `OSMO_YAML_MAX_EXPANDED` \| (\d+) \|", documented, re.MULTILINE)[1])
    monkeypatch.setattr(jsonread, "MAX_EXPANDED", jsonread.MAX_EXPANDED)  # put back after the test
    del settings.OSMO_YAML_MAX_EXPANDED  # a settings module that does not name it, read at start-up:
    render_limits.apply()
    response = submit_workflow(researcher_api, aliased(1000), variables=())
    assert response.status_code == 400 and f"OSMO_YAML_MAX_EXPANDED = {default:,} " in response.json()["detail"]


def test_an_ordinary_workflow_still_renders(researcher_api):
    response = submit_workflow(researcher_api, WORKFLOW.replace("echo {{ dataset }}", "echo {{ dataset|upper }} "
                                                               "{% for i in range(3) %}{{ i }}{% endfor %}"),
                               query="?priority=LOW")
    assert response.status_code == 200, response.json()
    prepare = Workload.objects.get(group="prepare-group")
    assert prepare.request["command"][-1] == "echo IMAGENET 012"
