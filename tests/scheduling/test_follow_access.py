"""A followed log asks again whether its reader may still read it (issue 42): a token revoked, an account
deactivated or a role lost while the follow is open ends the stream within OSMO_LOG_FOLLOW_RECHECK_SECONDS, not at
the end of its 300-second window. Through the API, with a token made through the token API, against the stand-in
API server (the log stays silent after its first lines: the check must not wait for a line to come)."""

import datetime as dt

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from pools.models import AccessToken
from scheduling.run import logs
from tests.scheduling.test_workload_logs import logs_url, running, wired  # noqa: F401 (a fixture)
from tests.support.streams import read_in_background
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)  # the stream is read on another thread


def follow_with_a_token(researcher_api, kube, wired, settings):  # noqa: F811
    settings.OSMO_LOG_FOLLOW_SECONDS, settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS = 300, 0.2
    expires = (timezone.now() + dt.timedelta(days=7)).date().isoformat()
    made = researcher_api.post("/api/auth/access_token/laptop", {"expires_at": expires}, format="json")
    assert made.status_code == 201, made.content
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {made.json()['token']}")
    workload, pod = running(researcher_api, kube, wired)
    wired.append_log(pod, "epoch 1 loss 2.31", namespace=workload.namespace)
    followed = bearer.get(logs_url(workload, follow=1))
    assert followed.status_code == 200 and followed.streaming
    received, done = read_in_background(followed)
    until(lambda: b"".join(received).endswith(b"loss 2.31\n"), "the log so far")
    wired.append_log(pod, "epoch 2 loss 1.87", namespace=workload.namespace)
    until(lambda: b"".join(received).endswith(b"loss 1.87\n"), "a line written after the first window")
    assert not done.is_set()  # the follow goes on across windows while the token is good
    return received, done


@pytest.mark.parametrize("change", ["revoke", "expire", "deactivate"])
def test_a_follow_ends_soon_after_its_token_is_revoked_or_expires_or_its_user_is_deactivated(
        world, researcher_api, kube, wired, settings, change):  # noqa: F811
    received, done = follow_with_a_token(researcher_api, kube, wired, settings)
    if change == "revoke":
        assert researcher_api.delete("/api/auth/access_token/laptop").status_code == 204
    elif change == "expire":  # by hand: no door makes time pass
        AccessToken.objects.update(expires_at=timezone.now() - dt.timedelta(seconds=1))
    else:  # as an administrator sets it in the admin
        world["researcher"].is_active = False
        world["researcher"].save()
    until(done.is_set, "the follow to end after the credential changed (its window is 300 s)", seconds=60)
    text = b"".join(received)
    assert text == b"epoch 1 loss 2.31\nepoch 2 loss 1.87\n" + logs.ACCESS_ENDED


def test_a_follow_ends_soon_after_its_reader_loses_the_role_that_let_it_read(
        world, researcher_api, kube, wired, settings, django_user_model):  # noqa: F811
    """An admin follows a researcher's log; demoted (staff no more, and neither submitter nor project member), the
    follow ends at the next check: the roles are read afresh, not as they were when the follow began."""
    settings.OSMO_LOG_FOLLOW_SECONDS, settings.OSMO_LOG_FOLLOW_RECHECK_SECONDS = 300, 0.2
    admin = django_user_model.objects.create_user("admin", password="pw-adm-123", is_staff=True, is_superuser=True)
    reader = APIClient()
    reader.force_authenticate(admin)
    workload, pod = running(researcher_api, kube, wired)
    wired.append_log(pod, "epoch 1 loss 2.31", namespace=workload.namespace)
    followed = reader.get(logs_url(workload, follow=1))
    assert followed.status_code == 200 and followed.streaming
    received, done = read_in_background(followed)
    until(lambda: b"".join(received).endswith(b"loss 2.31\n"), "the log so far")
    admin.is_staff = admin.is_superuser = False  # as an administrator sets it in the admin
    admin.save()
    until(done.is_set, "the follow to end after its reader lost the staff role (its window is 300 s)", seconds=60)
    assert b"".join(received) == b"epoch 1 loss 2.31\n" + logs.ACCESS_ENDED
