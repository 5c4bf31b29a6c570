"""Find PostgreSQL and Redis for the test suite.

`make test` uses the real services when they answer (at the URLs in the environment, or their
default local addresses) and SQLite otherwise. REQUIRE_SERVICES=1 turns a missing service into a
start-up failure instead of a fallback.
"""

import socket
from urllib.parse import urlparse

DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/osmo"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/15"


def answers(url: str, default_port: int, timeout: float = 0.5) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or default_port), timeout):
            return True
    except OSError:
        return False


def private_redis() -> str | None:
    """Start a Redis server of this test run's own (on a free port, no persistence, gone when this process
    ends) and answer its URL; None when there is no `redis-server` to start. Two suites side by side (CI beside
    a developer's `make test`) then never take each other's Celery messages or flush each other's keys."""
    import atexit
    import ctypes
    import shutil
    import signal
    import subprocess
    import time

    binary = shutil.which("redis-server")
    if binary is None:
        return None

    def die_with_us():  # the kernel stops the server if this process is killed without running atexit
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    for _ in range(5):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--databases", "16", "--loglevel", "warning"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_us)
        url = f"redis://127.0.0.1:{port}/0"
        for _ in range(200):  # a fresh server answers within milliseconds; 10 s covers a loaded machine
            if server.poll() is not None or answers(url, port, timeout=0.05):
                break
            time.sleep(0.05)
        if server.poll() is None and answers(url, port):
            atexit.register(server.kill)
            return url
        server.kill()  # the port was taken between the probe and the start: another one
    return None
