"""A directory in memory (tmpfs) for a test's SQLite files, where the machine has one.

A SQLite commit waits for the disk (fsync); a test about locking, concurrent writers or whole messages waits the
same way for every commit without proving anything more by it. On tmpfs, SQLite's locks, its WAL and the shared
memory beside the WAL work as on disk (they are POSIX locks and mmap, which tmpfs has); only the wait for the
disk is gone. Where there is no /dev/shm, the given fallback directory is used."""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MEMORY = Path("/dev/shm")


@contextmanager
def memory_directory(fallback: Path, prefix: str = "osmo-tests-") -> Iterator[Path]:
    """A new directory on tmpfs (removed afterwards), or `fallback` when the machine has none."""
    if not MEMORY.is_dir():
        yield fallback
        return
    directory = Path(tempfile.mkdtemp(prefix=prefix, dir=MEMORY))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
