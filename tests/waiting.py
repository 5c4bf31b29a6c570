"""Polling for what another process or thread does: the tests' one `until`."""

import time
from collections.abc import Callable
from typing import Any

import pytest


def until(condition: Callable[[], Any], what: str, seconds: float = 120, every: float = 0.1,
          detail: Callable[[], Any] | None = None):
    """Polls `condition` until it answers something true, and returns that; fails naming `what` (and
    `detail()`, when given) after `seconds`, a generous deadline that is only there against hanging forever."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    pytest.fail(f"waited {seconds} s for {what}" + (f"; {detail()}" if detail else ""))
