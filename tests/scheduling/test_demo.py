"""The demo's trickle: submissions from the demo projects, queued or refused with reasons, and the stand-in
for dispatch that completes admitted work after its run time and stops preempted work."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from pools.cluster.simulated import SimulatedCluster
from pools.config.defaults import init_demo
from pools.fleet.sync import BackendSync
from pools.models import Backend
from scheduling import demo
from scheduling.cycle import run_cycle
from scheduling.models import Status, Workload

pytestmark = pytest.mark.django_db
SIMULATED_AT = 1_790_000_000.0  # 2026-09-21, any fixed moment


@pytest.fixture
def demo_site(django_user_model, tmp_path):
    list(init_demo())
    # As `manage.py demo` does, but with the simulated cluster's clock pinned: its nodes and pods move with the
    # clock, and the reclaim scene must find the same fleet whenever the test runs.
    for backend in Backend.objects.filter(kind=Backend.Kind.SIMULATED):
        BackendSync(backend, SimulatedCluster(backend.name, tmp_path, clock=lambda: SIMULATED_AT)).run(seconds=0)
    return django_user_model.objects.create_superuser("admin", password="pw-admin-123")


def test_a_round_submits_from_the_demo_projects_and_the_cycle_admits_some(demo_site):
    result = demo.trickle(random.Random(7), count=12)
    assert len(result.submitted) + len(result.refused) >= 12  # and the reclaim scene's borrowers
    assert len(result.submitted) >= 6, result.refused
    projects = set(Workload.objects.values_list("project__name", flat=True))
    assert "default" not in projects and len(projects) >= 2
    run_cycle()
    statuses = set(Workload.objects.values_list("status", flat=True))
    assert Status.ADMITTED in statuses


def test_it_completes_admitted_work_after_its_run_time_and_stops_preempted_work(demo_site):
    demo.trickle(random.Random(7), count=12)
    run_cycle()
    admitted = list(Workload.objects.filter(status=Status.ADMITTED))
    assert admitted, list(Workload.objects.values_list("status", "reasons"))
    first = admitted[0]
    early = first.admitted_at + timedelta(seconds=demo.run_seconds(first.name) - 1)
    demo.finish(early, demo.Round())
    assert Workload.objects.get(pk=first.pk).status == Status.ADMITTED

    still = list(Workload.objects.filter(status=Status.ADMITTED).exclude(pk=first.pk).values_list("pk", flat=True))
    assert still, "needs a second admitted workload"
    still.insert(0, first.pk)
    Workload.objects.filter(pk=still[-1]).update(status=Status.PREEMPTING)
    result = demo.Round()
    demo.finish(timezone.now() + timedelta(minutes=6), result)  # past every run time
    assert result.finished == len(still) - 1 and result.stopped == 1
    first.refresh_from_db()
    assert first.status == Status.COMPLETED and first.finished_at is not None
    assert first.events.last().reason == "DEMO_FINISHED"
    assert Workload.objects.get(pk=still[-1]).status == Status.FAILED_PREEMPTED
    assert not Workload.objects.filter(status=Status.ADMITTED).exists()


def test_it_stops_submitting_while_the_queue_is_long(demo_site, monkeypatch):
    monkeypatch.setattr(demo, "MAX_PENDING", 2)
    demo.trickle(random.Random(1), count=5)
    pending = Workload.objects.filter(status=Status.PENDING).count()
    assert pending >= 2
    assert demo.trickle(random.Random(2), count=5).submitted == []


def test_ten_minutes_of_the_demo_show_pending_borrowing_and_reclaimed_work(demo_site):
    """The trickle's reclaim scene: one project's low-priority work takes every free GPU of a pool, then a
    project of another department asks within its quota, and a borrower is preempted for it."""
    from scheduling.models import WorkloadEvent

    rng, now = random.Random(12), timezone.now()
    for _ in range(40):  # 40 rounds of 15 s, with a cycle after each, as beat runs them
        Backend.objects.update(last_sync_at=now)  # the simulated cluster keeps syncing
        demo.trickle(rng, now=now)
        run_cycle(now)
        now += timedelta(seconds=15)
    reasons = {reason["code"] for reasons in Workload.objects.filter(status=Status.PENDING).values_list(
        "reasons", flat=True) for reason in reasons}
    assert reasons & {"QUOTA", "LIMIT", "CAPACITY", "RECLAIMING"}, reasons
    assert Workload.objects.filter(priority="low", admitted_at__isnull=False).exists()  # borrowing
    assert WorkloadEvent.objects.filter(reason="RECLAIM").exists()  # reclaimed
    assert Workload.objects.filter(status=Status.FAILED_PREEMPTED).exists()
    assert Workload.objects.filter(status=Status.COMPLETED).exists()
