"""Printing a workload's log at the command line (`workload logs`, gpuctl's `logs`): one read, or, with `-f`, a
follow that goes on across follow windows by itself, resuming from each window's marker (and from the archive when
the pod went meanwhile), until the container ends."""

from collections.abc import Callable

from pools.engine import ConfigError
from scheduling.decisions import log_lines
from scheduling.models import Workload
from scheduling.run import logs

MARKER = log_lines.RESUME_PREFIX.encode()


def add_log_arguments(parser) -> None:
    parser.add_argument("-f", "--follow", action="store_true", help="Print new lines as they are written.")
    parser.add_argument("--replica", type=int, default=0, help="The replica, from 0 (default 0).")
    parser.add_argument("--attempt", type=int, help="The attempt, from 1 (default: the current one).")
    parser.add_argument("--tail", type=int, help="Only the last N lines.")
    parser.add_argument("--container", default="", help="Default: the user container.")
    parser.add_argument("--previous", action="store_true", help="The container's previous run (live pods only).")


def print_log(write: Callable[[str], None], workload: Workload, *, follow=False, replica=0, attempt=None, tail=None,
              container="", previous=False, windows: int | None = None) -> str:
    """Writes the log; answers its source ("live" or "archive"). `windows` bounds the follow windows (tests)."""
    if replica < 0 or (attempt is not None and attempt < 1) or (tail is not None and tail < 0):
        raise ConfigError("--replica and --tail are 0 or more, --attempt 1 or more")
    try:
        source = logs.choose(workload, attempt=attempt, replica=replica, container=container)
        if not follow or previous:
            found = logs.read(source, tail=tail, previous=previous)
            write(found.text.decode("utf-8", "replace"))
            return found.source.kind
        since = ""
        while True:
            resume = None
            for chunk in logs.follow(source, tail=None if since else tail, since=since):
                if chunk.startswith(MARKER):
                    resume = chunk[len(MARKER):].strip().decode()
                    continue
                write(chunk.decode("utf-8", "replace"))
            if resume is None or source.kind == logs.ARCHIVE:
                return source.kind
            if windows is not None:
                windows -= 1
                if windows <= 0:
                    return source.kind
            since = resume or since
            source = logs.choose(workload, attempt=source.replica.attempt, replica=replica, container=container)
    except logs.LogUnavailable as exc:
        raise ConfigError(exc.message) from None
