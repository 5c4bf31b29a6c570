"""Every replica's log is kept when its attempt is stopped (issue 44, point 7): on the demo's simulated cluster a
2-replica workload runs, is canceled, and both replicas' logs are read afterwards from the archive; the pods of an
Indexed Job say which replica they are, as the Job controller marks them."""

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from scheduling.models import LogArchive, Status, Workload
from scheduling.run.cycle import run_cycle
from tests.support.simulated import SIMULATED_NOW

pytestmark = pytest.mark.django_db


def test_a_canceled_two_replica_workload_keeps_both_replicas_logs(simulated, django_user_model):
    api = APIClient()
    api.force_authenticate(django_user_model.objects.get(username="alice"))
    answer = api.post("/api/workloads/", {"name": "pair", "project": "llm-research", "pools": ["dev"],
                                          "image": "busybox", "command": ["sh", "-c", "sleep 600"], "replicas": 2,
                                          "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}}, format="json")
    assert answer.status_code == 201, answer.json()
    workload = Workload.objects.get(pk=answer.json()["id"])
    now = SIMULATED_NOW
    for _ in range(4):
        run_cycle(now)
        simulated.step(15, now)
        now += timedelta(seconds=15)
        workload.refresh_from_db()
        if workload.status == Status.RUNNING:
            break
    assert workload.status == Status.RUNNING
    indexes = sorted(api.get(f"/api/workloads/{workload.pk}/").json()["replica_pods"], key=lambda p: p["replica"])
    assert [(p["replica"], p["log"]) for p in indexes] == [(0, "live"), (1, "live")]

    assert api.post(f"/api/workloads/{workload.pk}/cancel/").status_code in (200, 202)
    simulated.step(15, now)  # the stop: logs read, then the Job deleted
    workload.refresh_from_db()
    assert workload.status == Status.FAILED_CANCELED
    assert sorted(LogArchive.objects.filter(workload=workload).values_list("replica", "state")) == [
        (0, "KEPT"), (1, "KEPT")]
    for replica in (0, 1):
        log = api.get(f"/api/workloads/{workload.pk}/logs?replica={replica}")
        assert log.status_code == 200 and log["X-Log-Source"] == "archive" and log.content, (replica, log.content)
