"""The demo's processes kept up (`manage.py demo`): a child that exits is started again, with a line saying so,
instead of the demo stopping everything (a worker killed by one bad message took the whole demo down: issue 44).
A child that keeps exiting soon after each start (its port taken, a broken setting) is given up on after
QUICK_EXITS such starts in a row, and the demo stops, saying which.

Each child's output is passed on line by line, and a child counts as up once it prints the line that says so (the
site's "Quit the server with", a Celery worker's "ready."), so that the demo can print its admin login after every
banner instead of above them."""

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

QUICK_EXITS = 3  # starts in a row that each ended within QUICK_S: the child is given up on
QUICK_S = 30.0
UP_LINES = ("Quit the server with", " ready.", "beat: Starting")  # runserver, a Celery worker, Celery beat


@dataclass
class Child:
    name: str
    argv: list[str]
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    quick_exits: int = 0
    up: threading.Event = field(default_factory=threading.Event)


class Supervisor:
    """Starts `commands` ({name: argv}) with `popen` (subprocess.Popen's arguments less stdout/stderr), passes
    their output to `write`, and restarts those that exit. `clock` gives seconds (time.monotonic)."""

    def __init__(self, commands: dict[str, list[str]], popen: Callable[..., subprocess.Popen],
                 write: Callable[[str], None], clock: Callable[[], float] = time.monotonic):
        self.children = {name: Child(name, argv) for name, argv in commands.items()}
        self.popen, self.write, self.clock = popen, write, clock
        self.given_up: list[str] = []

    @property
    def processes(self) -> dict[str, subprocess.Popen]:
        return {name: child.process for name, child in self.children.items() if child.process}

    def start(self, child: Child) -> None:
        child.up.clear()
        child.process = self.popen(child.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", bufsize=1)
        child.started_at = self.clock()
        threading.Thread(target=self._relay, args=(child, child.process), daemon=True,
                         name=f"relay-{child.name}").start()

    def _relay(self, child: Child, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.write(line.rstrip("\n"))
            if not child.up.is_set() and any(mark in line for mark in UP_LINES):
                child.up.set()
        process.stdout.close()

    def start_all(self) -> None:
        for child in self.children.values():
            self.start(child)

    def wait_up(self, seconds: float) -> list[str]:
        """Waits until every child has said it is up, at most `seconds` in all; the names of those that have not."""
        deadline = self.clock() + seconds
        for child in self.children.values():
            child.up.wait(max(0.0, deadline - self.clock()))
        return [name for name, child in self.children.items() if not child.up.is_set()]

    def check(self) -> bool:
        """Restarts each child that has exited, with a line saying so; False once one has exited QUICK_EXITS times
        in a row within QUICK_S of its start (self.given_up names it), the others left running for the caller
        to stop."""
        for child in self.children.values():
            status = child.process.poll() if child.process else None
            if status is None:
                continue
            lived = self.clock() - child.started_at
            child.quick_exits = child.quick_exits + 1 if lived < QUICK_S else 0
            if child.quick_exits >= QUICK_EXITS:
                self.given_up.append(child.name)
                self.write(f"{child.name} (pid {child.process.pid}) exited with status {status}, {QUICK_EXITS} "
                           f"times within {QUICK_S:g} s of its start; not restarting it.")
                return False
            old = child.process.pid
            self.start(child)
            self.write(f"{child.name} (pid {old}) exited with status {status} after {lived:.0f} s; "
                       f"restarted it as pid {child.process.pid}.")
        return True
