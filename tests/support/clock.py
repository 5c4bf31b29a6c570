"""The tests' one injected clock: time that moves only when the test moves it, so that no test depends on how fast
a loaded machine runs."""

from datetime import UTC, datetime, timedelta


class Clock:
    """`seconds` since an arbitrary origin, read as a number (`clock()` or `clock.monotonic()`: a deadline clock) or
    as an aware datetime (`clock.now()`: `start` plus the seconds, for dates compared with stored ones). It moves by
    `advance(seconds)` or `at(seconds)`, and by `step` at each numeric reading when given (a loop that reads the clock
    sees time pass)."""

    def __init__(self, seconds: float = 0.0, *, step: float = 0.0, start: datetime | None = None):
        self.seconds = seconds
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
        self.seconds = seconds
