"""`python manage.py config ...` as an operator uses it."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from pools.models import ConfigRevision, Pool
from tests.support import commands

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[1]


def run(*args, stdin: str | None = None) -> str:
    return commands.run("config", "--author", "cli-test", *args, stdin=stdin)


POOL_DOC = {"name": "vision", "backend": "default", "common_pod_template": ["default_ctrl", "default_user"],
            "common_default_variables": {"USER_CPU": 2, "USER_GPU": 1, "USER_MEMORY": "8Gi", "USER_STORAGE": "10Gi"},
            "common_resource_validations": ["default_cpu"],
            "default_platform": "gpu", "platforms": {"gpu": {"override_pod_template": ["gpu_toleration"]}}}


def test_update_reads_standard_input_and_reports_the_revision(defaults):
    assert run("update", "POOL", "vision", "--file", "-", "--description", "first", stdin=json.dumps(POOL_DOC)) \
        == "POOL: created vision (revision 2)\n"
    revision = ConfigRevision.objects.get(kind="POOL", name="vision")
    assert (revision.author_name, revision.description) == ("cli-test", "first")


def test_show_prints_what_update_accepts_back(defaults, tmp_path):
    run("update", "POOL", "--file", "-", stdin=json.dumps(POOL_DOC))
    shown = run("show", "pool", "vision")
    path = tmp_path / "vision.json"
    path.write_text(shown)
    assert "unchanged vision" in run("update", "POOL", "vision", "--file", str(path))
    assert json.loads(run("show", "POOL"))["pools"].keys() == {"default", "vision"}


def test_show_effective_has_the_documented_shape(defaults):
    run("update", "POOL", "--file", "-", stdin=json.dumps(POOL_DOC))
    effective = json.loads(run("show", "POOL", "vision", "--effective"))
    assert list(effective) == ["platforms"]
    gpu = effective["platforms"]["gpu"]
    assert list(gpu) == ["pod_template", "variables", "node_selector", "tolerations", "resource_validations"]
    assert gpu["node_selector"] == {"nvidia.com/gpu.present": "true"}
    assert gpu["variables"]["USER_GPU"] == 1
    assert [rule["operator"] for rule in gpu["resource_validations"]] == ["LE", "GT"]


def test_show_effective_needs_a_pool_name(defaults):
    with pytest.raises(CommandError, match="config show POOL NAME --effective"):
        run("show", "POD_TEMPLATE", "default_user", "--effective")


def test_delete_history_diff_and_rollback(defaults):
    run("update", "POOL", "--file", "-", stdin=json.dumps(POOL_DOC))
    run("update", "POOL", "--file", "-", stdin=json.dumps({**POOL_DOC, "description": "second"}))
    diff = run("diff", "POOL", "3")
    assert '+  "description": "second",' in diff and diff.startswith("--- POOL r2 vision")
    assert "No differences." in run("diff", "POOL", "3", "3")
    assert run("delete", "POOL", "vision") == "POOL: deleted vision (revision 4)\n"
    table = run("history", "POOL", "vision").splitlines()
    assert table[0].split() == ["TYPE", "REV", "NAME", "ACTION", "AUTHOR", "TIME", "DESCRIPTION"]
    assert [line.split()[1] for line in table[1:]] == ["4", "3", "2"]
    assert "created vision" in run("rollback", "POOL", "3")
    assert Pool.objects.get(name="vision").description == "second"
    rows = json.loads(run("history", "--format", "json", "--limit", "1"))
    assert rows[0]["description"] == "Rollback to revision 3" and rows[0]["revision"] == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("show", "WIDGET"), "Unknown configuration type 'WIDGET'"),
        (("show", "POOL", "nope"), "There is no POOL named 'nope'"),
        (("update", "POOL", "--file", "/nonexistent.json"), "Cannot read /nonexistent.json"),
        (("delete", "POOL", "default"), "default pool"),
        (("rollback", "POOL", "77"), "POOL has no revision 77"),
        (("diff", "POD_TEMPLATE", "77"), "POD_TEMPLATE has no revision 77"),
    ],
)
def test_refusals_are_one_clear_message(defaults, args, message):
    with pytest.raises(CommandError, match=message):
        run(*args)


def test_a_refusal_exits_non_zero_with_one_paragraph_and_no_traceback(tmp_path):
    bad = tmp_path / "a100_pod_template.json"
    bad.write_text('{\n"a100": {\n"spec": {\n"tolerations": [\n{"key": "x"}\n}\n}\n}\n')
    env = {**os.environ, "DEBUG": "1", "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
           "OSMO_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "manage.py", "config", "update", "POD_TEMPLATE", "a100", "--file", str(bad)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip() == f"CommandError: {bad} is malformed JSON at line 6, column 1: Expecting ',' delimiter"


# ---- integer and number options that reach the database or a sleep are checked in our words ----------------

@pytest.mark.parametrize("limit", ["0", "1000001", str(10 ** 30)])
def test_history_refuses_a_limit_out_of_range_before_the_database_does(defaults, limit):
    with pytest.raises(CommandError, match=rf"^--limit must be a whole number of revisions from 1 to 1,000,000 "
                                           rf"\(not {limit}\)$"):
        run("history", "--limit", limit)


@pytest.mark.parametrize("args", [("diff", "POOL", str(10 ** 30)), ("diff", "POOL", "1", str(10 ** 30)),
                                  ("rollback", "POOL", str(10 ** 30))])
def test_a_revision_beyond_any_integer_is_one_that_does_not_exist(defaults, args):
    with pytest.raises(CommandError, match=f"POOL has no revision {10 ** 30}"):
        run(*args)


@pytest.mark.parametrize("verb", ["describe", "cancel"])
def test_a_workload_id_of_36_hex_digits_that_is_no_uuid_is_no_workload(defaults, verb):
    with pytest.raises(CommandError, match=f"^There is no workload '{'0' * 36}'"):
        call_command("workload", verb, "0" * 36, stdout=io.StringIO())


@pytest.mark.parametrize("interval", ["nan", "inf", "0", "-1", "86401"])
def test_schedule_refuses_an_interval_that_is_not_a_number_of_seconds(defaults, interval):
    with pytest.raises(CommandError, match=r"^--interval must be a number of seconds above 0 and at most 86400"):
        call_command("schedule", "--once", "--interval", interval, stdout=io.StringIO())
