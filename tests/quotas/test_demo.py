"""The demo's departments and projects against the simulated cluster: their namespaces are those of its GPU
workload pods, so once synced the quota table shows a project borrowing above its quota, projects within
theirs and an over-subscribed pool."""

from pathlib import Path

import pytest

from pools.cluster.simulated import SimulatedCluster
from pools.config.defaults import init_demo
from pools.fleet.sync import BackendSync
from pools.models import Backend, Pod, Pool, Project
from pools.quotas.fairshare import Resource
from pools.quotas.figures import quota_tables

pytestmark = pytest.mark.django_db
GPU = Resource.GPU
DEMO_PROJECTS = {"llm-research", "perception", "robotics", "serving", "isaac-sim"}


def synced_demo(tmp_path: Path, now: float):
    """init_demo, then one full list of the simulated cluster as it is at `now` (its pods follow the clock)."""
    init_demo(author="tests")
    backend = Backend.objects.get(name="default")
    cluster = SimulatedCluster("default", tmp_path, clock=lambda: now, sleep=lambda seconds: None)
    BackendSync(backend, cluster).run(seconds=0)
    pools = list(Pool.objects.filter(name__in=["training", "simulation", "inference", "dev"]).order_by("name"))
    return {table.pool: table for table in quota_tables(pools)}


def gpu(table, project):
    return next(row.figures[GPU] for row in table.rows if row.project == project)


@pytest.mark.parametrize("now", [1_760_000_000.0, 1_760_000_000.0 + 86_400 * 9 + 3_600 * 7])
def test_the_demo_shows_borrowing_guaranteed_and_over_subscribed_cases(tmp_path, now):
    tables = synced_demo(tmp_path, now)

    perception = gpu(tables["training"], "perception")
    assert perception["allocated"] > perception["deserved"] and perception["over_quota"] > 0  # borrowing
    for pool, project in (("training", "robotics"), ("inference", "serving"), ("simulation", "isaac-sim")):
        figures = gpu(tables[pool], project)
        assert 0 < figures["allocated"] <= figures["deserved"] and figures["over_quota"] == 0, (pool, project)
    assert tables["simulation"].over_subscribed_by[GPU] > 0
    assert tables["training"].over_subscribed_by[GPU] == 0


def test_every_demo_project_s_namespace_runs_gpu_work_in_the_simulated_cluster(tmp_path):
    synced_demo(tmp_path, 1_760_000_000.0)
    namespaces = dict(Project.objects.filter(name__in=DEMO_PROJECTS).values_list("name", "namespace"))
    assert set(namespaces) == DEMO_PROJECTS
    busy = set(Pod.objects.filter(gpu__gt=0, component="").values_list("namespace", flat=True))
    assert set(namespaces.values()) <= busy


def test_loading_the_demo_twice_changes_nothing(tmp_path):
    init_demo(author="tests")
    assert all(not result.changed for result in init_demo(author="tests"))
