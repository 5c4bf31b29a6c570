"""The limit on failed sign-ins (pools.access.signin_limit): per user name and address together, with back-off, and a
ceiling per address, on the sign-in page, the admin's sign-in and the API's HTTP basic authentication, counted in
the database. The clock is the module's `clock`, moved by the tests."""

import base64
import datetime as dt

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from pools.access import signin_limit
from pools.models import SignInFailure
from tests.support.clock import T0_AT

pytestmark = pytest.mark.django_db
LOGIN = "/accounts/login/"
T0 = T0_AT  # where the tests' `clock` starts: `clock.at(seconds)` sets it that many seconds later


@pytest.fixture(autouse=True)
def the_limit_reads_the_clock(clock, monkeypatch):
    monkeypatch.setattr(signin_limit, "clock", clock.now)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_user("alice", password="pw-alice-123", is_staff=True,
                                                 is_superuser=True)


def sign_in(client, username: str, password: str, address: str = "203.0.113.7", **extra):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address, **extra)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def fail(client, times: int, username: str = "alice", **kwargs) -> None:
    for _ in range(times):
        response = sign_in(client, username, "wrong-password", **kwargs)
        assert response.status_code == 200 and b"did not match" in response.content


def test_it_refuses_the_sixth_attempt_from_that_address_even_with_the_right_password(alice, clock):
    client = Client()
    fail(client, 5)
    clock.at(20)
    response = sign_in(client, "alice", "pw-alice-123")
    assert response.status_code == 429
    assert response["Retry-After"] == "40"  # the first back-off: 60 s after the latest failure
    assert "Too many failed sign-ins for this user name from your address: try again in 40 seconds." \
        in response.content.decode()
    assert b"did not match" not in response.content
    assert not signed_in(client)
    assert SignInFailure.objects.count() == 5  # a refused try is not counted: the lock does not grow


def test_each_further_failure_doubles_the_back_off_up_to_the_window(alice, clock):
    client = Client()
    fail(client, 5)
    clock.at(60)  # the first back-off is over: one more try, which fails
    fail(client, 1)
    clock.at(179)
    assert sign_in(client, "alice", "pw-alice-123")["Retry-After"] == "1"  # 120 s after the sixth failure
    clock.at(180)
    fail(client, 1)
    clock.at(180 + 239)
    assert sign_in(client, "alice", "pw-alice-123").status_code == 429
    clock.at(180 + 240)
    response = sign_in(client, "alice", "pw-alice-123")
    assert response.status_code == 302 and signed_in(client)
    assert not SignInFailure.objects.filter(username="alice").exists()


def test_the_back_off_never_exceeds_the_window(alice, clock, settings):
    settings.OSMO_LOGIN_BACKOFF_SECONDS = 600
    settings.OSMO_LOGIN_MAX_FAILURES_PER_ADDRESS = 0
    # By hand: failures at one instant, which the back-off under test would stop the sign-in door from recording.
    SignInFailure.objects.bulk_create([SignInFailure(username="alice", address="203.0.113.7", at=T0)] * 30)
    assert sign_in(Client(), "alice", "pw-alice-123")["Retry-After"] == "900"


def test_a_guesser_elsewhere_never_locks_an_admin_out(alice, clock):
    attacker = Client()
    fail(attacker, 5, address="198.51.100.66")
    assert sign_in(attacker, "alice", "pw-alice-123", address="198.51.100.66").status_code == 429
    # The admin, from an address that did not fail, with the right password: signed in.
    admin = Client()
    response = sign_in(admin, "alice", "pw-alice-123", address="203.0.113.7")
    assert response.status_code == 302 and signed_in(admin)
    # ... which does not clear the guesser's back-off.
    assert sign_in(Client(), "alice", "pw-alice-123", address="198.51.100.66").status_code == 429


def test_api_tokens_are_not_limited(alice, clock):
    from pools.access import tokens

    _token, secret = tokens.create_token(alice, "ci", timezone.now() + dt.timedelta(days=1))
    # By hand: failures at one instant, which the back-off under test would stop the sign-in door from recording.
    SignInFailure.objects.bulk_create([SignInFailure(username="alice", address="203.0.113.7", at=T0)] * 25)
    assert sign_in(Client(), "alice", "pw-alice-123").status_code == 429  # over both limits
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert api.get("/api/profile/", REMOTE_ADDR="203.0.113.7").status_code == 200


def test_a_successful_sign_in_clears_the_users_failures(alice, clock):
    fail(Client(), 4)
    assert sign_in(Client(), "alice", "pw-alice-123").status_code == 302
    client = Client()
    fail(client, 4)  # would be failures 5 to 8 without the clearing
    assert sign_in(client, "alice", "pw-alice-123").status_code == 302


def test_an_unknown_user_name_is_limited_like_a_real_one(alice, clock):
    client = Client()
    fail(client, 5, username="mallory")
    assert sign_in(client, "mallory", "anything").status_code == 429
    assert sign_in(client, "alice", "pw-alice-123").status_code == 302  # another name is not locked


def test_it_limits_failures_from_one_address_across_user_names(alice, clock, settings):
    settings.OSMO_LOGIN_MAX_FAILURES_PER_ADDRESS = 6
    client = Client()
    for name in ("u1", "u2", "u3"):
        fail(client, 2, username=name)
    response = sign_in(client, "alice", "pw-alice-123")
    assert response.status_code == 429
    assert "Too many failed sign-ins from your address" in response.content.decode()
    assert sign_in(Client(), "alice", "pw-alice-123", address="198.51.100.9").status_code == 302


def test_behind_a_trusted_proxy_it_counts_the_forwarded_address(alice, clock, settings):
    settings.OSMO_LOGIN_MAX_FAILURES_PER_ADDRESS = 3
    settings.ACCESS_TRUSTED_PROXIES = ["10.0.0.0/8"]
    proxy = {"address": "10.0.0.2"}
    fail(Client(), 3, username="u1", HTTP_X_FORWARDED_FOR="192.0.2.1, 10.0.0.5", **proxy)
    assert sign_in(Client(), "alice", "pw-alice-123", HTTP_X_FORWARDED_FOR="192.0.2.1", **proxy).status_code == 429
    # Another client behind the same proxy is not locked out with the first.
    assert sign_in(Client(), "alice", "pw-alice-123", HTTP_X_FORWARDED_FOR="192.0.2.2", **proxy).status_code == 302
    # A client that is no trusted proxy cannot pick its address by a header.
    assert SignInFailure.objects.filter(address="192.0.2.1").count() == 3
    fail(Client(), 1, username="u2", address="198.51.100.20", HTTP_X_FORWARDED_FOR="192.0.2.99")
    assert SignInFailure.objects.filter(username="u2").get().address == "198.51.100.20"


def test_failures_recorded_by_another_process_count(alice, clock):
    # Another web process writes the same table; here, rows written directly.
    # By hand: failures at one instant, which the back-off under test would stop the sign-in door from recording.
    SignInFailure.objects.bulk_create([SignInFailure(username="alice", address="203.0.113.7", at=T0)] * 5)
    assert sign_in(Client(), "alice", "pw-alice-123").status_code == 429
    assert sign_in(Client(), "alice", "pw-alice-123", address="192.0.2.50").status_code == 302


def test_old_failures_are_deleted_when_a_new_one_is_recorded(alice, clock):
    fail(Client(), 3)
    clock.at(901)
    fail(Client(), 1, username="bob")
    assert list(SignInFailure.objects.values_list("username", flat=True)) == ["bob"]


def test_a_limit_of_zero_turns_it_off(alice, clock, settings):
    settings.OSMO_LOGIN_MAX_FAILURES = 0
    client = Client()
    fail(client, 8)
    assert sign_in(client, "alice", "pw-alice-123").status_code == 302


def test_the_admin_sign_in_is_under_the_same_limit(alice, clock):
    client = Client()
    for _ in range(5):
        client.post("/admin/login/", {"username": "alice", "password": "nope"}, REMOTE_ADDR="203.0.113.7")
    response = client.post("/admin/login/?next=/admin/", {"username": "alice", "password": "pw-alice-123"},
                           REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 429 and not signed_in(client)
    assert response["Retry-After"] == "60"
    assert b"Too many failed sign-ins for this user name from your address: try again in 1 minute." \
        in response.content
    assert b"correct username" not in response.content
    assert SignInFailure.objects.filter(username="alice").count() == 5


def test_a_wrong_password_on_the_admin_sign_in_still_gets_djangos_message_and_200(alice, clock):
    response = Client().post("/admin/login/", {"username": "alice", "password": "nope"}, REMOTE_ADDR="203.0.113.7")

    assert response.status_code == 200
    assert b"correct username and password" in response.content


def basic(username: str, password: str) -> dict:
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    return {"HTTP_AUTHORIZATION": f"Basic {token}", "REMOTE_ADDR": "203.0.113.7"}


def test_http_basic_authentication_of_the_api_is_under_the_same_limit(alice, clock):
    api = APIClient()
    assert api.get("/api/configs/pool/", **basic("alice", "pw-alice-123")).status_code == 200
    for _ in range(5):
        assert api.get("/api/configs/pool/", **basic("alice", "wrong")).status_code == 401
    clock.at(30)
    refused = api.get("/api/configs/pool/", **basic("alice", "pw-alice-123"))
    assert refused.status_code == 429 and refused["Retry-After"] == "30"
    assert refused.json()["detail"].startswith("Too many failed sign-ins for this user name from your address")
    # The sign-in page shares the count.
    assert sign_in(Client(), "alice", "pw-alice-123").status_code == 429
    clock.at(900)
    assert api.get("/api/configs/pool/", **basic("alice", "pw-alice-123")).status_code == 200
    assert not SignInFailure.objects.filter(username="alice").exists()  # a good basic sign-in clears them too
