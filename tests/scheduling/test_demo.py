"""The demo's trickle: submissions from the demo projects, queued or refused with reasons; and work from each
door (the API, OSMO's workflow path, gpuctl's job file) dispatched to the simulated cluster, followed to RUNNING
and COMPLETED."""

import random
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from pools.cluster.simulated import SimulatedCluster
from pools.config import writes
from pools.config.defaults import init_demo
from pools.fleet.sync import BackendSync
from pools.models import AuditEvent, Backend, ConfigKind, ProjectMember
from pools.quotas.writes import project_docs
from scheduling import demo
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from tests.support.simulated import SIMULATED_AT, SIMULATED_NOW, SimulatedTime

pytestmark = pytest.mark.django_db


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



def test_the_trickle_submits_as_the_demo_researchers_and_leaves_new_projects_alone(demo_site):
    """Each submission is by a user member of its project (accounts the trickle makes, with no password), never
    by the admin an operator signs in with; a project created after the demo, with a quota in a demo pool, gets
    none of its work."""
    document = project_docs(["serving"])["serving"]
    document.update(name="vision", description="made by an admin after the demo", namespace="proj-vision",
                    members={"users": [], "roles": []}, default_node_pools=["training"],
                    resources=[{"node_pool": "training", "gpu": {"deserved": 0, "limit": -1,
                                                                 "over_quota_weight": "Medium"}}])
    writes.import_document(ConfigKind.PROJECT, {"vision": document}, author="admin")
    rng = random.Random(3)
    for _ in range(4):
        demo.trickle(rng, count=6)
    workloads = list(Workload.objects.select_related("project", "submitter"))
    assert len(workloads) >= 12
    members = set(ProjectMember.objects.filter(kind=ProjectMember.Kind.USER).values_list("project__name", "name"))
    assert {(w.project.name, w.submitter.username) for w in workloads} <= members
    submitters = {w.submitter for w in workloads}
    assert not any(user.is_staff or user.is_superuser or user.has_usable_password() for user in submitters)
    assert "vision" not in {w.project.name for w in workloads}
    assert not AuditEvent.objects.filter(actor="admin", action="submit").exists()
    assert AuditEvent.objects.filter(action="submit").exclude(
        actor__in=[name for _, name in members]).count() == 0

OSMO_WORKFLOW = """
workflow:
  name: demo-osmo
  resources:
    default: {cpu: 2, gpu: 1, memory: 8Gi}
  groups:
  - name: train
    tasks:
    - name: worker-0
      lead: true
      image: nvcr.io/nvidia/pytorch:24.05-py3
      command: [python, train.py]
"""
GPUCTL_JOB = """
kind: training
job: {name: demo-gpuctl, priority: medium}
environment: {image: nvcr.io/nvidia/pytorch:24.05-py3, command: [python, train.py]}
resources: {gpu: 1, cpu: 2, memory: 8Gi}
"""


def test_work_from_each_door_runs_on_the_simulated_cluster_and_completes(demo_site, tmp_path, client):
    from rest_framework.test import APIClient

    from pools.models import Project

    project = Project.objects.exclude(name=Project.DEFAULT_NAME).order_by("name").first()
    pool = project.default_node_pools[0] if project.default_node_pools else "default"
    api = APIClient()
    api.force_authenticate(demo_site)
    answer = api.post("/api/workloads/", {"name": "demo-api", "project": project.name, "pools": [pool],
                                          "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                                          "resources": {"gpu": 1, "cpu": "2", "memory": "8Gi"}}, format="json")
    assert answer.status_code == 201, answer.content
    assert api.patch("/api/profile/", {"default_project": project.name}, format="json").status_code == 200
    answer = api.post(f"/api/pool/{pool}/workflow", {"file": OSMO_WORKFLOW}, format="json")
    assert answer.status_code == 200, answer.content
    job_file = tmp_path / "job.yaml"
    job_file.write_text(GPUCTL_JOB.replace("resources: {", f"resources: {{pool: {pool}, "))
    call_command("create", "-f", str(job_file), "--as-user", "admin", stdout=StringIO())
    doors = {w.source: w for w in Workload.objects.all()}
    assert set(doors) == {"api", "osmo", "gpuctl"}

    simulated, now = SimulatedTime(tmp_path / "sim"), SIMULATED_NOW
    run_cycle(now)
    seen: dict[str, list[str]] = {source: [] for source in doors}
    # At most 16 steps of 60 s: past every simulated run time (one to ten minutes). The steps stop once all three
    # have completed: the steps after it would only show them completed again.
    for _ in range(16):
        run_cycle(now)  # as beat runs them: an attempt whose planned node the simulation cordons is admitted again
        simulated.step(60, now)
        now += timedelta(seconds=60)
        for source, workload in doors.items():
            workload.refresh_from_db()
            if not seen[source] or seen[source][-1] != workload.status:
                seen[source].append(workload.status)
        if all(path[-1] == Status.COMPLETED for path in seen.values()):
            break
    for source, path in seen.items():
        assert "RUNNING" in path and path[-1] == Status.COMPLETED, (source, path)
        workload = doors[source]
        assert workload.started_at and workload.finished_at and workload.exit_code == 0
    client.force_login(demo_site)
    page = client.get(f"/workloads/{doors['osmo'].pk}/", HTTP_HX_REQUEST="true",
                      HTTP_HX_TARGET="workload-live").content.decode()
    assert ">COMPLETED</span>" in page and "workload-pods" in page


def test_it_stops_submitting_while_the_queue_is_long(demo_site, monkeypatch):
    monkeypatch.setattr(demo, "MAX_PENDING", 2)
    demo.trickle(random.Random(1), count=5)
    pending = Workload.objects.filter(status=Status.PENDING).count()
    assert pending >= 2
    assert demo.trickle(random.Random(2), count=5).submitted == []


def shown() -> dict[str, bool]:
    """What the demo is there to show, each true once the database holds it."""
    reasons = {reason["code"] for reasons in Workload.objects.filter(status=Status.PENDING).values_list(
        "reasons", flat=True) for reason in reasons}
    return {
        "pending work with a reason": bool(reasons & {"QUOTA", "LIMIT", "CAPACITY", "RECLAIMING"}),
        "borrowing": Workload.objects.filter(priority="low", admitted_at__isnull=False).exists(),
        # The scene's claim came once its borrowers were placed. Whether it needs their GPUs back depends on how
        # many the simulated fleet's own pods freed meanwhile (reclaim itself: test_lifecycle, test_admission).
        "the claim admitted": Workload.objects.filter(name="claim-00", status__in=[
            Status.ADMITTED, Status.SCHEDULING, Status.RUNNING, Status.COMPLETED]).exists(),
        "running": Workload.objects.filter(status=Status.RUNNING).exists(),
        "completed": Workload.objects.filter(status=Status.COMPLETED).exists(),
    }


def test_within_ten_minutes_the_demo_shows_pending_borrowing_running_and_completed_work(demo_site, tmp_path):
    """The trickle with dispatch: pending work with reasons, borrowing, the reclaim scene's claim, and Jobs that run
    and complete on the simulated cluster, each within the first ten simulated minutes (40 rounds of 15 s, with a
    cycle after each, as beat runs them). The rounds stop once all of it is shown (the 8th, with this seed): the
    rounds after it showed the same again and took four fifths of the test's time."""
    rng, now, simulated = random.Random(12), SIMULATED_NOW, SimulatedTime(tmp_path)
    for _ in range(40):
        demo.trickle(rng, now=now)
        run_cycle(now)
        simulated.step(15, now)
        now += timedelta(seconds=15)
        facts = shown()
        if all(facts.values()):
            break
    assert all(facts.values()), facts


def test_the_demo_has_a_kai_backend_with_a_topology_pool_quotas_and_work(demo_site, tmp_path):
    """`manage.py demo` adds the simulated KAI backend kai-cluster (the "kai" lab fleet: zones and racks), its
    pool kai-training with topology keys, quotas there for the demo's departments and projects, and the trickle
    sends it gangs, which dispatch hands to KAI."""
    from pools.cluster.kinds import KAI_PODGROUP, KAI_QUEUE
    from pools.management.commands.demo import KAI_BACKEND, KAI_POOL, KAI_QUOTAS, init_kai_demo
    from pools.models import Node, Pool, Quota
    from pools.schedulers import reconcile

    assert [result.kind for result in init_kai_demo()] == ["POOL", "DEPARTMENT", "PROJECT"]
    assert init_kai_demo() == []  # rerun: everything is there
    backend = Backend.objects.get(name=KAI_BACKEND)
    assert (backend.kind, backend.scheduler) == (Backend.Kind.SIMULATED, Backend.Scheduler.KAI)
    pool = Pool.objects.get(name=KAI_POOL)
    assert pool.backend == backend
    assert [key["label"] for key in pool.topology_keys] == ["topology.kubernetes.io/zone",
                                                            "topology.kubernetes.io/rack"]
    rows = {(row.department or row.project).name: (int(row.gpu_deserved), int(row.gpu_limit))
            for row in Quota.objects.filter(pool=pool).select_related("department", "project")}
    assert rows == {name: figures[:2] for kind in KAI_QUOTAS.values() for name, figures in kind.items()}

    simulated = SimulatedTime(tmp_path / "sim")
    BackendSync(backend, simulated.cluster(backend)).run(seconds=0)
    assert Node.objects.filter(backend=backend).count() == 14
    assert Node.objects.filter(backend=backend, memberships__pool=pool).count() == 12
    done = reconcile.run(backend, simulated.cluster(backend))
    assert done is not None and done.counts["Topology"] == 1 and done.counts["Queue"] >= 7

    rng, now = random.Random(5), timezone.now()
    for _ in range(6):
        demo.submit_kai(rng, demo.Round(), 2)
    sent = Workload.objects.filter(pools=[KAI_POOL])
    assert sent.count() >= 6 and sent.exclude(topology=[]).exists()
    run_cycle(now)
    simulated.step(15, now)
    cluster = simulated.cluster(backend)
    groups = cluster.list_objects(KAI_PODGROUP).items
    assert groups, list(sent.values_list("status", "reasons"))
    placed = [job for job in cluster.list_jobs("").items if job["status"].get("ready") or job["status"].get(
        "succeeded")]
    waiting = [g for g in groups if (g.get("status") or {}).get("schedulingConditions")]
    assert placed or waiting
    for _ in range(4):
        now += timedelta(seconds=15)
        simulated.step(15, now)
    assert sent.filter(status=Status.RUNNING).exists(), list(sent.values_list("status", flat=True))
    assert any((q.get("status") or {}).get("requested", {}).get("gpu") for q in cluster.list_objects(KAI_QUEUE).items)


def test_get_jobs_counts_the_ready_pods_of_running_jobs_on_the_simulated_cluster(demo_site, tmp_path):
    """Issue 24, point 5: READY is kubectl's (Running pods whose containers are ready) over replicas: 0/N while the
    pods are created, N/N once the simulated cluster runs them."""
    import json

    from pools.inventory.jobs import pod_run_facts
    from scheduling.submit import submission
    from tests.support.commands import run

    data = {"name": "ready-gang", "project": "perception", "pools": ["training"], "priority": "low", "replicas": 2,
            "image": "nvcr.io/nvidia/pytorch:24.05-py3", "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}}
    workload = submission.submit(demo_site, data, source="api").workload
    simulated, now = SimulatedTime(tmp_path / "sim"), SIMULATED_NOW
    readiness = []
    run_cycle(now)
    for seconds in (0, 5, 5):  # dispatched and synced at once (pods created), then one tick on (running)
        simulated.step(seconds, now)
        now += timedelta(seconds=seconds)
        (row,) = [r for r in json.loads(run("get", "jobs", "--format", "json")) if r["name"] == "ready-gang"]
        readiness.append(row["ready"])
    workload.refresh_from_db()
    assert workload.status == Status.RUNNING, workload.reasons
    assert readiness[0] == "0/2" and readiness[-1] == "2/2", readiness
    line = next(line for line in run("get", "jobs").splitlines() if "ready-gang" in line)
    assert " 2/2 " in line and "Running" in line
    # Running but not ready (a readiness probe failing) is not ready, as kubectl counts it.
    running = {"spec": {"nodeName": "n"}, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "False"}]}}
    assert pod_run_facts(running, seen_at="")["ready"] is False
