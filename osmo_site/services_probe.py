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
