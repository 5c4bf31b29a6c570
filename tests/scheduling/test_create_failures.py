"""A Job whose pods the API server refuses (the Job controller's FailedCreate Events: a missing PriorityClass, a
quota, a webhook): the refusal is the workload's reason as soon as the sync has read it, and after
OSMO_CREATE_FAILURE_TIMEOUT with no pod the attempt fails FAILED_BACKEND_ERROR with the API server's words. The
real client lists the Events from the stand-in API server; the clock is the sweep's `now`."""

from datetime import timedelta

import pytest
from django.utils import timezone

from pools.cluster.reflector import list_all
from pools.fleet import managed_jobs
from pools.inventory.jobs import CREATE_FAILURE_SELECTOR
from scheduling.models import Status, Workload
from scheduling.run import follow, sweeps
from tests.scheduling.test_lifecycle import admit_and_dispatch, pod
from tests.support.commands import run

pytestmark = pytest.mark.django_db
FORBIDDEN = 'pods "{job}-0-x7k2p" is forbidden: no PriorityClass with name build was found'


def failed_create(standin, workload: Workload, *, at, count: int = 1, job: str | None = None,
                  combined: bool = False) -> str:
    """What the Job controller records when the API server refuses its pod (`combined`: as its event recorder
    writes it once it aggregates similar Events)."""
    job = job or workload.job_name
    message = FORBIDDEN.format(job=job)
    stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    standin.add_event({
        "metadata": {"name": f"{job}.187a3c", "namespace": workload.namespace},
        "involvedObject": {"kind": "Job", "apiVersion": "batch/v1", "namespace": workload.namespace, "name": job},
        "reason": "FailedCreate", "type": "Warning", "count": count,
        "message": f"{'(combined from similar events): ' if combined else ''}Error creating: {message}",
        "firstTimestamp": stamp, "lastTimestamp": stamp, "source": {"component": "job-controller"}})
    return message


def synced(kube, workload: Workload, now) -> Workload:
    """The sync's lists (Jobs, pods and FailedCreate Events), then the follower at `now`."""
    events = list_all(lambda **kw: kube.list_events(CREATE_FAILURE_SELECTOR, **kw)).items
    jobs = list_all(lambda **kw: kube.list_jobs(managed_jobs.selector(), **kw)).items
    managed_jobs.reconcile(workload.pool.backend, jobs, list_all(kube.list_pods).items, events=events)
    follow.observe(now=now)
    return Workload.objects.select_related("pool").get(pk=workload.pk)


def test_the_api_servers_refusal_is_the_reason_at_once_in_the_api_describe_and_the_page(
        standin, kube, researcher_api, client, world):
    workload = admit_and_dispatch(researcher_api, kube)
    now = timezone.now()
    message = failed_create(standin, workload, at=now)

    workload = synced(kube, workload, now)

    assert workload.status == Status.SCHEDULING
    (reason,) = researcher_api.get(f"/api/workloads/{workload.pk}/").json()["reasons"]
    assert reason["code"] == "CREATE_FAILED" and message in reason["message"]
    assert "no PriorityClass with name build was found" in run("workload", "describe", str(workload.pk))
    client.force_login(world["researcher"])
    assert "no PriorityClass with name build was found" in client.get(f"/workloads/{workload.pk}/").content.decode()


def test_after_the_limit_with_no_pod_the_attempt_fails_backend_error_with_that_message(
        standin, kube, researcher_api, settings):
    settings.OSMO_CREATE_FAILURE_TIMEOUT = 300
    workload = admit_and_dispatch(researcher_api, kube)
    start = timezone.now()
    message = failed_create(standin, workload, at=start)
    assert synced(kube, workload, start).status == Status.SCHEDULING
    failed_create(standin, workload, at=start + timedelta(minutes=3), count=4)  # the controller retries

    workload = synced(kube, workload, start + timedelta(minutes=4))
    assert workload.status == Status.SCHEDULING and not workload.stop_status  # counted from the first refusal

    sweeps.sweep(start + timedelta(minutes=6), act=True, clusters=lambda backend: kube)

    workload.refresh_from_db()
    assert workload.status == Status.FAILED_BACKEND_ERROR
    assert message in workload.attempts[-1]["message"] and "5 min" in workload.attempts[-1]["message"]
    (deletion,) = standin.job_deletions  # the Job goes, so that it creates nothing later
    assert deletion.name == workload.attempts[-1]["job"]


def test_the_recorders_combined_prefix_is_not_shown(standin, kube, researcher_api):
    """client-go's event recorder prefixes an aggregated Event's message with "(combined from similar events): "
    (a real control plane showed it, issue 39): the reason shows the server's words only."""
    workload = admit_and_dispatch(researcher_api, kube)
    now = timezone.now()
    message = failed_create(standin, workload, at=now, combined=True)

    (reason,) = researcher_api.get(f"/api/workloads/{synced(kube, workload, now).pk}/").json()["reasons"]

    assert reason["code"] == "CREATE_FAILED" and "combined" not in reason["message"]
    assert f"Error creating: {message}" in reason["message"]


def test_a_refusal_that_ends_with_pods_created_is_forgotten(standin, kube, researcher_api, settings):
    settings.OSMO_CREATE_FAILURE_TIMEOUT = 300
    workload = admit_and_dispatch(researcher_api, kube)
    start = timezone.now()
    failed_create(standin, workload, at=start)
    assert synced(kube, workload, start).reasons[0]["code"] == "CREATE_FAILED"

    pod(standin, workload, 0, "Running")  # the PriorityClass was created: the next try made the pod
    workload = synced(kube, workload, start + timedelta(minutes=10))

    assert workload.status == Status.RUNNING and workload.reasons == []


def test_a_refusal_about_a_job_that_is_not_ours_is_not_stored(standin, kube, researcher_api):
    workload = admit_and_dispatch(researcher_api, kube)
    now = timezone.now()
    failed_create(standin, workload, at=now, job="someone-elses-job")

    workload = synced(kube, workload, now)

    assert workload.reasons == [] or all(r["code"] != "CREATE_FAILED" for r in workload.reasons)
    assert not managed_jobs.ManagedJob.objects.exclude(create_failure={}).exists()


@pytest.mark.parametrize("since", ["not a time", "2026-11-27T10:00:00", ""])
def test_a_failed_create_event_with_a_time_we_cannot_compare_is_a_reason_and_never_fails_the_sweep(since):
    """Anyone who may write Events in the namespace can write one about our Job: a made-up or naive time is no
    deadline (the reason still shows), and a huge message is cut to MESSAGE_MAX when it is read."""
    from datetime import UTC, datetime, timedelta

    from pools.inventory.jobs import MESSAGE_MAX, create_failure_facts
    from scheduling.decisions import lifecycle

    event = {"involvedObject": {"kind": "Job", "name": "wl-x-1", "namespace": "proj-a"}, "reason": "FailedCreate",
             "message": "x" * 100_000, "firstTimestamp": since}
    facts = create_failure_facts(event, seen_at=since)
    assert len(facts["message"]) == MESSAGE_MAX
    current = lifecycle.Current("SCHEDULING", 1, 1, {}, 3, timedelta(seconds=300))
    outcome = lifecycle.observe(current, lifecycle.Run({"active": 0}, {}, create_failure=facts),
                                datetime(2030, 1, 1, tzinfo=UTC))
    assert outcome is not None and outcome.status == "SCHEDULING" and "x" * 50 in outcome.message
