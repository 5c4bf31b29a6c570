"""Access in the admin, in two steps: a role's pool picker writes the policy that grants exactly the ticked
pools, and the user page gives and takes roles (the same rows as `manage.py user`) and project membership."""

import json

import pytest

from pools.access.documents import pool_action, split_pool_actions, with_pool_actions
from pools.config import writes
from pools.models import (
    Backend,
    ConfigKind,
    ConfigRevision,
    Department,
    Node,
    NodeMembership,
    Pool,
    Project,
    ProjectMember,
    Role,
    RoleAssignment,
)
from tests.support.commands import run
from tests.support.journey import config
from tests.test_admin import form_data

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lookalike_pools")]  # what admin_client's pages show

# `training-b` begins with `training`: a glob or the osmo- name rule would grant it too.
POOLS = ["default", "training", "training-b", "inference"]


@pytest.fixture
def lookalike_pools(db):
    """Pools default, training, training-b and inference, one node in each: bare rows, by hand, as the access
    tests' world (tests/access/conftest.py says why)."""
    backend = Backend.objects.create(name="default", kind=Backend.Kind.SIMULATED)
    pools = Pool.objects.bulk_create([Pool(name=name, backend=backend) for name in POOLS])
    nodes = Node.objects.bulk_create([Node(backend=backend, name=f"node-{pool.name}", pool_names=[pool.name])
                                      for pool in pools])
    NodeMembership.objects.bulk_create([NodeMembership(node=node, pool=pool)
                                        for node, pool in zip(nodes, pools, strict=True)])


def save(admin_client, url: str, **changes):
    page = admin_client.get(url)
    assert page.status_code == 200
    data = form_data(page)
    if "date_joined" in data:  # the user form's date and time are two inputs
        joined = data.pop("date_joined")
        data.update(date_joined_0=joined.date().isoformat(), date_joined_1=joined.time().isoformat())
        data.pop("last_login", None)
    data.update(changes)
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else ""
    return response


def role_with_pools(admin_client, name: str, *pools: str, **changes) -> Role:
    save(admin_client, "/admin/pools/role/add/", name=name, pools=list(pools), **changes)
    return Role.objects.get(name=name)


def visible_to(client, user) -> tuple[set[str], str]:
    client.force_login(user)
    pools = {row["name"] for row in client.get("/api/pools/").json()}
    return pools, client.get("/nodes/").content.decode()


# ---- the pool picker (pure part) ----------------------------------------------------------------------

def test_the_picker_reads_back_only_exact_pool_actions_and_keeps_the_others_as_written():
    policies = [{"actions": [pool_action("training"), {"base": "http", "path": "/api/pool/team*", "method": "post"},
                             {"base": "http", "path": "/api/pool/inference", "method": "GET"},
                             {"base": "http", "path": "!/api/pool/training-b", "method": "post"}]},
                {"actions": [pool_action("inference")]}]

    picked, rest = split_pool_actions(policies, POOLS)

    assert picked == ["training", "inference"]
    assert rest == [{"actions": policies[0]["actions"][1:]}]
    assert with_pool_actions(rest, picked)[0]["actions"][-2:] == [pool_action("training"), pool_action("inference")]
    assert with_pool_actions([], ["training"]) == [{"actions": [pool_action("training")]}]


# ---- the role form ------------------------------------------------------------------------------------

def test_ticking_training_grants_exactly_training(admin_client, client, django_user_model, settings):
    settings.ACCESS_DEFAULT_POOL_OPEN = False
    role = role_with_pools(admin_client, "trainers", "training", description="Training only")
    user = django_user_model.objects.create_user("alice")
    run("user", "add-role", "alice", role.name)

    assert role.policies == [{"actions": [{"base": "http", "path": "/api/pool/training", "method": "post"}]}]
    assert ConfigRevision.objects.get(kind=ConfigKind.ROLE, name="trainers").document == writes.export(
        ConfigKind.ROLE, "trainers")
    pools, nodes_page = visible_to(client, user)
    assert pools == {"training"}
    assert "node-training<" in nodes_page or "node-training\"" in nodes_page
    for hidden in ("node-training-b", "node-inference", "node-default"):
        assert hidden not in nodes_page


def test_the_role_page_shows_ticked_pools_and_what_the_role_grants_but_no_raw_null(admin_client):
    role = role_with_pools(admin_client, "trainers", "training", "inference")

    page = admin_client.get(f"/admin/pools/role/{role.pk}/change/")

    form = page.context["adminform"].form
    assert [pool.name if hasattr(pool, "name") else pool for pool in form.initial["pools"]] == [
        "inference", "training"]
    assert form.initial["policies"] == []
    html = page.content.decode()
    assert ">null<" not in html
    assert "<details>" in html and "Policy JSON" in html  # the raw JSON is there on request only
    assert "<strong>training</strong>" in html and "<strong>training-b</strong>" not in html


def test_identity_provider_groups_are_a_list_typed_in_the_form_not_json(admin_client):
    role = role_with_pools(admin_client, "vision", "training", external_roles="vision-team, ml-admins\nextra")
    assert role.external_roles == ["vision-team", "ml-admins", "extra"]
    page = admin_client.get(f"/admin/pools/role/{role.pk}/change/").content.decode()
    assert "Identity-provider groups" in page and "vision-team, ml-admins, extra" in page
    assert page.index("Identity-provider groups") < page.index("Policy JSON")  # not among the advanced fields

    save(admin_client, f"/admin/pools/role/{role.pk}/change/", external_roles="none")
    role.refresh_from_db()
    assert role.external_roles == []
    save(admin_client, f"/admin/pools/role/{role.pk}/change/", external_roles="")
    role.refresh_from_db()
    assert role.external_roles is None


def test_unticking_a_pool_takes_it_away_and_keeps_the_other_rules(admin_client):
    writes.import_document(ConfigKind.ROLE, {"name": "mixed", "actions": [
        {"base": "http", "path": "/api/configs/*", "method": "get"}, pool_action("training"),
        pool_action("inference")]})
    role = Role.objects.get(name="mixed")

    save(admin_client, f"/admin/pools/role/{role.pk}/change/", pools=["inference"])

    role.refresh_from_db()
    assert role.policies == [{"actions": [{"base": "http", "path": "/api/configs/*", "method": "get"},
                                          pool_action("inference")]}]
    assert ConfigRevision.objects.filter(kind=ConfigKind.ROLE, name="mixed").count() == 2


def test_saving_a_role_unchanged_keeps_its_actions_in_their_order(admin_client):
    actions = [pool_action("training"), {"base": "http", "path": "/api/profile/*", "method": "*"}]
    writes.import_document(ConfigKind.ROLE, {"name": "ordered", "actions": actions})
    role = Role.objects.get(name="ordered")

    save(admin_client, f"/admin/pools/role/{role.pk}/change/")

    role.refresh_from_db()
    assert role.policies == [{"actions": actions}]
    assert ConfigRevision.objects.filter(kind=ConfigKind.ROLE, name="ordered").count() == 1


def test_a_pool_action_typed_in_the_json_counts_as_ticked(admin_client):
    role = role_with_pools(admin_client, "typed", policies=json.dumps([{"actions": [pool_action("inference")]}]))

    assert role.policies == [{"actions": [pool_action("inference")]}]


def test_a_bad_rule_beside_the_picker_is_refused_naming_it(admin_client):
    page = admin_client.get("/admin/pools/role/add/")
    data = form_data(page)
    data.update(name="bad", pools=["training"],
                policies=json.dumps([{"actions": [{"base": "http", "path": "/x", "method": "FETCH"}]}]))

    response = admin_client.post("/admin/pools/role/add/", data)

    assert response.status_code == 200
    assert "FETCH" in str(response.context["adminform"].form.errors)
    assert not Role.objects.filter(name="bad").exists()
    assert "<details>" not in response.content.decode().split("Other policy rules")[0][-400:]


def test_a_glob_the_database_cannot_read_is_refused_naming_it(admin_client):
    data = form_data(admin_client.get("/admin/pools/role/add/"))
    data.update(name="bad", policies=json.dumps([{"actions": [
        {"base": "http", "path": "/api/pool/[b--]*", "method": "post"}]}]))

    response = admin_client.post("/admin/pools/role/add/", data)

    assert response.status_code == 200
    assert "/api/pool/[b--]*" in str(response.context["adminform"].form.errors)
    assert not Role.objects.filter(name="bad").exists()


# ---- the user page ------------------------------------------------------------------------------------

def test_the_user_page_gives_and_takes_roles_like_the_cli(admin_client, django_user_model):
    trainers = role_with_pools(admin_client, "trainers", "training")
    config("ROLE", {"name": "other", "policies": []})
    other = Role.objects.get(name="other")
    user = django_user_model.objects.create_user("bob")
    run("user", "add-role", "bob", "other")
    url = f"/admin/auth/user/{user.pk}/change/"

    save(admin_client, url, roles=[str(trainers.pk), str(other.pk)])
    assert set(RoleAssignment.objects.filter(user=user).values_list("role__name", "assigned_by")) == {
        ("trainers", "ops"), ("other", "manage.py user")}

    save(admin_client, url, roles=[str(trainers.pk)])
    assert list(RoleAssignment.objects.filter(user=user).values_list("role__name", flat=True)) == ["trainers"]
    page = admin_client.get(url).content.decode()
    assert "<strong>training</strong>" in page and "<strong>training-b</strong>" not in page
    assert 'href="/admin/pools/role/add/?holder=bob"' in page


def test_the_user_pages_new_role_link_makes_a_role_that_user_holds_and_comes_back(admin_client, django_user_model):
    user = django_user_model.objects.create_user("bob")
    url = "/admin/pools/role/add/?holder=bob"
    page = admin_client.get(url)
    [inline] = page.context["inline_admin_formsets"]
    assert [form.initial.get("user") for form in inline.formset.forms] == [user.pk]
    data = form_data(page)
    data.update(name="bobs-pools", pools=["training"], _save="Save")
    data[f"{inline.formset.prefix}-0-user"] = str(user.pk)

    response = admin_client.post(url, data)

    assert response.status_code == 302
    assert response["Location"] == f"/admin/auth/user/{user.pk}/change/"
    assert list(RoleAssignment.objects.filter(user=user).values_list("role__name", "assigned_by")) == [
        ("bobs-pools", "ops")]
    assert Role.objects.get(name="bobs-pools").policies == [{"actions": [pool_action("training")]}]


def test_the_user_page_adds_and_removes_project_membership_as_revisions(admin_client, django_user_model):
    config("DEPARTMENT", {"research": {"name": "research"}})
    department = Department.objects.get(name="research")
    writes.import_document(ConfigKind.PROJECT, {"name": "vision", "department": department.name,
                                                "members": {"users": ["carol"], "roles": ["trainers"]}})
    project = Project.objects.get(name="vision")
    user = django_user_model.objects.create_user("dave")
    url = f"/admin/auth/user/{user.pk}/change/"

    save(admin_client, url, projects=[str(project.pk)])
    assert set(ProjectMember.objects.filter(project=project, kind="user").values_list("name", flat=True)) == {
        "carol", "dave"}
    assert ConfigRevision.objects.filter(kind=ConfigKind.PROJECT, name="vision").count() == 2

    save(admin_client, url, projects=[])
    assert list(ProjectMember.objects.filter(project=project, kind="user").values_list("name", flat=True)) == [
        "carol"]
    assert set(ProjectMember.objects.filter(project=project, kind="role").values_list("name", flat=True)) == {
        "trainers"}


def test_the_user_page_lists_projects_reached_through_a_role(admin_client, django_user_model):
    config("DEPARTMENT", {"research": {"name": "research"}})
    writes.import_document(ConfigKind.PROJECT, {"name": "vision", "department": "research",
                                                "members": {"users": [], "roles": ["trainers"]}})
    config("ROLE", {"name": "trainers", "policies": []})
    django_user_model.objects.create_user("erin")
    run("user", "add-role", "erin", "trainers")
    user = django_user_model.objects.get(username="erin")

    page = admin_client.get(f"/admin/auth/user/{user.pk}/change/").content.decode()

    assert ">vision</a> (role trainers)" in page


def test_the_user_list_shows_roles(admin_client, django_user_model, django_assert_max_num_queries):
    config("ROLE", {"name": "trainers", "policies": []})
    for index in range(5):
        django_user_model.objects.create_user(f"user{index}")
        run("user", "add-role", f"user{index}", "trainers")

    with django_assert_max_num_queries(12):
        page = admin_client.get("/admin/auth/user/")

    assert page.content.decode().count("<td class=\"field-role_names\">trainers</td>") == 5


def test_the_user_list_filters_by_role(admin_client, django_user_model):
    for role, user in (("trainers", "frank"), ("other", "grace")):
        config("ROLE", {"name": role, "policies": []})
        django_user_model.objects.create_user(user)
        run("user", "add-role", user, role)
    trainers = Role.objects.get(name="trainers")

    page = admin_client.get(f"/admin/auth/user/?role_assignments__role__id__exact={trainers.pk}").content.decode()

    assert ">frank</a>" in page and ">grace</a>" not in page


def test_a_staff_users_page_says_every_pool(admin_client, staff):
    page = admin_client.get(f"/admin/auth/user/{staff.pk}/change/").content.decode()

    assert "Every pool (staff)." in page
