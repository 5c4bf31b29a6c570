"""Department and project documents through the one write path: shapes, Run:ai aliases, refusals that
name the numbers, history, and the project each OSMO pool's resources.gpu stands for."""

import json

import pytest
from django.core.management import call_command

from pools.config import writes
from pools.engine import ConfigError
from pools.models import ConfigKind, ConfigRevision, Department, Project, ProjectMember, Quota
from tests.support.commands import run
from tests.support.journey import config

VISION = {"name": "vision", "department": "research", "description": "", "namespace": "proj-vision",
          "default_node_pools": ["training", "default"], "members": {"users": ["alice"], "roles": ["osmo-vision"]},
          "resources": [{"node_pool": "training", "gpu": {"deserved": 8, "limit": 16, "over_quota_weight": "High"},
                         "cpu": {"deserved": 64000, "limit": -1}, "memory": {"deserved": 549755813888}}]}


@pytest.fixture
def training_and_research(defaults):
    """Pool `training` (platform h100) and department `research`, for the projects the tests import."""
    writes.import_document(ConfigKind.POOL, {"pools": {"training": {"backend": "default", "platforms": {"h100": {}}}}},
                           author="tests")
    writes.import_document(ConfigKind.DEPARTMENT, {"name": "research"}, author="tests")


def test_it_stores_the_issue_s_project_document_and_exports_it_back(training_and_research):
    result = writes.import_document(ConfigKind.PROJECT, VISION, author="tests")
    assert result.created == ["vision"]
    exported = writes.export(ConfigKind.PROJECT, "vision")
    assert exported["members"] == {"users": ["alice"], "roles": ["osmo-vision"]}
    assert exported["resources"][0]["gpu"] == {"deserved": 8, "limit": 16, "over_quota_weight": "High"}
    assert exported["resources"][0]["cpu"] == {"deserved": 64000, "limit": -1, "over_quota_weight": "Medium"}
    quota = Quota.objects.get(project__name="vision", pool__name="training")
    assert (quota.gpu_deserved, quota.gpu_limit, quota.gpu_weight, quota.memory_deserved) == (8, 16, 3, 549755813888)
    again = writes.import_document(ConfigKind.PROJECT, exported, author="tests")
    assert again.unchanged == ["vision"] and again.revisions == []


def test_it_accepts_run_ai_field_names(training_and_research):
    document = {"name": "nlp", "parentId": "research", "defaultNodePools": ["training"],
                "resources": [{"nodePool": {"id": 3, "name": "training"},
                               "gpu": {"deserved": 2.5, "limit": 4, "overQuotaWeight": "Low"},
                               "memory": {"deserved": 100, "units": "Mib"}}]}
    writes.import_document(ConfigKind.PROJECT, document, author="tests")
    exported = writes.export(ConfigKind.PROJECT, "nlp")
    assert exported["department"] == "research" and exported["namespace"] == "proj-nlp"
    assert exported["default_node_pools"] == ["training"]
    assert exported["resources"][0]["gpu"] == {"deserved": 2.5, "limit": 4, "over_quota_weight": "Low"}
    assert exported["resources"][0]["memory"]["deserved"] == 100 * 1024 * 1024


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"gpu": {"deserved": 20, "limit": 16}}, "vision.resources[0].gpu.deserved", "deserved 20 is above its limit 16"),
    ({"gpu": {"deserved": -1}}, "vision.resources[0].gpu.deserved", "-1 is negative"),
    ({"gpu": {"deserved": 0.333}}, "vision.resources[0].gpu.deserved", "more than two decimals"),
    ({"cpu": {"limit": -2}}, "vision.resources[0].cpu.limit", "negative"),
    ({"gpu": {"over_quota_weight": "Huge"}}, "vision.resources[0].gpu.over_quota_weight", "not an over-quota weight"),
    ({"node_pool": "nowhere"}, "vision.resources[0].node_pool", "pool 'nowhere' does not exist"),
])
def test_it_refuses_a_quota_naming_the_numbers(training_and_research, change, field, words):
    document = json.loads(json.dumps(VISION))
    document["resources"][0].update(change)
    with pytest.raises(ConfigError) as refused:
        writes.import_document(ConfigKind.PROJECT, document, author="tests")
    assert words in refused.value.message
    assert refused.value.field == field
    assert not Project.objects.filter(name="vision").exists()


def test_it_refuses_projects_that_deserve_more_than_their_department(training_and_research):
    writes.import_document(ConfigKind.DEPARTMENT, {"name": "research", "resources": [
        {"node_pool": "training", "gpu": {"deserved": 10}}]}, author="tests")
    writes.import_document(ConfigKind.PROJECT, VISION, author="tests")
    second = {**VISION, "name": "nlp", "namespace": "proj-nlp",
              "resources": [{"node_pool": "training", "gpu": {"deserved": 4}}]}
    with pytest.raises(ConfigError) as refused:
        writes.import_document(ConfigKind.PROJECT, second, author="tests")
    assert "its projects deserve 12 GPUs of pool training, more than the department's 10 GPUs" in refused.value.message
    assert not Project.objects.filter(name="nlp").exists()


def test_a_department_without_a_row_for_the_pool_takes_any_sum(training_and_research):
    writes.import_document(ConfigKind.PROJECT, VISION, author="tests")
    second = {**VISION, "name": "nlp", "namespace": "proj-nlp"}
    assert writes.import_document(ConfigKind.PROJECT, second, author="tests").created == ["nlp"]


def test_it_refuses_to_delete_a_department_with_projects_and_lists_them(training_and_research):
    writes.import_document(ConfigKind.PROJECT, VISION, author="tests")
    with pytest.raises(ConfigError) as refused:
        writes.delete(ConfigKind.DEPARTMENT, "research", author="tests")
    assert "holds projects vision" in refused.value.message
    writes.delete(ConfigKind.PROJECT, "vision", author="tests")
    writes.delete(ConfigKind.DEPARTMENT, "research", author="tests")
    assert not Department.objects.filter(name="research").exists()
    assert not ProjectMember.objects.exists()


def test_history_diff_and_rollback_cover_projects(training_and_research):
    writes.import_document(ConfigKind.PROJECT, VISION, author="tests")
    changed = json.loads(json.dumps(VISION))
    changed["resources"][0]["gpu"]["deserved"] = 4
    result = writes.import_document(ConfigKind.PROJECT, changed, author="tests")
    first = ConfigRevision.objects.filter(kind=ConfigKind.PROJECT, name="vision").order_by("number").first()
    writes.rollback(ConfigKind.PROJECT, first.number, author="tests")
    assert Quota.objects.get(project__name="vision").gpu_deserved == 8
    assert result.revisions and result.revisions[0] > first.number


def test_an_osmo_pool_s_gpu_resources_are_its_own_project_s_quota(defaults):
    pool = {"backend": "default", "platforms": {"h100": {}},
            "resources": {"gpu": {"guarantee": 8, "maximum": 16, "weight": 3}}}
    result = writes.import_document(ConfigKind.POOL, {"pools": {"osmo-train": pool}}, author="tests")
    project = Project.objects.get(name="osmo-train")
    assert project.department.name == "pools" and project.pool.name == "osmo-train"
    quota = Quota.objects.get(project=project)
    assert (quota.gpu_deserved, quota.gpu_limit, quota.gpu_weight) == (8, 16, 3)
    assert ConfigRevision.objects.filter(kind=ConfigKind.PROJECT, name="osmo-train").count() == 1
    assert len(result.revisions) == 2  # the pool's and its project's
    pool["resources"] = {"gpu": {"guarantee": 2}}
    writes.import_document(ConfigKind.POOL, {"pools": {"osmo-train": pool}}, author="tests")
    assert Quota.objects.get(project=project).gpu_limit == -1
    with pytest.raises(ConfigError):
        writes.delete(ConfigKind.PROJECT, "osmo-train", author="tests")
    writes.delete(ConfigKind.POOL, "osmo-train", author="tests")
    assert not Project.objects.filter(name="osmo-train").exists()


def test_a_project_document_round_trips_through_config_show_and_update(training_and_research, tmp_path, capsys):
    path = tmp_path / "vision.json"
    path.write_text(json.dumps(VISION))
    call_command("config", "update", "PROJECT", "vision", "--file", str(path))
    capsys.readouterr()
    call_command("config", "show", "PROJECT", "vision")
    shown = capsys.readouterr().out
    path.write_text(shown)
    call_command("config", "update", "PROJECT", "vision", "--file", str(path))
    assert "unchanged vision" in capsys.readouterr().out


def test_a_member_sees_the_projects_they_belong_to_by_name_by_role_or_through_a_pool(training_and_research,
        django_user_model,
                                                                                      settings):
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    carol = django_user_model.objects.create_user("carol")
    staff = django_user_model.objects.create_user("ops", is_staff=True)
    writes.import_document(ConfigKind.PROJECT, {**VISION, "members": {"users": ["alice"], "roles": ["osmo-vision"]}},
                           author="tests")
    writes.import_document(ConfigKind.POOL, {"pools": {"vis-pool": {"backend": "default", "platforms": {"p": {}},
                                                                   "resources": {"gpu": {"guarantee": 1}}}}},
                           author="tests")
    config("ROLE", {"name": "osmo-vision"})
    run("user", "add-role", "bob", "osmo-vision")
    settings.OSMO_DEFAULT_PROJECT_OPEN = True
    assert set(Project.objects.visible_to(alice).values_list("name", flat=True)) == {"vision", "default"}
    # osmo-vision grants the pools whose names begin with "vision": none here, but bob holds the member role.
    assert set(Project.objects.visible_to(bob).values_list("name", flat=True)) == {"vision", "default"}
    assert set(Project.objects.visible_to(carol).values_list("name", flat=True)) == {"default"}
    assert Project.objects.visible_to(staff).count() == Project.objects.count()
    settings.OSMO_DEFAULT_PROJECT_OPEN = False
    assert not Project.objects.visible_to(carol).exists()
    assert set(Department.objects.visible_to(alice).values_list("name", flat=True)) == {"research"}
    # A pool role (osmo-vis grants pools beginning with "vis") makes its holder a member of the pool's project.
    config("ROLE", {"name": "osmo-vis"})
    run("user", "add-role", "carol", "osmo-vis")
    assert set(Project.objects.visible_to(carol).values_list("name", flat=True)) == {"vis-pool"}
