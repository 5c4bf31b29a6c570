"""Slow clients cannot hold the web server's threads (issue 42, point 3): `manage.py serve` as an operator runs it
(DEBUG off, PostgreSQL, one gunicorn worker of two threads), while eight loopback connections send a request head
one line a second and two send a body a byte a second. `/healthz` and a signed-in `GET /` are answered meanwhile,
and a head that does not arrive within WEB_HEADER_TIMEOUT is disconnected (gthread handed each connection to a
thread at once: ten such clients made /healthz time out)."""

import contextlib
import re
import select
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest

from tests.test_serve import ROOT, Served, serve_env, wait_for

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


def fetch(url: str, data: bytes | None = None, **headers: str) -> tuple[int, dict, bytes]:
    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.build_opener(Stay).open(request, timeout=20) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def signed_in(base: str, username: str, password: str) -> str:
    """The session cookie of a sign-in through the login form."""
    status, headers, body = fetch(f"{base}/accounts/login/")
    assert status == 200, body[:500]
    csrf = re.search(r"csrftoken=([^;]+)", headers["Set-Cookie"]).group(1)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', body.decode()).group(1)
    status, headers, _ = fetch(f"{base}/accounts/login/", f"username={username}&password={password}&"
                               f"csrfmiddlewaretoken={token}".encode(), Origin=base, Cookie=f"csrftoken={csrf}",
                               **{"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 302, headers
    return re.search(r"sessionid=([^;]+)", ", ".join(headers.get_all("Set-Cookie"))).group(1)


class Slowloris:
    """Connections that send a request a piece at a time (one header line, or one body byte, per `every` seconds)
    from one thread, until stopped; bounded: `count` connections to loopback, at most `pieces` pieces each."""

    def __init__(self, port: int, heads: int, bodies: int, every: float = 1.0, pieces: int = 600):
        self.sockets = []
        for n in range(heads + bodies):
            sock = socket.create_connection(("127.0.0.1", port), timeout=60)
            if n < heads:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            else:
                sock.sendall(b"POST /api/workloads/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                             b"\r\nContent-Length: 1000\r\n\r\n{")
            self.sockets.append((sock, n < heads))
        self.stopped = threading.Event()
        self.closed: list[int] = []  # which connections the server closed
        self.thread = threading.Thread(target=self.run, args=(every, pieces), daemon=True)
        self.thread.start()

    def run(self, every: float, pieces: int):
        for piece in range(pieces):
            if self.stopped.wait(every):
                return
            for n, (sock, head) in enumerate(self.sockets):
                if n in self.closed:
                    continue
                try:
                    sock.sendall(f"X-Slow-{piece}: 1\r\n".encode() if head else b" ")
                except OSError:
                    self.closed.append(n)

    def stop(self):
        self.stopped.set()
        self.thread.join()
        for sock, _ in self.sockets:
            sock.close()


@pytest.mark.django_db(transaction=True)
def test_slow_clients_hold_no_thread_and_are_disconnected_after_the_header_timeout(tmp_path):
    env = serve_env(tmp_path)
    for argv in (["collectstatic", "--noinput", "-v0"], ["createsuperuser", "--noinput", "--username", "admin",
                                                         "--email", "admin@example.org"]):
        done = subprocess.run([sys.executable, "manage.py", *argv], cwd=ROOT, capture_output=True, text=True,
                              env={**env, "DJANGO_SUPERUSER_PASSWORD": "pw-admin-123"})
        assert done.returncode == 0, done.stderr
    # The header timeout at its default (10 s): the cut-off is what the test waits for last. The body timeout stays
    # longer, so that every slow connection is still open while the requests below are answered (checked).
    served = Served(tmp_path, ["--no-worker", "--no-beat"], WEB_THREADS="2", WEB_HEADER_TIMEOUT="10",
                    WEB_BODY_TIMEOUT="20")
    attack = None
    try:
        wait_for(lambda: fetch(f"{served.url}/healthz")[0] == 200, "/healthz to answer 200", process=served.process)
        session = signed_in(served.url, "admin", "pw-admin-123")
        attack = Slowloris(served.port, heads=8, bodies=2)
        for _ in range(3):
            assert fetch(f"{served.url}/healthz")[0] == 200
            status, _, body = fetch(f"{served.url}/", Cookie=f"sessionid={session}")
            assert status == 200 and b"admin" in body
        # Answered while all ten slow clients were still connected, none cut off yet (a closed connection would be
        # readable, with the end of its stream): the slow clients held no thread, rather than being gone already.
        assert not attack.closed and not select.select([sock for sock, _ in attack.sockets], [], [], 0)[0]
        # A head still coming WEB_HEADER_TIMEOUT seconds after its connection began is cut off (the client's next
        # line fails, or its read sees the end).
        sock, _ = attack.sockets[0]
        with contextlib.suppress(ConnectionResetError):
            assert sock.recv(1024) == b""
        assert served.process.poll() is None
    finally:
        if attack is not None:
            attack.stop()
        served.stop()
