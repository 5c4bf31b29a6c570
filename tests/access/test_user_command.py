"""`manage.py user add-role|remove-role|list`."""

import json

import pytest
from django.core.management.base import CommandError

from pools.models import RoleAssignment
from tests.support import commands
from tests.support.journey import config

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model):
    for name in ("osmo-training", "osmo-inference"):
        config("ROLE", {"name": name, "policies": []})
    alice = django_user_model.objects.create_user("alice")
    django_user_model.objects.create_user("root", is_staff=True)
    return alice


def run(*args) -> str:
    return commands.run("user", *args)


def held(user) -> list[str]:
    return sorted(RoleAssignment.objects.filter(user=user).values_list("role__name", flat=True))


def test_add_role_gives_the_roles_once_and_says_which_were_held(people):
    assert run("add-role", "alice", "osmo-training").strip() == "alice: added osmo-training"
    assert run("add-role", "alice", "osmo-training", "osmo-inference").strip() == (
        "alice: added osmo-inference; already held osmo-training")
    assert held(people) == ["osmo-inference", "osmo-training"]
    assert set(RoleAssignment.objects.values_list("assigned_by", flat=True)) == {"manage.py user"}


def test_remove_role_takes_them_all_or_none(people):
    run("add-role", "alice", "osmo-training", "osmo-inference")
    with pytest.raises(CommandError, match=r"^There is no role .osmo-admin-ish. "):
        run("remove-role", "alice", "osmo-training", "osmo-admin-ish")
    config("ROLE", {"name": "osmo-other", "policies": []})
    with pytest.raises(CommandError, match=r"^alice does not hold osmo-other; nothing removed$"):
        run("remove-role", "alice", "osmo-training", "osmo-other")
    assert held(people) == ["osmo-inference", "osmo-training"]
    assert run("remove-role", "alice", "osmo-training").strip() == "alice: removed osmo-training"
    assert held(people) == ["osmo-inference"]


@pytest.mark.parametrize(("args", "message"), [
    (("add-role", "bob", "osmo-training"), "There is no user 'bob' (`user list` shows them)"),
    (("add-role", "alice", "nope"), "There is no role 'nope' (known: osmo-inference, osmo-training)"),
    (("list", "--role", "nope"), "There is no role 'nope' (known: osmo-inference, osmo-training)"),
])
def test_unknown_users_and_roles_are_one_line(people, args, message):
    with pytest.raises(CommandError) as refused:
        run(*args)
    assert str(refused.value) == message
    assert RoleAssignment.objects.count() == 0


def test_list_shows_users_and_roles_filtered_and_as_json(people):
    run("add-role", "alice", "osmo-training")
    assert run("list").splitlines() == [
        "USER   STAFF  ACTIVE  ROLES",
        "alice  no     yes     osmo-training",
        "root   yes    yes     -",
    ]
    assert [row.split()[0] for row in run("list", "--role", "osmo-training").splitlines()[1:]] == ["alice"]
    rows = json.loads(run("list", "--format", "json", "--role", "osmo-training"))
    assert [(row["id"], [role["name"] for role in row["roles"]]) for row in rows] == [("alice", ["osmo-training"])]
