"""SIGTERM and SIGHUP (`kill PID`, a closed terminal, a supervisor stopping the unit) end a foreground command as
Ctrl-C does, with KeyboardInterrupt, so that its `finally` blocks run: a sync's lease released, a cycle's
transaction rolled back, child processes stopped. Python's default for SIGTERM is to die at once, which left a
sync's lease held until it expired (90 s) and `make demo`'s server, worker and beat running without a parent."""

import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def interrupt_on_stop_signals() -> Iterator[None]:
    """Within: the first of SIGINT, SIGTERM or SIGHUP raises KeyboardInterrupt in the main thread; later ones are
    ignored, so that a second Ctrl-C or a supervisor's repeated TERM does not cut short the clean-up the first one
    began. The handlers before are put back after (a command called in-process, by a test, leaves none behind).
    Off the main thread, where Python cannot set handlers, it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, _frame):
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    before = {number: signal.signal(number, interrupt) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def stop_children(children: dict[str, subprocess.Popen], grace: float, say: Callable[[str], None]) -> None:
    """TERM to each child (each the leader of a session of its own, start_new_session=True), so that gunicorn and
    Celery stop their own workers; KILL to a child that has not stopped within `grace` seconds; then KILL to
    whatever is left in each child's process group, so that nothing outlives the command."""
    for child in children.values():
        if child.poll() is None:
            child.terminate()
    for name, child in children.items():
        try:
            child.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            say(f"{name} did not stop within {grace:g} s; killing it")
        with contextlib.suppress(ProcessLookupError):  # the group ended with its leader, as it should
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
