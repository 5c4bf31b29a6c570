"""Where a webhook may connect (issue 42): the addresses an IPv6 address carries are unwrapped and judged (NAT64,
6to4, Teredo, IPv4-mapped and -compatible), every address a name resolves to is checked, the connection goes to
an address that was checked (one resolution: no DNS rebinding), a redirect is never followed, and the user's
error names no internal address. Real HTTP servers on loopback; the one stand-in is a resolver handed to the
sender (no test can make a real name answer a public and a private address)."""

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from scheduling.decisions import notifications as decide
from scheduling.models import Notification
from scheduling.run import notify
from tests.scheduling.test_notifications import choose, run_to
from tests.support.webhooks import Receiver


@pytest.mark.parametrize("address", ["64:ff9b::a9fe:a9fe", "64:ff9b::7f00:1", "64:ff9b:1::808:808",
                                     "2002:a9fe:a9fe::", "2002:7f00:1::", "::127.0.0.1", "::8.8.8.8",
                                     "2001:0:4136:e378:8000:63bf:3fff:fdd2", "::ffff:169.254.169.254",
                                     "240.0.0.1", "100::1", "ff02::1"])
def test_an_address_that_carries_or_is_a_special_address_is_not_public(address):
    assert not decide.public(address)


@pytest.mark.parametrize("address", ["8.8.8.8", "64:ff9b::808:808", "2002:808:808::", "::ffff:8.8.8.8",
                                     "2001:4860:4860::8888"])
def test_an_address_that_carries_a_public_one_is_public(address):
    assert decide.public(address)


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["http://[64:ff9b::a9fe:a9fe]/", "http://[2002:a9fe:a9fe::]/", "http://[::127.0.0.1]/",
                                 "http://[::ffff:a9fe:a9fe]/latest"])
def test_a_webhook_at_a_wrapped_private_address_is_refused_naming_the_field(world, researcher_api, url):
    response = researcher_api.put("/api/profile/notifications/", {"webhook_url": url}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["field"] == "webhook_url" and "private address" in response.json()["detail"]


def test_every_resolved_address_is_checked_not_only_the_first():
    assert decide.refused_addresses(["8.8.8.8", "127.0.0.1", "2001:4860:4860::8888"], []) == ["127.0.0.1"]
    assert decide.refused_addresses(["8.8.8.8", "10.1.2.3"], ["10.0.0.0/8"]) == []


def resolver(*addresses: str, calls: list | None = None):
    """A getaddrinfo that answers `addresses`, in order, for any name."""

    def getaddrinfo(host, port, *args, **kwargs):
        if calls is not None:
            calls.append(host)
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "",
                 (a, port)) for a in addresses]

    return getaddrinfo


def test_a_name_answering_a_public_then_a_private_address_is_refused_and_nothing_is_sent(settings):
    settings.OSMO_NOTIFY_ALLOWED_HOSTS, settings.OSMO_NOTIFY_TIMEOUT = [], 1
    server = Receiver()
    try:
        with pytest.raises(notify.SendError) as refused:
            notify.post_webhook(f"http://hooks.example.org:{server.port}/hook", {"text": "x"}, "k",
                                getaddrinfo=resolver("8.8.8.8", "127.0.0.1"))
        assert "hooks.example.org resolves to a private address" in str(refused.value)
        assert "127.0.0.1" not in str(refused.value)
        assert server.posts == []
    finally:
        server.close()


def test_the_send_connects_to_the_address_it_checked_resolving_once(settings):
    """hooks.invalid resolves nowhere but through the resolver handed over: the post arrives only if the
    connection goes to the address that resolver answered (and was checked), not to a second resolution."""
    settings.OSMO_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    server = Receiver()
    calls = []
    try:
        notify.post_webhook(f"http://hooks.invalid:{server.port}/hook", {"osmo": {"id": "n1", "transition": "x"}},
                            "k", getaddrinfo=resolver("127.0.0.1", calls=calls))
        assert [post["osmo"]["id"] for post in server.posts] == ["n1"] and calls == ["hooks.invalid"]
    finally:
        server.close()


class Recorder:
    """An HTTP server at `host` that records every request (any method) and answers `status` with `location`."""

    def __init__(self, host: str, status: int = 200, location: str = ""):
        self.requests: list[tuple[str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(min(length, 1 << 20))
                recorder.requests.append((self.command, self.path))
                self.send_response(status)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_HEAD = answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)  # our own socket, bound at once: no port race
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.django_db
@pytest.mark.parametrize("status", [302, 307])
def test_a_redirect_to_a_private_address_is_not_followed(world, researcher_api, standin, kube, settings, status):
    """The operator allows 127.0.0.2 (the webhook's host); it answers with a redirect to 127.0.0.1, which is not
    allowed: the sender records the redirect as a failure and nothing reaches 127.0.0.1."""
    inside = Recorder("127.0.0.1")
    outside = Recorder("127.0.0.2", status, f"http://127.0.0.1:{inside.port}/admin")
    try:
        settings.OSMO_NOTIFY_ALLOWED_HOSTS = ["127.0.0.2"]
        choose(world["researcher"], transitions=["started"], webhook_url=f"http://127.0.0.2:{outside.port}/hook")
        run_to(standin, kube, researcher_api, "completed", "redirected")
        (row,) = Notification.objects.all()
        assert notify.deliver(row.pk) == "retry"
        row.refresh_from_db()
        assert outside.requests == [("POST", "/hook")]
        assert inside.requests == []
        assert f"answered {status} (a redirect, not followed)" in row.last_error
    finally:
        inside.close()
        outside.close()
