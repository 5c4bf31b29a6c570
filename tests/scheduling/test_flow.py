"""Whole flows: a submission wakes a real worker's admission cycle and then its dispatch through Redis; seed
002's pool and role accept, refuse and queue; reclaim through the database."""


import pytest
from django.utils import timezone

from pools.config import writes
from pools.models import ConfigKind
from scheduling.models import Status, Workload, WorkloadEvent
from scheduling.run.cycle import run_cycle
from scheduling.submit.submission import submit
from tests.celery_app import broker_at, every_queue
from tests.scheduling.conftest import SHARED, body, seed_pool
from tests.support.commands import run
from tests.waiting import until


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_submission_asks_a_real_worker_for_a_cycle_on_commit(world, researcher_api, settings):
    from celery.contrib.testing.worker import start_worker

    settings.OSMO_ADMISSION_ON_COMMIT = True
    with broker_at(settings.TEST_REDIS_URL) as app, start_worker(app, pool="solo", perform_ping_check=False,
                                                                 queues=every_queue(), shutdown_timeout=10):
        created = researcher_api.post("/api/workloads/", body(), format="json").json()
        until(lambda: Workload.objects.filter(pk=created["id"], status=Status.SCHEDULING).exists(),
              "the worker to admit and dispatch the workload", every=0.2)
    # The cycle admitted it and, once that committed, the dispatch message created its Job.
    workload = Workload.objects.get(pk=created["id"])
    assert workload.status == Status.SCHEDULING and workload.job_name == f"wl-{workload.id.hex[:12]}-1"
    assert list(workload.events.values_list("status", flat=True)) == ["PENDING", "ADMITTED", "SCHEDULING"]


@pytest.mark.django_db
def test_the_seed_pool_as_printed_refuses_naming_default_ctrl_and_queues_once_fixed(world, researcher_api):
    writes.import_document(ConfigKind.POOL, {"pools": {SHARED: seed_pool()}}, author="tests")
    request = body(pools=[SHARED], resources={"gpu": 1})
    refused = researcher_api.post("/api/workloads/", request, format="json")
    assert refused.status_code == 400
    message = refused.json()["candidates"][0]["message"]
    assert message.startswith("Container osmo-ctrl of pod template default_ctrl has no image")
    fixed = {**seed_pool(), "common_pod_template": ["default_user"]}
    writes.import_document(ConfigKind.POOL, {"pools": {SHARED: fixed}}, author="tests")
    created = researcher_api.post("/api/workloads/", request, format="json")
    assert created.status_code == 201
    assert created.json()["pod_templates"][SHARED]["platform"] == "l40s_platform"  # the pool's default platform
    a100 = researcher_api.post("/api/workloads/", body(name="on-a100", pools=[SHARED], platform="a100_platform"),
                               format="json").json()
    tolerations = a100["pod_templates"][SHARED]["pod_template"]["spec"]["tolerations"]
    assert tolerations == [{"key": "nvidia.com/gpu.product", "operator": "Equal", "value": "NVIDIA-A100",
                            "effect": "NoSchedule"}]
    unknown = researcher_api.post("/api/workloads/", body(pools=[SHARED], platform="h100"), format="json")
    assert unknown.json()["candidates"][0]["message"] == (
        f"Platform h100 is not one of pool {SHARED}'s platforms: l40s_platform, a100_platform.")


@pytest.mark.django_db
def test_the_seed_role_is_what_lets_a_user_into_the_seed_pool(world):
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(world["other"])  # holds osmo-training, not osmo-shared
    response = api.post("/api/workloads/", body(project="nlp", pools=[SHARED], priority="low"), format="json")
    assert response.status_code == 403
    run("user", "add-role", "other", "osmo-shared")
    api.force_authenticate(world["other"])
    assert api.post("/api/workloads/", body(project="nlp", pools=[SHARED], priority="low"),
                    format="json").status_code == 201


@pytest.mark.django_db
def test_reclaim_preempts_borrowed_work_and_admits_once_it_is_gone(world):
    researcher = world["researcher"]
    # nlp borrows all 16 training GPUs with low priority (it deserves none).
    for i in range(4):
        submit(researcher, body(name=f"borrow-{i}", project="nlp", priority="low", resources={"gpu": 4}))
    run_cycle()
    assert Workload.objects.filter(status=Status.ADMITTED).count() == 4
    # vision deserves 4 and asks for them: nlp's newest borrower is preempted, nothing more.
    guaranteed = submit(researcher, body(name="guaranteed", resources={"gpu": 4})).workload
    result = run_cycle()
    assert [item["name"] for item in result.preempted] == ["borrow-3"]
    guaranteed.refresh_from_db()
    assert guaranteed.status == Status.PENDING and guaranteed.reasons[0]["code"] == "RECLAIMING"
    assert run_cycle().preempted == []  # it waits for the one already preempted
    event = WorkloadEvent.objects.get(workload__name="borrow-3", status=Status.PREEMPTING)
    assert "reclaims capacity it is guaranteed" in event.message
    # The dispatch issue stops preempted work; here it is marked gone by hand.
    Workload.objects.filter(name="borrow-3").update(status=Status.FAILED_PREEMPTED, finished_at=timezone.now())
    assert [item["name"] for item in run_cycle().admitted] == ["guaranteed"]


def waiting_for_a_lock(pids: list[int]) -> bool:
    """Whether the PostgreSQL session `pids[0]` (once a thread has put it there) waits for a lock."""
    from django.db import connection

    if not pids:
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", [pids[0]])
        row = cursor.fetchone()
    return bool(row and row[0])


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_a_cycle_waits_for_it_and_is_not_overwritten(world):
    """The cycle holds the pending rows it decides about; a cancel of one of them waits and then wins."""
    import threading

    from django.db import connection, transaction

    from scheduling.run import snapshot
    from scheduling.submit.submission import cancel

    workload = submit(world["researcher"], body()).workload
    loaded = threading.Event()
    finish = threading.Event()
    original = snapshot.pending

    def slow_pending(state):
        result = original(state)
        loaded.set()
        finish.wait(120)  # set by the test; the ceiling only turns a hang into a failure
        return result

    snapshot.pending = slow_pending
    try:
        cycle = threading.Thread(target=lambda: (run_cycle(), connection.close()))
        cycle.start()
        assert loaded.wait(120)
        canceled = []
        canceler_pid = []

        def cancel_it():
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                canceler_pid.append(cursor.fetchone()[0])
            canceled.append(cancel(world["researcher"], workload))
            connection.close()

        canceler = threading.Thread(target=cancel_it)
        canceler.start()
        until(lambda: waiting_for_a_lock(canceler_pid), "the cancel to wait for the cycle's lock")
        assert canceler.is_alive()
        finish.set()
        cycle.join(120)
        canceler.join(120)
        assert not cycle.is_alive() and not canceler.is_alive()
    finally:
        snapshot.pending = original
    workload.refresh_from_db()
    assert canceled == [True]
    assert workload.status == Status.FAILED_CANCELED
    with transaction.atomic():
        statuses = list(workload.events.order_by("at", "id").values_list("status", flat=True))
    assert statuses == ["PENDING", "ADMITTED", "FAILED_CANCELED"]
