"""A webhook receiver for tests: a real HTTP server (threads, on a free port) that keeps every POST it reads and
counts a delivery only when it answered a sender still connected, keyed by the notification's id (the
Idempotency-Key header). `hold(transition)` makes it keep the first such request open until `release()`, so a
test can kill the sender mid-send."""

import json
import select
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.ports import free_port


class Receiver:
    def __init__(self, *, fail_first: int = 0):
        self.fail_first = fail_first  # answer 503 to this many posts first (a receiver having a bad minute)
        self.posts: list[dict] = []  # every body read, in order (ids may repeat: the wire is at-least-once)
        self.delivered: list[str] = []  # ids answered 200 to a sender that was still there
        self.keys: list[str] = []  # the Idempotency-Key header of each post
        self.arrived = threading.Event()
        self.held_done = threading.Event()  # the held request was answered, or dropped for its gone sender
        self._release = threading.Event()
        self._hold: str | None = None
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = min(int(self.headers.get("Content-Length") or 0), 1 << 20)
                body = json.loads(self.rfile.read(length))
                with receiver._lock:
                    receiver.posts.append(body)
                    receiver.keys.append(self.headers.get("Idempotency-Key", ""))
                    failing = len(receiver.posts) <= receiver.fail_first
                if failing:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with receiver._lock:
                    held = receiver._hold is not None and body["osmo"]["transition"] == receiver._hold
                    if held:
                        receiver._hold = None
                if held:
                    receiver.arrived.set()
                    receiver._release.wait(300)
                    if _closed(self.connection):
                        receiver.held_done.set()
                        return  # its sender is gone: nobody will read an answer
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")
                with receiver._lock:
                    receiver.delivered.append(body["osmo"]["id"])
                if held:
                    receiver.held_done.set()

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def hold(self, transition: str) -> None:
        self._hold = transition

    def release(self) -> None:
        self._release.set()

    def close(self) -> None:
        self.release()
        self.server.shutdown()
        self.server.server_close()


def _closed(connection: socket.socket) -> bool:
    """The peer closed its end (a read would see end of file)."""
    readable, _, _ = select.select([connection], [], [], 0)
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True
