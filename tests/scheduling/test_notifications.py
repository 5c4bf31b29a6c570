"""Notifications (issue 26 point 5), through real parts: the stand-in API server moves workloads (the test plays
the kubelet), a real HTTP server receives the webhooks, a real process sends and is killed mid-send, Django's
locmem backend takes the mail, and an injected clock makes a workload stuck pending."""

import os
import signal
import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from pools.management.workers import worker_commands
from scheduling.models import Notification, NotificationPreference, Status, Workload
from scheduling.run import notify, stopping
from scheduling.submit import submission
from tests.celery_app import broker_at
from tests.scheduling.conftest import post_workload
from tests.support.children import child_env
from tests.support.clock import Clock
from tests.support.lifecycle import admit_and_dispatch, job_status, observe, pod
from tests.support.webhooks import Receiver
from tests.waiting import until

SEND_THEN_BE_KILLED = r"""
import sys

import django

django.setup()
from scheduling.run import notify

print("returned", notify.deliver(sys.argv[1]), flush=True)
"""


@pytest.fixture
def receiver(settings):
    server = Receiver()
    settings.OSMO_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    yield server
    server.close()


def choose(user, **fields) -> NotificationPreference:
    """`user`'s own choice, through PUT /api/profile/notifications/ as them."""
    client = APIClient()
    client.force_authenticate(user)
    answer = client.put("/api/profile/notifications/", fields, format="json")
    assert answer.status_code == 200, answer.json()
    return NotificationPreference.objects.get(user=user)


def run_to(standin, kube, api, end: str, name: str) -> Workload:
    """A workload admitted, dispatched, RUNNING, then ended as `end`: completed, failed (exit 3) or preempted."""
    workload = admit_and_dispatch(api, kube, name=name)
    pod(standin, workload, 0, "Running")
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING
    if end == "completed":
        pod(standin, workload, 0, "Succeeded", exit_code=0)
        job_status(standin, workload, "Complete", "CompletionsReached")
        workload = observe(kube, workload)
    elif end == "failed":
        pod(standin, workload, 0, "Failed", exit_code=3)
        job_status(standin, workload, "Failed", "BackoffLimitExceeded", "backoff limit")
        workload = observe(kube, workload)
    else:  # as the admission cycle marks a workload it reclaims from, then the stop it sends
        Workload.objects.filter(pk=workload.pk).update(status=Status.PREEMPTING)
        assert stopping.stop(workload.pk, clusters=lambda backend: kube) == "stopped"
        workload.refresh_from_db()
    return workload


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_webhook_gets_one_notification_per_chosen_transition_even_when_a_sender_is_killed_mid_send(
        world, researcher_api, standin, kube, receiver):
    researcher = world["researcher"]
    choose(researcher, transitions=["started", "failed", "preempted"], webhook_url=receiver.url)
    completed = run_to(standin, kube, researcher_api, "completed", "done-ok")
    failed = run_to(standin, kube, researcher_api, "failed", "done-bad")
    preempted = run_to(standin, kube, researcher_api, "preempted", "reclaimed")
    assert (completed.status, failed.status, preempted.status) == (Status.COMPLETED, Status.FAILED, Status.PENDING)
    canceled = post_workload(researcher_api, name="never-mind")
    submission.cancel(researcher, Workload.objects.get(pk=canceled["id"]))

    rows = {(str(n.workload_id), n.transition): n for n in Notification.objects.all()}
    expected = {(str(completed.pk), "started"), (str(failed.pk), "started"), (str(failed.pk), "failed"),
                (str(preempted.pk), "started"), (str(preempted.pk), "preempted")}
    assert set(rows) == expected  # not "completed" (not chosen), nothing for the cancel
    assert {n.sent_at for n in rows.values()} == {None}  # rows first: nothing is sent inside the transition

    # A sender process claims the failure's notification, POSTs it, and is killed while the receiver holds it.
    killed = rows[(str(failed.pk), "failed")]
    receiver.hold("failed")
    child = subprocess.Popen([sys.executable, "-c", SEND_THEN_BE_KILLED, str(killed.pk)], cwd=django_settings.BASE_DIR,
                             env=child_env(OSMO_NOTIFY_ALLOWED_HOSTS="127.0.0.1"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: receiver.arrived.is_set() or child.poll() is not None, "the child's POST")
        assert receiver.arrived.is_set(), child.communicate()
        os.kill(child.pid, signal.SIGKILL)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL and "returned" not in out, (out, err[-2000:])
    receiver.release()
    until(receiver.held_done.is_set, "the receiver to drop the dead sender's request")
    killed.refresh_from_db()
    assert (killed.sent_at, killed.tries) == (None, 1) and killed.claimed_at is not None

    # The sweep sends the rest; the dead sender's claim is still fresh, so its row waits.
    first = notify.sweep(act=True)
    assert (first["sent"], first["skipped"]) == (4, 0), first
    assert Notification.objects.get(pk=killed.pk).sent_at is None
    # Once the claim is older than any live sender could hold it (the task's hard limit), the sweep takes it over.
    later = timezone.now() + timedelta(seconds=django_settings.OSMO_NOTIFY_CLAIM_SECONDS + 1)
    assert notify.sweep(now=later, act=True)["sent"] == 1
    assert notify.sweep(now=later + timedelta(hours=1), act=True)["sent"] == 0  # nothing twice

    told = Counter((post["osmo"]["workload"], post["osmo"]["transition"]) for post in receiver.posts)
    delivered = Counter(receiver.delivered)
    assert set(told) == expected
    assert delivered == Counter({str(n.pk): 1 for n in rows.values()})  # one delivery per transition id
    # At the wire the killed send reached the receiver too: the same id and key both times, for it to drop.
    assert told[(str(failed.pk), "failed")] == 2 and receiver.keys.count(str(killed.pk)) == 2
    assert all(count == 1 for key, count in told.items() if key != (str(failed.pk), "failed"))
    assert Notification.objects.filter(sent_at__isnull=True).count() == 0
    killed.refresh_from_db()
    assert killed.tries == 2 and killed.claim is None
    body = next(post for post in receiver.posts if post["osmo"]["id"] == str(killed.pk))
    assert body["text"].startswith("Workload done-bad (") and "failed in pool training: FAILED" in body["text"]
    assert "Exit code 3" in body["text"] and body["osmo"]["attempt"] == 1


@pytest.mark.django_db
def test_a_failed_send_is_retried_with_back_off_and_then_given_up(world, researcher_api, standin, kube, settings):
    settings.OSMO_NOTIFY_MAX_TRIES = 2
    settings.OSMO_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    closed = Receiver()
    url = closed.url
    closed.close()  # nothing listens there any more: every try is refused
    choose(world["researcher"], transitions=["started"], webhook_url=url)
    run_to(standin, kube, researcher_api, "completed", "lonely")
    (row,) = Notification.objects.all()

    assert notify.deliver(row.pk) == "retry"
    row.refresh_from_db()
    assert row.tries == 1 and row.sent_at is None and "127.0.0.1" in row.last_error
    assert row.due_at >= timezone.now() + timedelta(seconds=25)  # back-off: not due at once
    assert notify.sweep(act=True)["sent"] + notify.sweep(act=True)["retry"] == 0
    assert notify.sweep(now=row.due_at, act=True)["gave_up"] == 1
    row.refresh_from_db()
    assert row.gave_up_at is not None and row.tries == 2
    assert notify.sweep(now=row.due_at + timedelta(days=1), act=True) == {
        "pending": 0, "sent": 0, "queued": 0, "retry": 0, "gave_up": 0, "skipped": 0}


@pytest.mark.django_db
def test_the_beat_sweep_sends_a_message_per_due_row_once_per_claim_period(world, researcher_api, standin, kube,
                                                                          settings):
    from tests.celery_app import broker_at

    choose(world["researcher"], transitions=["started", "completed"], webhook_url="https://hooks.example.org/x")
    run_to(standin, kube, researcher_api, "completed", "queued")
    now = timezone.now()
    with broker_at("memory://"):
        assert notify.sweep(now=now)["queued"] == 2
        assert notify.sweep(now=now + timedelta(seconds=60))["queued"] == 0  # not again while a sender may have it
        later = now + timedelta(seconds=settings.OSMO_NOTIFY_CLAIM_SECONDS + 1)
        assert notify.sweep(now=later)["queued"] == 2  # the messages were lost (no worker): sent again
    assert set(Notification.objects.values_list("sent_at", flat=True)) == {None}


@pytest.mark.django_db
def test_a_webhook_host_that_resolves_to_a_private_address_is_refused_at_send_unless_allowed(
        world, researcher_api, standin, kube, settings):
    server = Receiver()
    try:
        settings.OSMO_NOTIFY_ALLOWED_HOSTS = []
        # A name is checked where it points when the notification is sent (it may point elsewhere later).
        choose(world["researcher"], transitions=["started"], webhook_url=f"http://localhost:{server.port}/hook")
        run_to(standin, kube, researcher_api, "completed", "private")
        (row,) = Notification.objects.all()
        assert notify.deliver(row.pk) == "retry"
        row.refresh_from_db()
        assert "a private address (not in OSMO_NOTIFY_ALLOWED_HOSTS)" in row.last_error and server.posts == []
        assert "127.0.0.1" not in row.last_error and "::1" not in row.last_error  # the server log has them

        settings.OSMO_NOTIFY_ALLOWED_HOSTS = ["127.0.0.0/8", "::1"]
        assert notify.sweep(now=row.due_at, act=True)["sent"] == 1
        assert len(server.posts) == 1
    finally:
        server.close()


@pytest.mark.django_db
def test_mail_goes_through_djangos_mail_settings_once(world, researcher_api, standin, kube):
    researcher = world["researcher"]
    researcher.email = "researcher@example.org"  # as an administrator sets it in the admin
    researcher.save()
    choose(researcher, transitions=["completed"], email=True)
    workload = run_to(standin, kube, researcher_api, "completed", "mailed")

    assert notify.sweep(act=True)["sent"] == 1
    assert notify.sweep(act=True)["sent"] == 0
    (message,) = mail.outbox
    (row,) = Notification.objects.all()
    assert message.to == ["researcher@example.org"]
    assert message.subject == f"[osmo] mailed ({str(workload.pk)[:8]}) completed"
    assert "Every replica succeeded" in message.body
    assert message.extra_headers["Message-ID"] == f"<{row.pk}@osmo.notify>"


@pytest.mark.django_db
def test_stuck_pending_is_told_once_per_attempt_after_the_chosen_minutes(world, researcher_api, api):
    researcher, other = world["researcher"], world["other"]
    choose(researcher, transitions=["pending", "failed"], pending_minutes=30, webhook_url="https://hooks.example.org/x")
    # `other` chose nothing: project nlp's default (staff's) applies to them; vision's would not apply to nlp work.
    assert api.put("/api/notifications/projects/nlp/", {"transitions": ["pending"], "pending_minutes": 90,
                                                       "webhook_url": "https://hooks.example.org/nlp"},
                   format="json").status_code == 200
    other_api = APIClient()
    other_api.force_authenticate(other)
    mine = post_workload(researcher_api, name="waits")  # no admission cycle runs: both stay PENDING
    theirs = post_workload(other_api, name="waits-too", project="nlp", priority="low")
    clock = Clock(start=timezone.now())

    clock.advance(29 * 60)
    assert notify.sweep(now=clock.now())["pending"] == 0
    clock.advance(2 * 60)
    assert notify.sweep(now=clock.now())["pending"] == 1
    (row,) = Notification.objects.all()
    assert (str(row.workload_id), row.user, row.transition, row.attempt) == (mine["id"], researcher, "pending", 1)
    assert "still pending" in row.subject and "Pending for 31 min" in row.text
    clock.advance(60 * 60)
    assert notify.sweep(now=clock.now())["pending"] == 1  # theirs, after nlp's 90 minutes; mine not again
    assert sorted((str(n.workload_id), n.target) for n in Notification.objects.all()) == sorted([
        (mine["id"], "https://hooks.example.org/x"), (theirs["id"], "https://hooks.example.org/nlp")])
    clock.advance(24 * 3600)
    assert notify.sweep(now=clock.now())["pending"] == 0


@pytest.mark.postgres
@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_celery_worker_sends_on_commit_and_retries_a_refused_send(world, researcher_api, standin, kube, settings,
                                                                    tmp_path):
    import redis

    settings.OSMO_NOTIFY_ON_COMMIT = True
    settings.OSMO_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    url = settings.TEST_REDIS_URL
    redis.Redis.from_url(url).flushdb()  # no message of an earlier test
    receiver = Receiver(fail_first=1)
    env = child_env(CELERY_BROKER_URL=url, OSMO_DATA_DIR=str(tmp_path / "data"), OSMO_NOTIFY_ALLOWED_HOSTS="127.0.0.1",
                    OSMO_NOTIFY_BACKOFF_SECONDS="1", OSMO_LIFECYCLE_CONCURRENCY="1")
    command = worker_commands("-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat",
                              pool="threads")["worker-lifecycle"]
    log = tmp_path / "worker.log"
    worker = subprocess.Popen(command, cwd=django_settings.BASE_DIR, env=env, stdout=log.open("w"),
                              stderr=subprocess.STDOUT)
    try:
        until(lambda: worker.poll() is not None or " ready." in log.read_text(), "the worker to be ready")
        assert worker.poll() is None, log.read_text()[-3000:]
        with broker_at(url):
            choose(world["researcher"], transitions=["started", "completed"], webhook_url=receiver.url)
            workload = run_to(standin, kube, researcher_api, "completed", "via-celery")
            until(lambda: Notification.objects.filter(sent_at__isnull=False).count() == 2,
                  "the worker to send both notifications", detail=lambda: log.read_text()[-3000:])
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
        receiver.close()
    rows = {n.transition: n for n in Notification.objects.filter(workload=workload)}
    assert set(rows) == {"started", "completed"}
    # The first POST was answered 503: that notification was tried twice, by the task's retry, and delivered once.
    assert sorted(n.tries for n in rows.values()) == [1, 2] and len(receiver.posts) == 3
    assert Counter(receiver.delivered) == Counter({str(n.pk): 1 for n in rows.values()})
    assert "send_notification" in log.read_text()
