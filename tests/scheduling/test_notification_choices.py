"""Choosing what to be told and where (issue 26 point 5): the profile's API, page and CLI write the same choice
through the same checks; bad input is a 400 naming the field; staff set a project's default; and the pure rules
(which change is which transition, what the body holds, which webhook URLs are refused)."""

import json
import re

import pytest
from django.core.management import CommandError
from django.test import Client

from pools.models import AuditEvent, Project
from scheduling.decisions import notifications as decide
from scheduling.models import NotificationPreference
from tests.support.commands import run

pytestmark = pytest.mark.django_db
HOOK = "https://chat.example.org/hooks/vision-alerts"


def test_the_api_round_trip_sets_only_the_fields_given_and_clears(world, researcher_api):
    empty = researcher_api.get("/api/profile/notifications/").json()
    assert empty["own"] is None and empty["transitions"] == list(decide.TRANSITIONS) and empty["recent"] == []

    first = researcher_api.put("/api/profile/notifications/", {"transitions": ["failed", "started"],
                                                               "webhook_url": HOOK}, format="json")
    assert first.status_code == 200, first.json()
    assert first.json()["own"] | {"updated_at": None} == {
        "transitions": ["started", "failed"], "pending_minutes": 60, "webhook_url": HOOK, "email": False,
        "updated_at": None, "updated_by": "researcher"}
    second = researcher_api.put("/api/profile/notifications/", {"pending_minutes": 15}, format="json").json()
    assert (second["own"]["transitions"], second["own"]["pending_minutes"]) == (["started", "failed"], 15)
    assert AuditEvent.objects.filter(kind="notification", object="notifications/researcher").count() == 2

    cleared = researcher_api.delete("/api/profile/notifications/")
    assert cleared.status_code == 200 and cleared.json()["own"] is None
    assert not NotificationPreference.objects.exists()


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"transitions": ["finished"]}, "transitions", "unknown transitions finished"),
    ({"transitions": "failed"}, "transitions", "must be a list"),
    ({"pending_minutes": 0}, "pending_minutes", "from 1 to 10080"),
    ({"pending_minutes": True}, "pending_minutes", "whole number"),
    ({"webhook_url": "ftp://example.org/x"}, "webhook_url", "http:// or https://"),
    ({"webhook_url": "https://10.0.0.8/hook"}, "webhook_url", "private address"),
    ({"webhook_url": "http://169.254.169.254/latest/meta-data"}, "webhook_url", "private address"),
    ({"webhook_url": "http://[::1]:8080/"}, "webhook_url", "private address"),
    ({"webhook_url": "https://user:pw@example.org/"}, "webhook_url", "user name or password"),
    ({"webhook_url": "https://example.org/" + "a" * 2000}, "webhook_url", "longer than 2000"),
    ({"webhook_url": "https://exa mple.org/"}, "webhook_url", "spaces"),
    ({"webhook_url": 5}, "webhook_url", "must be a string"),
    ({"email": "yes"}, "email", "true or false"),
    ({"email": True}, "email", "no mail address"),
    ({"colour": "red"}, "colour", "unknown field"),
])
def test_bad_choices_are_refused_naming_the_field(world, researcher_api, body, field, words):
    response = researcher_api.put("/api/profile/notifications/", body, format="json")

    assert response.status_code == 400, response.json()
    assert response.json()["field"] == field and words in response.json()["detail"]
    assert not NotificationPreference.objects.exists()


def test_a_private_webhook_host_is_accepted_when_the_operator_allows_it(world, researcher_api, settings):
    settings.OSMO_NOTIFY_ALLOWED_HOSTS = ["10.0.0.0/8"]

    response = researcher_api.put("/api/profile/notifications/", {"webhook_url": "https://10.0.0.8/hook"},
                                  format="json")

    assert response.status_code == 200 and response.json()["own"]["webhook_url"] == "https://10.0.0.8/hook"


def test_staff_set_a_project_default_that_members_see_without_its_url(world, researcher_api, api):
    refused = researcher_api.put("/api/notifications/projects/vision/", {"transitions": ["failed"]}, format="json")
    assert refused.status_code == 403

    saved = api.put("/api/notifications/projects/vision/", {"transitions": ["failed", "completed"],
                                                            "webhook_url": HOOK}, format="json")
    assert saved.status_code == 200 and saved.json()["transitions"] == ["completed", "failed"]
    assert api.get("/api/notifications/projects/vision/").json()["webhook_url"] == HOOK
    assert api.get("/api/notifications/projects/nope/").status_code == 404
    mine = researcher_api.get("/api/profile/notifications/").json()
    assert mine["project_defaults"] == [{"project": "vision", "transitions": ["completed", "failed"],
                                         "pending_minutes": 60, "webhook": True, "email": False}]
    assert HOOK not in json.dumps(mine)
    assert api.delete("/api/notifications/projects/vision/").json()["transitions"] == []
    assert not NotificationPreference.objects.filter(project__name="vision").exists()


def test_the_profile_page_round_trip_keeps_csrf_and_shows_refusals(world):
    client = Client(enforce_csrf_checks=True)
    client.force_login(world["researcher"])
    page = client.get("/profile/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert 'id="notifications-form"' in page and "You have chosen nothing yet" in page

    saved = client.post("/profile/notifications/", {"transitions": ["completed", "pending"], "pending_minutes": "45",
                                                     "webhook_url": HOOK, "csrfmiddlewaretoken": token})
    assert saved.status_code == 302
    row = NotificationPreference.objects.get(user=world["researcher"])
    assert (row.transitions, row.pending_minutes, row.webhook_url, row.email) == (
        ["completed", "pending"], 45, HOOK, False)
    shown = client.get("/profile/").content.decode()
    assert 'value="completed" checked' in shown and 'value="failed">' in shown and HOOK in shown
    assert "Notification choices saved." in shown and "These are your own choices." in shown
    assert researcher_json(world)["own"]["webhook_url"] == HOOK  # the API reads what the page wrote

    refused = client.post("/profile/notifications/", {"transitions": ["failed"], "pending_minutes": "45",
                                                       "webhook_url": "javascript:alert(1)",
                                                       "csrfmiddlewaretoken": token})
    assert refused.status_code == 400
    assert 'id="webhook-error">webhook_url must be an http:// or https:// URL' in refused.content.decode()
    assert NotificationPreference.objects.get(user=world["researcher"]).transitions == ["completed", "pending"]

    forgot = client.post("/profile/notifications/", {"forget": "yes", "csrfmiddlewaretoken": token})
    assert forgot.status_code == 302 and not NotificationPreference.objects.exists()


def researcher_json(world) -> dict:
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(world["researcher"])
    return client.get("/api/profile/notifications/").json()


def test_the_cli_round_trip_and_a_projects_default(world):
    shown = json.loads(run("notifications", "set", "researcher", "--on", "started,failed", "--webhook", HOOK))
    assert (shown["transitions"], shown["webhook_url"]) == (["started", "failed"], HOOK)
    assert researcher_json(world)["own"]["transitions"] == ["started", "failed"]  # the API reads what the CLI wrote
    assert json.loads(run("notifications", "show", "researcher"))["own"]["webhook_url"] == HOOK
    with pytest.raises(CommandError, match="webhook_url: webhook_url must be an http"):
        run("notifications", "set", "researcher", "--webhook", "file:///etc/passwd")
    with pytest.raises(CommandError, match="There is no user 'nobody-here'"):
        run("notifications", "set", "nobody-here", "--on", "failed")
    assert "Cleared the choices of researcher" in run("notifications", "clear", "researcher")

    default = json.loads(run("notifications", "project", "nlp", "--on", "pending", "--pending-minutes", "120",
                             "--email"))
    assert (default["transitions"], default["pending_minutes"], default["email"]) == (["pending"], 120, True)
    assert NotificationPreference.objects.get(project=Project.objects.get(name="nlp")).email
    assert json.loads(run("notifications", "project", "nlp"))["pending_minutes"] == 120
    assert json.loads(run("notifications", "project", "nlp", "--clear"))["transitions"] == []
    assert json.loads(run("notifications", "sweep")) == {"pending": 0, "sent": 0, "queued": 0, "retry": 0,
                                                         "gave_up": 0, "skipped": 0}


@pytest.mark.parametrize(("status", "reason", "rescheduled", "expected"), [
    ("RUNNING", "RUNNING", False, "started"),
    ("COMPLETED", "COMPLETED", False, "completed"),
    ("FAILED", "EXIT_CODE", False, "failed"),
    ("FAILED_EVICTED", "EVICTED", False, "failed"),
    ("FAILED_QUEUE_TIMEOUT", "QUEUE_TIMEOUT", False, "failed"),
    ("FAILED_PREEMPTED", "PREEMPTED", True, "preempted"),
    ("FAILED", "PREEMPTED", False, "failed"),  # preempted with every retry spent: it failed
    ("FAILED", "RESCHEDULE", True, None),  # an attempt that is retried: only the workload's end is told
    ("FAILED_CANCELED", "CANCELED", False, None),
])
def test_which_change_is_which_transition(status, reason, rescheduled, expected):
    assert decide.transition_for(status, reason, rescheduled=rescheduled) == expected


def test_the_webhook_body_is_what_slack_and_teams_read_plus_our_fields():
    change = decide.Change("failed", "0a0a0a0a-0000-4000-8000-00000000000a", "train", 2, "FAILED", "vision",
                           "training", "Exit code 3: failed.", "2026-11-27T10:00:00+00:00")
    text = decide.text(change)
    body = decide.webhook_body("id-1", change, text)

    assert text == ("Workload train (0a0a0a0a, project vision, attempt 2) failed in pool training: FAILED. "
                    "Exit code 3: failed.")
    assert body["text"] == text and body["osmo"]["id"] == "id-1" and body["osmo"]["attempt"] == 2
    pinging = decide.webhook_body("id-2", change, "Exit message: <!channel> a & b")
    assert pinging["text"] == "Exit message: &lt;!channel&gt; a &amp; b"
    long = decide.text(decide.Change(**{**change.__dict__, "message": "x" * 5000}))
    assert len(long) == decide.TEXT_MAX_CHARS and long.endswith("…")


@pytest.mark.parametrize("address", ["127.0.0.1", "10.1.2.3", "192.168.0.1", "169.254.169.254", "::1", "fc00::1",
                                     "::ffff:127.0.0.1", "0.0.0.0", "224.0.0.1", "100.64.0.1"])
def test_private_and_special_addresses_are_not_public(address):
    assert not decide.public(address)


def test_allowed_hosts_match_names_addresses_and_networks():
    assert decide.host_allowed("hooks.internal", ["hooks.internal"])
    assert decide.host_allowed("10.2.3.4", ["10.0.0.0/8"])
    assert not decide.host_allowed("11.2.3.4", ["10.0.0.0/8", "not-a-network/x"])
    # A blank entry (OSMO_NOTIFY_ALLOWED_HOSTS=", hooks.internal" or a trailing comma) is passed over, not the end
    # of the list (the mutation run's survivor).
    assert decide.host_allowed("hooks.internal", ["", " ", "hooks.internal"])
    assert decide.public("8.8.8.8")


def test_a_webhook_url_is_refused_at_each_edge_and_accepted_just_inside_it():
    """Each check at its edge (the mutation run's survivors, docs/development/mutation.md)."""
    base = "https://hooks.example.com/"
    longest = base + "x" * (decide.WEBHOOK_MAX_CHARS - len(base))
    assert decide.check_webhook_url(longest) == longest
    assert decide.check_webhook_url(base + "!x") == base + "!x"  # "!" is the first printable character after space
    assert decide.host_allowed("10.2.3.4", ["10.1.0.0/8"])  # a network written with host bits is still the /8
    assert decide.host_allowed("hooks.internal", ["10.0.0.0/8", "hooks.internal"])  # a name meets no network
    assert decide.host_allowed("10.2.3.4", ["not-a-network/x", "10.0.0.0/8"])  # a broken entry is passed over
    for refused in (longest + "x", base + "\x7f", "https://someone@hooks.example.com/",
                    "https://hooks.example.com:0/", "https://hooks.example.com:99999/"):
        with pytest.raises(decide.Refused) as caught:
            decide.check_webhook_url(refused)
        assert caught.value.field == "webhook_url", refused
