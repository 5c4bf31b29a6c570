"""The submission's reads written as SQL (scheduling/submit/reads.py) answer what the ORM queries they replaced
answered: the project a user may see (`Project.objects.visible_to`, every way of membership, both settings of
OSMO_DEFAULT_PROJECT_OPEN), its live counts, the node shapes and the quota rows."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db.models import Min, Q

from pools.fleet.labels import gpu_type_key
from pools.models import NodeMembership, Pool, Project, Quota
from pools.models.visibility import Access
from scheduling.models import ALIVE, Workload
from scheduling.submit import reads
from tests.scheduling.conftest import SHARED, add_nodes, body, project
from tests.support.commands import run

pytestmark = pytest.mark.django_db

NAMES = ["default", "vision", "nlp", "by-role", "own-pool", "ghost"]


@pytest.fixture
def people(world, django_user_model):
    project("by-role", roles=["osmo-shared"])
    project("own-pool")
    # By hand: a pool's own project is made by the pool's configuration (tests/scheduling/test_deletes.py makes one),
    # which would re-derive the world's add_nodes rows; here an existing project is made training's own.
    Project.objects.filter(name="own-pool").update(pool=Pool.objects.get(name="training"))
    outsider = django_user_model.objects.create_user("outsider")
    shared_only = django_user_model.objects.create_user("shared-only")
    run("user", "add-role", "shared-only", "osmo-shared")
    staff = django_user_model.objects.create_user("boss", is_staff=True)
    return {**world, "outsider": outsider, "shared-only": shared_only, "staff": staff, "anonymous": AnonymousUser()}


@pytest.mark.parametrize("default_open", [True, False])
def test_the_project_read_sees_what_visible_to_sees(people, settings, default_open):
    settings.OSMO_DEFAULT_PROJECT_OPEN = default_open
    seen = {}
    for who, user in people.items():
        for name in NAMES:
            expected = Project.objects.visible_to(user).filter(name=name).exists()
            found = reads.project(Access(user), name)
            assert (found is not None) == expected, (who, name, default_open)
            seen[who, name] = expected
            if found is not None:
                stored = Project.objects.select_related("department").get(name=name)
                assert (found.pk, found.name, found.department.name, found.default_node_pools, found.limits,
                        found.department.default_node_pools, found.namespace) == (
                    stored.pk, stored.name, stored.department.name, stored.default_node_pools, stored.limits,
                    stored.department.default_node_pools, stored.namespace)
    # Every way in and out was tried: by name, by role, through a pool, the default project, staff, no one.
    assert seen["researcher", "vision"] and seen["shared-only", "by-role"] and seen["other", "own-pool"]
    assert not seen["outsider", "vision"] and not seen["outsider", "own-pool"] and not seen["anonymous", "default"]
    assert seen["outsider", "default"] == default_open and seen["staff", "nlp"]


def test_the_live_counts_are_the_project_s_and_the_caller_s(people, researcher_api):
    for index in range(3):
        assert researcher_api.post("/api/workloads/", body(name=f"mine-{index}"), format="json").status_code == 201
    borrowed = body(name="nlp-1", project="nlp", priority="LOW")
    assert researcher_api.post("/api/workloads/", borrowed, format="json").status_code == 201
    ended = Workload.objects.get(name="mine-0").pk
    assert researcher_api.post(f"/api/workloads/{ended}/cancel/").status_code == 200  # pending: ended at once
    found = reads.project(Access(people["researcher"]), "vision")
    assert (found.live_project, found.live_user) == (
        Workload.objects.filter(project__name="vision", status__in=ALIVE).count(),
        Workload.objects.filter(submitter=people["researcher"], status__in=ALIVE).count()) == (2, 3)
    other = reads.project(Access(people["other"]), "nlp")
    assert (other.live_project, other.live_user) == (1, 0)


def test_node_shapes_and_quota_rows_match_the_orm(people):
    add_nodes("training", "h100", 3, gpus=4, prefix="small")
    pool = Pool.objects.get(name="training")
    expected = sorted(
        (row["platforms"], row["node__cpu_allocatable"], row["node__gpu_allocatable"], row["node__memory_allocatable"],
         row["node__storage_allocatable"], row["node__gpu_product"], row["name"])
        for row in NodeMembership.objects.filter(pool=pool).order_by().values(
            "platforms", "node__cpu_allocatable", "node__gpu_allocatable", "node__memory_allocatable",
            "node__storage_allocatable", "node__gpu_product").annotate(name=Min("node__name")))
    shapes = reads.node_shapes(pool.pk, gpu_type_key())
    assert sorted(shape[:7] for shape in shapes) == expected and len(shapes) == 2
    assert {shape[7] for shape in shapes} == {""}  # no node carries the gpu-type label
    assert [shape[6] for shape in shapes] == sorted(shape[6] for shape in shapes)

    research = Project.objects.get(name="vision").department_id
    for pool_name in ("training", SHARED):
        pool = Pool.objects.get(name=pool_name)
        rows = Quota.objects.filter(pool=pool).filter(Q(department_id=research) | Q(project__department_id=research))
        assert {(q.pk, q.project_id, q.department_id, q.gpu_deserved, q.cpu_deserved, q.memory_deserved)
                for q in rows} == {
            (q.pk, q.project_id, q.department_id, q.gpu_deserved, q.cpu_deserved, q.memory_deserved)
            for q in reads.department_quotas(pool.pk, research)}
    assert {q.gpu_deserved for q in reads.department_quotas(Pool.objects.get(name="training").pk, research)} >= {
        Decimal("4.00")}
