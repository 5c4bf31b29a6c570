"""Submissions, cancels and stops leave one audit row each, with who and from where; a refused submission or a
dry run leaves none."""

import pytest

from pools.models import AuditEvent
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from scheduling.run.stopping import stop
from tests.scheduling.conftest import body

pytestmark = pytest.mark.django_db


def audit_rows(action: str) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(kind="workload", action=action).order_by("id"))


def test_submit_cancel_and_stop_leave_a_row_each_and_refusals_none(researcher_api, kube):
    assert researcher_api.post("/api/workloads/?dry_run=1", body(), format="json").status_code == 200
    assert researcher_api.post("/api/workloads/", body(resources={"gpu": 64}), format="json").status_code == 400
    assert not audit_rows("submit")

    created = researcher_api.post("/api/workloads/", body(), format="json", REMOTE_ADDR="198.51.100.4").json()
    [submitted] = audit_rows("submit")
    assert (submitted.object, submitted.actor, submitted.address) == (f"workload/{created['id']}", "researcher",
                                                                      "198.51.100.4")
    assert "train-resnet in project vision via api" in submitted.summary

    run_cycle()
    assert dispatch(created["id"], clusters=lambda backend: kube) == "created"  # its Job on the stand-in
    assert researcher_api.post(f"/api/workloads/{created['id']}/cancel/").status_code in (200, 202)
    [canceled] = audit_rows("cancel")
    assert canceled.actor == "researcher" and canceled.object == f"workload/{created['id']}"
    assert researcher_api.post(f"/api/workloads/{created['id']}/cancel/").status_code in (200, 202, 409)
    assert len(audit_rows("cancel")) == 1  # already stopping: nothing happened, nothing recorded

    assert stop(created["id"], clusters=lambda backend: kube) == "stopped"
    [stopped] = audit_rows("stop")
    assert stopped.actor_kind == "system" and "CANCELED" in stopped.summary
