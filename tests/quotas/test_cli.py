"""`manage.py quota list`, `project list`, `department list`: json prints exactly the API's rows (as staff see
them), tables in the documented columns, refusals in one paragraph."""

import json

import pytest
from django.core.management.base import CommandError

from pools.config import writes
from pools.models import ConfigKind
from tests.quotas.conftest import project_doc
from tests.support.commands import run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("command", "url"), [
    (["quota", "list"], "/api/quotas/"),
    (["quota", "list", "--pool", "training"], "/api/quotas/?pool=training"),
    (["quota", "list", "--project", "vision"], "/api/quotas/?project=vision"),
    (["quota", "list", "--department", "research", "--pool", "training"],
     "/api/quotas/?department=research&pool=training"),
    (["project", "list"], "/api/projects/"),
    (["department", "list"], "/api/departments/"),
])
def test_json_prints_exactly_the_api_s_rows(staff_api, command, url):
    printed = json.loads(run(*command, "--format", "json"))
    assert printed
    assert printed == staff_api.get(url).json()


def test_the_quota_table_has_the_documented_columns_and_gpu_figures(quota_world):
    lines = run("quota", "list", "--pool", "training").splitlines()
    assert lines[0].split() == ["POOL", "DEPARTMENT", "PROJECT", "GPU", "DESERVED", "LIMIT", "WEIGHT", "ALLOCATED",
                                "PENDING", "FAIR", "SHARE", "OVER", "QUOTA", "STARVED"]
    rows = {tuple(line.split()[1:3]): line.split() for line in lines[1:]}
    assert rows[("research", "vision")] == ["training", "research", "vision", "8", "16", "High", "10", "0", "10", "2",
                                            "-"]
    assert rows[("research", "-")][3] == "12"
    assert rows[("product", "nlp")][4] == "none"


def test_the_quota_table_says_when_a_pool_is_over_subscribed(quota_world):
    writes.import_document(ConfigKind.PROJECT, project_doc("big", "product", {"training": {"gpu": {"deserved": 30}}}),
                           author="tests")
    out = run("quota", "list")
    assert "Pool training is over-subscribed: its departments deserve 22 GPUs more than its 24 usable GPUs." in out
    assert "Pool inference is over-subscribed" not in out


def test_project_and_department_tables(quota_world):
    projects = run("project", "list").splitlines()
    assert projects[0].split() == ["PROJECT", "DEPARTMENT", "NAMESPACE", "DEFAULT", "POOLS", "USERS", "ROLES"]
    assert ["vision", "research", "proj-vision", "inference,training", "researcher", "osmo-secret,osmo-training"] \
        in [line.split() for line in projects]
    departments = [line.split() for line in run("department", "list").splitlines()]
    assert departments[0] == ["DEPARTMENT", "PROJECTS", "DEFAULT", "POOLS", "DESCRIPTION"]
    assert ["research", "vision", "-", "-"] in departments


@pytest.mark.parametrize(("option", "message"), [
    ("--pool", "There is no pool named 'nope'"),
    ("--project", "There is no project named 'nope'"),
    ("--department", "There is no department named 'nope'"),
])
def test_an_unknown_name_is_refused_in_one_paragraph(quota_world, option, message):
    with pytest.raises(CommandError) as refused:
        run("quota", "list", option, "nope")
    assert str(refused.value).startswith(message)
    assert "\n" not in str(refused.value)


def test_as_user_prints_exactly_what_that_researcher_s_api_answers(member_api, member, staff):
    for args, url in ((["quota", "list"], "/api/quotas/"), (["quota", "list", "--pool", "training"],
                                                             "/api/quotas/?pool=training")):
        printed = json.loads(run(*args, "--as-user", member.username, "--format", "json"))
        assert printed == member_api.get(url).json()
    everything = json.loads(run("quota", "list", "--format", "json"))
    assert len(printed) < len(json.loads(run("quota", "list", "--pool", "training", "--format", "json")))
    assert json.loads(run("quota", "list", "--as-user", staff.username, "--format", "json")) == everything
    with pytest.raises(CommandError, match="There is no user named 'ghost'"):
        run("quota", "list", "--as-user", "ghost")
