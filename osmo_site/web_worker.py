"""gunicorn's threaded worker with each request read before a thread takes it (issue 42): `deploy/gunicorn.conf.py`
names it, so `manage.py serve`, `make serve` and the web Deployment all run it.

gthread hands a connection to a pool thread as soon as it is accepted, and the thread reads the request; ten
clients sending one header line every 3 s held every thread, and `/healthz` went unanswered. Here the worker's
event loop reads the request head without blocking (and a body of up to WEB_BUFFER_BYTES when its length is given),
and only a whole request goes to a thread. A head that has not arrived WEB_HEADER_TIMEOUT seconds after the
connection was accepted (or after a kept-alive connection spoke again), or a buffered body WEB_BODY_TIMEOUT seconds
after its head, closes the connection; so does a head over MAX_HEAD bytes. A chunked or larger body is read by the
thread as before (the application bounds its own uploads). Connections over TLS in gunicorn itself are left to
gthread (the ingress or proxy terminates TLS in every documented setup)."""

import contextlib
import errno
import heapq
import itertools
import os
import selectors
import time
from functools import partial

from gunicorn.workers.gthread import TConn, ThreadWorker

MAX_HEAD = 32 * 1024  # as nginx's default header buffers; gunicorn's own limits apply within it
CHUNK = 64 * 1024


def _setting(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value.isascii() and value.isdigit() else default


def body_to_buffer(head: bytes, most: int) -> int:
    """The body bytes to read before a thread takes the request whose head (without its blank line) is `head`: its
    Content-Length when that is at most `most`, else 0 (no body, a chunked one, a larger one, or a bad length that
    gunicorn answers)."""
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"transfer-encoding":
            return 0
        if name == b"content-length":
            value = value.strip()
            if not (value.isdigit() and len(value) <= 18):
                return 0
            length = int(value)
    return length if length <= most else 0


class HeadFirstWorker(ThreadWorker):
    """gthread, with each request read off the threads first (see the module)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.header_timeout = _setting("WEB_HEADER_TIMEOUT", 10)
        self.body_timeout = _setting("WEB_BODY_TIMEOUT", 30)
        self.buffer_bytes = _setting("WEB_BUFFER_BYTES", 64 * 1024)
        self._deadlines: list = []  # (deadline, n, conn) of the connections being read
        self._count = itertools.count()

    def accept(self, server, listener):
        if self.cfg.is_ssl:
            return super().accept(server, listener)
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return None
        conn = TConn(self.cfg, sock, client, server)
        self.nr_conns += 1
        self._read_request(conn)
        return None

    def on_client_socket_readable(self, conn, client):
        """A kept-alive connection speaks again: its next request is read here too."""
        if self.cfg.is_ssl:
            return super().on_client_socket_readable(conn, client)
        with self._lock:
            self.poller.unregister(client)
            try:
                self._keep.remove(conn)
            except ValueError:  # gthread's race: the keep-alive sweep took it
                return None
        self._read_request(conn)
        self._on_readable(conn, client)
        return None

    def _read_request(self, conn):
        # What gunicorn's parser already holds of a kept-alive connection (a pipelined request) comes first.
        held = conn.parser.unreader.buf.getvalue() if conn.parser is not None else b""
        conn.pending, conn.held, conn.scanned, conn.needed = bytearray(held), len(held), 0, None
        conn.in_body = False
        self._until(conn, self.header_timeout)
        with self._lock:
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._on_readable, conn))

    def _until(self, conn, seconds: float):
        conn.read_deadline = time.monotonic() + seconds
        heapq.heappush(self._deadlines, (conn.read_deadline, next(self._count), conn))

    def _on_readable(self, conn, client):
        if conn.pending is None:
            return
        try:
            data = conn.sock.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(conn)  # the client went away
            return
        conn.pending += data
        if conn.needed is None:  # the head: searched once per byte, however it is split
            end = conn.pending.find(b"\r\n\r\n", max(0, conn.scanned - 3))
            if end < 0:
                conn.scanned = len(conn.pending)
                if len(conn.pending) > MAX_HEAD:
                    self._drop(conn)
                return
            conn.needed = end + 4 + body_to_buffer(bytes(conn.pending[:end]), self.buffer_bytes)
        if len(conn.pending) < conn.needed:
            if not conn.in_body:
                conn.in_body = True
                self._until(conn, self.body_timeout)
            return
        self._hand_on(conn)

    def _stop_reading(self, conn) -> bytes:
        """What was read here and is not in gunicorn's parser yet."""
        data, conn.pending = bytes(conn.pending[conn.held:]), None
        with self._lock, contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)
        return data

    def _hand_on(self, conn):
        data = self._stop_reading(conn)
        conn.init()
        conn.parser.unreader.unread(data)
        future = self.tpool.submit(self.handle, conn)
        self._wrap_future(future, conn)

    def _drop(self, conn):
        self._stop_reading(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_keepalived(self):
        super().murder_keepalived()
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, _, conn = heapq.heappop(self._deadlines)
            if conn.pending is not None and conn.read_deadline == deadline:
                self.log.debug("closing a connection from %s: its request did not arrive in time", conn.client)
                self._drop(conn)
