"""One step to onboard a researcher (issue 44, point 4): staff name a person on a project's page, through the API or
the CLI; the account is created if needed, made a member, and may then use the pools where the project has a quota
(unless OSMO_PROJECT_MEMBERS_USE_POOLS is off); a user with one project has it as default."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import AuditEvent, ConfigKind, ConfigRevision, Project
from pools.models.visibility import Access
from tests.access.conftest import HIDDEN_POOL
from tests.support.commands import run as run_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def vision(shared_node_pools):
    """Project vision (department research) with a quota in the staff-only pool and none elsewhere."""
    writes.import_document(ConfigKind.DEPARTMENT, {"name": "research"}, author="tests")
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": [], "roles": []},
        "resources": [{"node_pool": HIDDEN_POOL, "gpu": {"deserved": 4}}]}}, author="tests")
    return Project.objects.get(name="vision")


def signed_in(username: str) -> APIClient:
    client = APIClient()
    client.force_login(get_user_model().objects.get(username=username))
    return client


def grants(client) -> dict:
    return {pool["name"]: [(g["role"], g["rule"], g["reason"]) for g in pool["grants"]]
            for pool in client.get("/api/profile/").json()["pools"]}


def test_staff_onboard_a_new_person_by_e_mail_through_the_api(client_as, vision):
    answer = client_as("staff").post("/api/projects/vision/members/", {"user": "ada@example.org"}, format="json")

    assert answer.status_code == 201, answer.json()
    body = answer.json()
    assert (body["user"], body["created"], body["added"], body["pools"]) == ("ada@example.org", True, True,
                                                                            [HIDDEN_POOL])
    assert body["password"]
    ada = signed_in("ada@example.org")
    assert grants(ada)[HIDDEN_POOL] == [(None, "project member", f"You are a member of project vision, which has "
                                                                 f"a quota in pool {HIDDEN_POOL}.")]
    assert Client().login(username="ada@example.org", password=body["password"])
    assert ada.get("/api/profile/").json()["default_project"] == "vision"
    assert ConfigRevision.objects.filter(kind=ConfigKind.PROJECT, name="vision",
                                         description__contains="ada@example.org added as a member").count() == 1
    assert AuditEvent.objects.filter(kind="user", object="user/ada@example.org", action="create").count() == 1


def test_onboarding_again_changes_nothing_and_answers_200(client_as, vision):
    staff = client_as("staff")
    staff.post("/api/projects/vision/members/", {"user": "ada"}, format="json")
    again = staff.post("/api/projects/vision/members/", {"user": "ada"}, format="json")

    assert again.status_code == 200
    assert (again.json()["created"], again.json()["added"], again.json()["password"]) == (False, False, None)
    assert ConfigRevision.objects.filter(kind=ConfigKind.PROJECT, name="vision").count() == 2  # create + one add


@pytest.mark.parametrize("body, field", [({"user": "no spaces allowed"}, "user"), ({"user": "a@b"}, "user"),
                                         ({"user": "x" * 151}, "user"), ({}, "user"), ({"user": 3}, "user")])
def test_bad_names_are_refused_naming_the_field_and_nothing_is_written(client_as, vision, body, field):
    staff = client_as("staff")
    before = get_user_model().objects.count()
    answer = staff.post("/api/projects/vision/members/", body, format="json")

    assert answer.status_code == 400 and answer.json()["field"] == field, answer.json()
    assert get_user_model().objects.count() == before


def test_only_staff_onboard(client_as, vision, teammate):
    assert client_as("teammate").post("/api/projects/vision/members/", {"user": "ada"},
                                      format="json").status_code == 403
    assert not get_user_model().objects.filter(username="ada").exists()


def test_a_pools_own_project_is_refused(client_as, vision):
    writes.import_document(ConfigKind.POOL, {"pools": {"gpupool": {"backend": "default", "resources": {
        "gpu": {"guarantee": 2}}}}}, author="tests")

    answer = client_as("staff").post("/api/projects/gpupool/members/", {"user": "ada"}, format="json")

    assert answer.status_code == 400 and answer.json()["field"] == "project"


@override_settings(OSMO_PROJECT_MEMBERS_USE_POOLS=False)
def test_sites_that_grant_pools_only_by_role_turn_it_off(client_as, vision):
    body = client_as("staff").post("/api/projects/vision/members/", {"user": "ada"}, format="json").json()

    assert "OSMO_PROJECT_MEMBERS_USE_POOLS is off" in body["summary"]
    assert HIDDEN_POOL not in grants(signed_in("ada"))


def test_a_role_named_as_member_grants_the_pools_to_its_holders(client_as, vision, teammate):
    document = writes.export(ConfigKind.PROJECT, "vision")
    document["members"]["roles"] = ["osmo-team"]
    writes.import_document(ConfigKind.PROJECT, document, name="vision", author="tests")

    assert grants(client_as("teammate"))[HIDDEN_POOL][0][1] == "project member"


def test_the_pools_and_roles_are_read_in_one_query(vision, teammate):
    writes.import_document(ConfigKind.PROJECT, {"vision": {**writes.export(ConfigKind.PROJECT, "vision"),
                                                           "members": {"users": ["teammate"], "roles": []}}})
    access = Access(teammate)
    with CaptureQueriesContext(connection) as queries:
        assert access.may_use_pool(HIDDEN_POOL) and access.may_use_pool("teamcluster01")
        assert not access.may_use_pool("sim-a")
        assert access.pool_filter() is not None

    assert len(queries.captured_queries) == 1


def test_the_cli_onboards_too(vision):
    out = run_command("project", "add-member", "vision", "grace")

    assert "Account grace created and added to project vision" in out and "Password of grace" in out
    assert HIDDEN_POOL in Access(get_user_model().objects.get(username="grace")).project_pools
    with pytest.raises(CommandError, match="There is no project named 'nope'"):
        run_command("project", "add-member", "nope", "grace")


def test_staff_onboard_from_the_project_page(staff, vision, teammate):
    page = Client()
    page.force_login(staff)
    assert 'id="add-member-form"' in page.get("/projects/vision/").content.decode()

    answer = page.post("/projects/vision/", {"user": "ada"})

    text = answer.content.decode()
    assert answer.status_code == 200 and 'id="onboarded"' in text and 'id="onboarded-password"' in text
    assert "user ada, by name" in text
    refused = page.post("/projects/vision/", {"user": "bad name"})
    assert refused.status_code == 400 and 'id="add-member-error"' in refused.content.decode()
    researcher = Client()
    researcher.force_login(teammate)
    assert 'id="add-member-form"' not in researcher.get("/projects/default/").content.decode()
    assert researcher.post("/projects/default/", {"user": "eve"}).status_code == 403


def test_one_project_is_the_default_of_the_submit_form(client_as, vision):
    client_as("staff").post("/api/projects/vision/members/", {"user": "ada"}, format="json")
    page = Client()
    page.force_login(get_user_model().objects.get(username="ada"))

    text = page.get("/workloads/new/").content.decode()

    assert '<option value="vision" selected>' in text


def test_user_creation_deactivation_and_deletion_are_audited(client_as, vision):
    call_command("createsuperuser", "--noinput", username="root2", email="r@example.org", verbosity=0)
    user = get_user_model().objects.get(username="root2")
    user.is_active = False  # as an administrator sets it in the admin
    user.save()
    user.delete()

    assert list(AuditEvent.objects.filter(object="user/root2").values_list("action", flat=True).order_by("id")) == [
        "create", "deactivate", "delete"]
