"""The tests' one injected clock: time that moves only when the test moves it, so that no test depends on how fast
a loaded machine runs."""

from datetime import UTC, datetime, timedelta

# The tests' fixed instant, in seconds since the Unix epoch: where the `clock` fixture (tests/conftest.py) stands until
# a test moves it. On the 5-s tick of the simulated clusters, whose fleet it seeds.
T0 = 1_760_000_000.0
T0_AT = datetime.fromtimestamp(T0, UTC)  # 2025-10-09 08:53:20 UTC
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock:
    """`seconds` since an arbitrary origin, read as a number (`clock()` or `clock.monotonic()`: a deadline clock) or
    as an aware datetime (`clock.now()`: `start` plus the seconds, for dates compared with stored ones). It moves by
    `advance(seconds)` or `at(seconds)` (that many seconds after where it started), and by `step` at each numeric
    reading when given (a loop that reads the clock sees time pass). The `clock` fixture is `Clock(T0, start=EPOCH)`:
    its number and its datetime are the same instant."""

    def __init__(self, seconds: float = 0.0, *, step: float = 0.0, start: datetime | None = None):
        self.seconds = self.origin = seconds
        self.step = step
        self.start = start or datetime.now(UTC)

    def __call__(self) -> float:
        self.seconds += self.step
        return self.seconds

    monotonic = __call__

    def now(self) -> datetime:
        return self.start + timedelta(seconds=self.seconds)

    def advance(self, seconds: float) -> None:
        self.seconds += seconds

    def at(self, seconds: float) -> None:
        self.seconds = self.origin + seconds
