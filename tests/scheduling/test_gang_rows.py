"""A group stored as several workload rows (issue 41): the cycle reads each row's gang from its request and admits
the members together or not at all."""

from django.utils import timezone

from pools.models import Project
from scheduling.models import Status, Workload
from scheduling.run import snapshot
from scheduling.run.cycle import run_cycle


def row(name, gang, k=0, gpu=2, workflow="wf-1", group="train"):
    request = {"gpu_type": ""} if gang is None else {"gang": gang, "member": k}
    return Workload.objects.create(
        name=name, workflow=workflow, group=group, project=Project.objects.get(name="vision"), request=request,
        gpu=gpu, replicas=1, pools=["training"], templates={"training": {"platform": "h100"}},
        submitted_at=timezone.now())


def test_pending_reads_the_gang_key_and_size_from_the_row(world):
    lead = row("lead", [["master"], ["worker-0", "worker-1"], ["eval"]])
    alone = row("alone", [["master"]], group="solo")
    plain = row("plain", None)
    queue, _ = snapshot.pending(snapshot.load())
    seen = {w.id: (w.gang, w.gang_size) for w in queue}
    assert seen == {str(lead.id): ("wf-1/train", 3), str(alone.id): ("", 1), str(plain.id): ("", 1)}


def test_a_cycle_admits_a_gang_s_rows_together_and_keeps_a_partial_gang_waiting(world):
    gang = [["master"], ["worker"]]
    lead = row("lead", gang, 0)
    queue_alone = row("other-lead", gang, 0, workflow="wf-2")
    run_cycle()
    lead.refresh_from_db()
    assert lead.status == Status.PENDING and lead.reasons[0]["code"] == "GANG"
    assert "1 of its 2 parts is in the queue" in lead.reasons[0]["message"]
    work = row("work", gang, 1)
    run_cycle()
    admitted = {w.name: w.status for w in Workload.objects.filter(pk__in=[lead.pk, work.pk, queue_alone.pk])}
    assert admitted == {"lead": Status.ADMITTED, "work": Status.ADMITTED, "other-lead": Status.PENDING}
