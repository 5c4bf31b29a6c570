"""Reading a timestamped log (pure: no Django). The cluster is asked for `timestamps=true`, so every line starts
with its RFC 3339 time (nanoseconds) and a space; we strip it before a reader sees the line, and use it to resume.

A resume token names the last line sent: its time and how many lines with that very time were sent (lines may share
a time). The API server's `sinceTime` keeps only whole seconds, so a resumed read starts at the token's second and
skips what the token says was sent. Tokens are `<time>~<count>`, e.g. `2026-11-27T18:00:00.123456789Z~1`."""

import re
from dataclasses import dataclass

STAMP = re.compile(rb"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z) ")
TOKEN = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z)~(\d{1,9})$", re.ASCII)
# The last line of a followed log whose window ended before the container did: the client resumes from the token.
RESUME_PREFIX = "### osmo: follow window ended; resume with since="


class BadToken(ValueError):
    pass


def split(line: bytes) -> tuple[str, bytes]:
    """(the line's time, the line without it); "" when the line has no time (a line the kubelet split)."""
    found = STAMP.match(line)
    if not found:
        return "", line
    return found.group(1).decode(), line[found.end():]


def _sortable(stamp: str) -> str:
    """RFC 3339 times with their fractions padded to nanoseconds compare as strings."""
    head, _, fraction = stamp.rstrip("Z").partition(".")
    return f"{head}.{fraction.ljust(9, '0')}Z"


@dataclass(frozen=True)
class Position:
    stamp: str = ""
    count: int = 0

    @property
    def token(self) -> str:
        return f"{self.stamp}~{self.count}" if self.stamp else ""

    @property
    def since_time(self) -> str | None:
        """The whole second to ask the API server from (it drops fractions)."""
        return f"{self.stamp[:19]}Z" if self.stamp else None

    def after(self, stamp: str) -> "Position":
        if not stamp:
            return self
        return Position(stamp, self.count + 1 if stamp == self.stamp else 1)


def parse(token: str) -> Position:
    if not token:
        return Position()
    found = TOKEN.match(token)
    if not found:
        raise BadToken("since: expected the resume token a log answer gave (`<RFC 3339 time>~<count>`)")
    return Position(found.group(1), int(found.group(2)))


class Resumer:
    """Drops the lines a position says were sent (from a read that starts at its second), and tracks the new
    position as lines pass through `take`."""

    def __init__(self, start: Position):
        self.start = start
        self.position = start
        self._seen_at_stamp = 0

    def take(self, line: bytes) -> bytes | None:
        """The line without its time, or None when it was already sent."""
        stamp, text = split(line)
        if self.start.stamp and stamp:
            mine, theirs = _sortable(stamp), _sortable(self.start.stamp)
            if mine < theirs:
                return None
            if mine == theirs:
                self._seen_at_stamp += 1
                if self._seen_at_stamp <= self.start.count:
                    return None
        self.position = self.position.after(stamp)
        return text


def lines_of(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def strip(data: bytes, start: Position | None = None) -> tuple[bytes, Position]:
    """A whole read: the lines after `start`, without their times, and the position after the last one."""
    resumer = Resumer(start or Position())
    kept = [text for line in lines_of(data) if (text := resumer.take(line)) is not None]
    return b"".join(kept), resumer.position


def last_bytes(data: bytes, most: int) -> tuple[bytes, bool]:
    """The end of `data` within `most` bytes, cut at a line start; True when something was dropped."""
    if len(data) <= most:
        return data, False
    tail = data[-most:]
    cut = tail.find(b"\n")
    return (tail[cut + 1:] if 0 <= cut < len(tail) - 1 else tail), True


def keep_end(data: bytes, most: int) -> tuple[bytes, bool]:
    """The last whole lines of a timestamped log whose text (times not counted) fits in `most` bytes; True when
    something was dropped. A single line longer than `most` keeps its end."""
    lines = lines_of(data)
    kept: list[bytes] = []
    size = 0
    for line in reversed(lines):
        stamp, text = split(line)
        if size + len(text) > most:
            if not kept:
                kept.append((stamp.encode() + b" " if stamp else b"") + text[len(text) - most:])
            break
        kept.append(line)
        size += len(text)
    return b"".join(reversed(kept)), len(kept) < len(lines)


def tail_lines(data: bytes, count: int) -> bytes:
    return b"".join(lines_of(data)[-count:]) if count > 0 else b""
