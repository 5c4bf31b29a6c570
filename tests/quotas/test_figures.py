"""The quota table: allocated from the inventory's pods, capacity from Ready schedulable nodes, fair share
through the pure computation, rows limited to a researcher's projects."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pools.config import writes
from pools.models import Backend, ConfigKind, Pod, Pool, Project
from pools.quotas.fairshare import Resource
from pools.quotas.figures import quota_tables
from tests.support.fleet import make_nodes

GPU = Resource.GPU


def project(name, department, gpu=None, namespace=None):
    resources = [{"node_pool": "training", "gpu": gpu}] if gpu else []
    return {"name": name, "department": department, "namespace": namespace or f"proj-{name}", "resources": resources}


def pods(namespace, node, gpus, count=1, pool=""):
    """Pod rows as the sync writes them, written directly (each figure's allocation in one line); allocation from
    the stand-in's pods through the sync is tests/test_figures_journey.py's."""
    backend = Backend.objects.get(name="default")
    Pod.objects.bulk_create(Pod(backend=backend, uid=f"{namespace}-{node}-{pool}-{i}", namespace=namespace,
                                name=f"p{i}", node_name=node, phase="Running", gpu=gpus, pool=pool)
                            for i in range(count))


@pytest.fixture
def training(defaults):
    writes.import_document(ConfigKind.POOL, {"pools": {
        "training": {"backend": "default", "platforms": {"h100": {}}},
        "inference": {"backend": "default", "platforms": {"h100": {}}}}}, author="tests")
    writes.import_document(ConfigKind.DEPARTMENT, [{"name": "research"}, {"name": "product"}], author="tests")
    # 20 GPUs usable: two of the four nodes are not Ready (make_nodes marks every fourth one), one is cordoned.
    make_nodes(3, ["training"], prefix="t", start=1)
    make_nodes(1, ["training"], prefix="t", start=0)
    make_nodes(1, ["training"], prefix="c", start=5, unschedulable=True)
    return Pool.objects.get(name="training")


def figures_of(table, unit):
    return next(row.figures[GPU] for row in table.rows if (row.project or row.department) == unit)


def test_each_project_s_fair_share_covers_what_it_demands_when_capacity_is_idle(training):
    writes.import_document(ConfigKind.DEPARTMENT, {"name": "research", "resources": [
        {"node_pool": "training", "gpu": {"deserved": 6, "limit": 20}}]}, author="tests")
    writes.import_document(ConfigKind.PROJECT, [
        project("a", "research", {"deserved": 0, "over_quota_weight": "Medium"}),
        project("b", "research", {"deserved": 6, "over_quota_weight": "High"}),
        project("c", "research", {"deserved": 0, "over_quota_weight": "Low"})], author="tests")
    for name in ("a", "b", "c"):
        pods(f"proj-{name}", "t-0001", 1, count=1, pool="training")
    (table, _) = quota_tables(list(Pool.objects.filter(name__in=["training", "inference"]).order_by("name").reverse()))
    assert table.pool == "training"
    assert table.capacity[GPU] == 24
    # Each project demands what it holds (1 GPU): nobody wants more, so each fair share is its demand.
    assert [figures_of(table, name)["fair_share"] for name in "abc"] == [1, 1, 1]
    assert figures_of(table, "b")["deserved"] == 6 and figures_of(table, "b")["over_quota_weight"] == "High"
    assert figures_of(table, "a")["over_quota"] == 1 and figures_of(table, "b")["over_quota"] == 0


def test_allocated_counts_a_pod_in_its_labelled_pool_or_in_every_pool_of_its_node(training):
    make_nodes(1, ["training", "inference"], prefix="s", start=1)
    writes.import_document(ConfigKind.PROJECT, project("vision", "research", {"deserved": 8}), author="tests")
    pods("proj-vision", "t-0001", 2, count=3, pool="training")
    pods("proj-vision", "s-0001", 1, count=2)
    pods("elsewhere", "t-0001", 4)
    training_table, inference_table = quota_tables(
        [Pool.objects.get(name="training"), Pool.objects.get(name="inference")])
    vision = next(row for row in training_table.rows if row.project == "vision")
    assert vision.figures[GPU]["allocated"] == 8 and vision.shared_usage
    assert next(row for row in inference_table.rows if row.project == "vision").figures[GPU]["allocated"] == 2


def test_a_researcher_sees_only_their_projects_with_the_same_fair_share(training):
    writes.import_document(ConfigKind.PROJECT, [project("vision", "research", {"deserved": 8}),
                                                project("nlp", "product", {"deserved": 4})], author="tests")
    pods("proj-vision", "t-0001", 4, count=3, pool="training")
    pods("proj-nlp", "t-0002", 4, count=3, pool="training")
    (everyone,) = quota_tables([training])
    (mine,) = quota_tables([training], projects=[Project.objects.get(name="vision")])
    assert [row.project for row in mine.rows] == ["vision"]
    assert mine.rows[0].figures == next(row for row in everyone.rows if row.project == "vision").figures
    assert {row.department for row in everyone.rows} >= {"research", "product"}


def test_an_over_subscribed_pool_says_by_how_much(training):
    writes.import_document(ConfigKind.PROJECT, [project("vision", "research", {"deserved": 20}),
                                                project("nlp", "product", {"deserved": 10})], author="tests")
    (table,) = quota_tables([training])
    assert table.capacity[GPU] == 24
    assert table.over_subscribed_by[GPU] == 30 - 24


def test_the_query_count_does_not_grow_with_pools_or_projects(training):
    def count():
        with CaptureQueriesContext(connection) as queries:
            quota_tables(list(Pool.objects.all()))
        return len(queries)

    writes.import_document(ConfigKind.PROJECT, project("vision", "research", {"deserved": 1}), author="tests")
    before = count()
    writes.import_document(ConfigKind.PROJECT, [project(f"p{i}", "research", {"deserved": 1}) for i in range(20)],
                           author="tests")
    pods("proj-p3", "t-0001", 1, count=5, pool="training")
    assert count() == before
