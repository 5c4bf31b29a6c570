"""Follows that cannot starve the site (issue 42, point 2): one user opening 8 follows held all 8 web threads.
Now a user has at most OSMO_LOG_FOLLOWS_PER_USER follows open across the site and a process at most
OSMO_LOG_FOLLOWS_PER_PROCESS; one more is a 429 with Retry-After naming the limit, and closing a follow (read to its
end or not) gives its slot back. Through the API against the stand-in API server; the leases' clock is injected."""

import datetime as dt

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.models import FollowLease
from scheduling.run import follow_limits
from tests.scheduling.test_workload_logs import logs_url, running, wired  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db


def close(response):
    """As the server closes a response its client left (the test client keeps its database connection open)."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


@pytest.fixture
def follows():
    """Every followed response a test opens, closed at its end (as a WSGI server closes each response)."""
    opened = []
    yield opened
    for response in opened:
        close(response)


def follow(api, workload, opened):
    response = api.get(logs_url(workload, follow=1))
    if response.status_code == 200:
        assert response.streaming
        opened.append(response)
    return response


@pytest.fixture
def now(monkeypatch):
    moment = [timezone.now()]
    monkeypatch.setattr(follow_limits, "clock", lambda: moment[0])
    return moment


def test_a_user_beyond_their_follows_gets_a_429_naming_the_limit_until_one_ends(
        researcher_api, kube, wired, settings, follows, now):  # noqa: F811
    settings.OSMO_LOG_FOLLOWS_PER_USER = 2
    settings.OSMO_LOG_FOLLOWS_PER_PROCESS = follow_limits.open_in_process() + 8
    settings.OSMO_LOG_FOLLOW_SECONDS, settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS = 300, 5
    workload, _ = running(researcher_api, kube, wired)
    first, second = follow(researcher_api, workload, follows), follow(researcher_api, workload, follows)
    assert (first.status_code, second.status_code) == (200, 200)
    now[0] += dt.timedelta(seconds=100)
    refused = follow(researcher_api, workload, follows)
    assert refused.status_code == 429, refused.content
    assert refused.json()["limit"] == "OSMO_LOG_FOLLOWS_PER_USER" and refused.json()["field"] == "follow"
    assert refused["Retry-After"] == "205"  # the first follow's window (300 s and one recheck) ends then
    assert researcher_api.get(logs_url(workload)).status_code == 200  # reading without follow is not limited

    close(first)  # its client went away: its slot is given back
    assert follow(researcher_api, workload, follows).status_code == 200
    assert follow(researcher_api, workload, follows).status_code == 429


def test_a_follow_whose_process_died_stops_counting_when_its_window_ends(
        researcher_api, kube, wired, settings, follows, now):  # noqa: F811
    settings.OSMO_LOG_FOLLOWS_PER_USER = 1
    settings.OSMO_LOG_FOLLOWS_PER_PROCESS = follow_limits.open_in_process() + 8
    settings.OSMO_LOG_FOLLOW_SECONDS, settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS = 300, 5
    workload, _ = running(researcher_api, kube, wired)
    assert follow(researcher_api, workload, follows).status_code == 200
    assert follow(researcher_api, workload, follows).status_code == 429
    # The lease of a process that died is never deleted; it stops counting at the end of its window.
    now[0] += dt.timedelta(seconds=304)
    assert follow(researcher_api, workload, follows).status_code == 429
    now[0] += dt.timedelta(seconds=1)
    assert follow(researcher_api, workload, follows).status_code == 200
    assert FollowLease.objects.count() == 1  # the expired one went


def test_a_process_beyond_its_follows_answers_429_to_everyone_while_other_requests_are_served(
        world, researcher_api, kube, wired, settings, follows, django_user_model):  # noqa: F811
    settings.OSMO_LOG_FOLLOWS_PER_USER = 5
    settings.OSMO_LOG_FOLLOWS_PER_PROCESS = follow_limits.open_in_process() + 2
    workload, _ = running(researcher_api, kube, wired)
    admin = APIClient()
    admin.force_authenticate(django_user_model.objects.create_superuser("admin", password="pw-adm-123"))
    assert follow(researcher_api, workload, follows).status_code == 200
    assert follow(admin, workload, follows).status_code == 200
    refused = follow(admin, workload, follows)
    assert refused.status_code == 429 and refused.json()["limit"] == "OSMO_LOG_FOLLOWS_PER_PROCESS"
    assert refused["Retry-After"] == str(settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS)
    assert admin.get("/api/workloads/").status_code == 200
    close(follows.pop())
    assert follow(admin, workload, follows).status_code == 200


def test_a_follow_read_to_its_end_gives_its_slot_back(researcher_api, kube, wired, settings, follows):  # noqa: F811
    settings.OSMO_LOG_FOLLOWS_PER_USER = 1
    settings.OSMO_LOG_FOLLOWS_PER_PROCESS = follow_limits.open_in_process() + 8
    workload, pod = running(researcher_api, kube, wired)
    wired.append_log(pod, "the only line", namespace=workload.namespace)
    wired.end_log(pod, namespace=workload.namespace)
    response = follow(researcher_api, workload, follows)
    assert b"".join(response.streaming_content) == b"the only line\n"
    assert FollowLease.objects.count() == 0
    assert follow(researcher_api, workload, follows).status_code == 200
