"""A known usage history (issue 27), built through the real observer from crafted sync pictures, for the usage
tests and the browser test of /usage/: `known_history`, and the `history` fixture that builds it (a plugin of the
whole suite, tests/conftest.py's pytest_plugins, so that no test module imports it from another)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from pools.models import Backend, ManagedJob, Node, Pod, Pool, Project
from scheduling.models import Status, Workload, WorkloadEvent
from scheduling.usage import observe, rollup

T0 = datetime(2026, 11, 2, tzinfo=UTC)
H100 = "training-h100-000"
L40S = "shared-s-l40s-platform-000"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def workload(name: str, project: str, user: str, priority: str = "normal", **fields) -> Workload:
    """A workload row as a submission leaves it: its project, submitter and pool as relations (the kept names,
    project_name, department_name and pool_name, are written only when those are deleted). Its times are T0's,
    which no door can date back: tests/usage/test_usage_journey.py builds its state through the doors."""
    return Workload.objects.create(name=name, project=Project.objects.get(name=project),
                                   submitter=get_user_model().objects.get(username=user), submitter_name=user,
                                   priority=priority, request={}, pools=["training"],
                                   pool=Pool.objects.get(name="training"), platform="h100", submitted_at=T0,
                                   **fields)


def picture(backend: Backend, when: datetime, pods: list[Pod], now: datetime | None = None) -> None:
    """The sync's picture at `when` (its Pod rows), observed at `now` (a little later). By hand: a sync writes its
    picture at the moment it runs, and these are dated T0 + minutes."""
    Pod.objects.filter(backend=backend).delete()
    Pod.objects.bulk_create(pods)
    Backend.objects.filter(pk=backend.pk).update(last_sync_at=when)
    backend.refresh_from_db()
    observe.observe(now or when + timedelta(seconds=10))


@pytest.fixture
def history(world):
    return known_history(world)


def known_history(world) -> dict:
    """p1: ours, vision/researcher, 8 GPUs on an H100 node of `training`; p3: ours, nlp/other, 4 preemptible GPUs,
    preempted; p2: not ours (vision's namespace), 2 GPUs on an L40S node of the shared pool.
    0-90 min all seen (p3 last seen at 60: gone at 90, its attempt preempted); 90-200 the sync is silent (an
    observation at 100 + the stale limit closes p1 and p2 at 90); from 200 seen again, p1's node Unknown at 260.
    By hand: p1 8 x (1.5 + 0.5) = 16, p2 2 x (1.5 + 1) = 5, p3 4 x 1 = 4 GPU-hours (4 preempted)."""
    backend = Backend.objects.get(name="default")
    w1 = workload("w1", "vision", "researcher", status=Status.RUNNING)
    w2 = workload("w2", "nlp", "other", priority="low", status=Status.RUNNING)
    w3 = workload("w3", "vision", "researcher", status=Status.RUNNING)
    # By hand, as every row below: the history is dated T0 (the past), which no door dates back; the usage journey
    # (tests/usage/test_usage_journey.py) makes the same kinds of rows through the doors at the test's own time.
    WorkloadEvent.objects.create(workload=w3, at=T0, status=Status.PENDING)
    WorkloadEvent.objects.create(workload=w3, at=at(120), status=Status.ADMITTED)
    ManagedJob.objects.create(backend=backend, namespace="proj-vision", name="j1", workload=str(w1.pk), attempt=1,
                              pods={"p1": {}}, updated_at=T0)
    ManagedJob.objects.create(backend=backend, namespace="proj-nlp", name="j2", workload=str(w2.pk), attempt=1,
                              pods={"p3": {}}, updated_at=T0)
    vision_namespace = Project.objects.get(name="vision").namespace
    p1 = Pod(backend=backend, uid="u1", namespace="proj-vision", name="p1", node_name=H100, phase="Running", gpu=8,
             cpu=16000, memory=64 * 2**30, pool="training")
    p2 = Pod(backend=backend, uid="u2", namespace=vision_namespace, name="p2", node_name=L40S, phase="Running", gpu=2)
    p3 = Pod(backend=backend, uid="u3", namespace="proj-nlp", name="p3", node_name=H100, phase="Running", gpu=4,
             pool="training", preemptible=True)
    ManagedJob.objects.filter(name="j1").update(namespace="proj-vision")
    picture(backend, at(0), [p1, p2, p3])
    picture(backend, at(60), [p1, p2, p3])
    # The follower's answer to p3's preemption, at 60-90 min past T0.
    Workload.objects.filter(pk=w2.pk).update(status=Status.PENDING, attempt=2, attempts=[
        {"attempt": 1, "status": Status.FAILED_PREEMPTED}])
    picture(backend, at(90), [p1, p2])
    observe.observe(at(90) + timedelta(seconds=settings.OSMO_BACKEND_STALE_SECONDS + 60))  # the outage
    picture(backend, at(200), [p1, p2])
    picture(backend, at(230), [p1, p2])
    Node.objects.filter(name=H100).update(status="Unknown")  # the sync's word for a node gone silent, at 260 min
    picture(backend, at(260), [p1, p2])
    rollup.run(now=at(265), since=T0)
    return {"researcher": world["researcher"], "other": world["other"]}


