"""Which answers of an API server are worth another try, and trying again (pure: no Django, no client).

Transient, retried with back-off: no answer at all (connection refused or reset, a timeout), 408, 429 and every
5xx; and 401 or 403 within AUTH_WINDOW seconds after the server was last unreachable, since a kube-apiserver that
has just started answers 403 while its authorization caches fill (about 70 ms measured on v1.36). Permanent, never
retried: any other answer, 400, 404, 409 and 422 among them, and a 401/403 outside that window (a permission that
is really missing). A call is tried at most TRIES times, waiting between tries a random delay below BASE doubling
to CAP (full jitter), and never starting a try once BUDGET seconds have passed since the first: about 15 s of
waiting at most, inside the 60-s time limit of the tasks that dispatch and stop. Each retried answer is kept
(`Retries.retried`) for the workload's events.

Whether the server was unreachable is known from the tries of the call itself and from the cluster client, which
notes when a request of this process last got no answer (`unreachable_at`, on the same clock)."""

import random
import time
from collections.abc import Callable
from typing import TypeVar

from .interface import ClusterError

TRIES = 5
BASE, CAP = 0.5, 8.0
BUDGET = 20.0
AUTH_WINDOW = 30.0

T = TypeVar("T")


def transient(status: int | None, since_unreachable: float | None) -> bool:
    """Whether an answer (`status` None: none came) is worth another try; `since_unreachable` is how long ago the
    server last did not answer, None if not lately."""
    if status is None or status in (408, 429) or status >= 500:
        return True
    if status in (401, 403):
        return since_unreachable is not None and since_unreachable <= AUTH_WINDOW
    return False


def described(exc: ClusterError) -> str:
    """One retried answer, as the workload's events say it."""
    answer = "no answer" if exc.status is None else f"HTTP {exc.status}"
    return f"{answer} ({' '.join(exc.message.split())[:300]})"


class Retries:
    """Tries calls until each answers for good; `retried` lists every answer that was tried again."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random, tries: int = TRIES, base: float = BASE, cap: float = CAP,
                 budget: float = BUDGET, unreachable_at: Callable[[], float | None] = lambda: None):
        self.clock, self.sleep, self.rng = clock, sleep, rng
        self.tries, self.base, self.cap, self.budget = tries, base, cap, budget
        self.known_unreachable = unreachable_at
        self.unreachable_at: float | None = None
        self.retried: list[str] = []

    def fresh(self) -> "Retries":
        """Another call's tries, with the same clock, sleep and limits, and nothing retried yet."""
        return Retries(clock=self.clock, sleep=self.sleep, rng=self.rng, tries=self.tries, base=self.base,
                       cap=self.cap, budget=self.budget, unreachable_at=self.known_unreachable)

    def _since_unreachable(self) -> float | None:
        seen = [moment for moment in (self.unreachable_at, self.known_unreachable()) if moment is not None]
        return self.clock() - max(seen) if seen else None

    def call(self, action: Callable[[], T]) -> T:
        started = self.clock()
        for attempt in range(self.tries):
            try:
                return action()
            except ClusterError as exc:
                if exc.status is None:
                    self.unreachable_at = self.clock()
                last_try = attempt + 1 >= self.tries or self.clock() - started >= self.budget
                if last_try or not transient(exc.status, self._since_unreachable()):
                    raise
                self.retried.append(described(exc))
                self.sleep(self.rng() * min(self.cap, self.base * 2 ** attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def transient(self, exc: ClusterError) -> bool:
        """Whether the answer a call ended with was transient (its tries ran out) rather than permanent."""
        return transient(exc.status, self._since_unreachable())

    def summary(self) -> str:
        """"" when nothing was retried, else a sentence for the workload's events."""
        if not self.retried:
            return ""
        counted: dict[str, int] = {}
        for answer in self.retried:
            counted[answer] = counted.get(answer, 0) + 1
        listed = "; ".join(answer + (f" x{count}" if count > 1 else "") for answer, count in counted.items())
        return f"Retried {len(self.retried)} time{'' if len(self.retried) == 1 else 's'} after: {listed}."
