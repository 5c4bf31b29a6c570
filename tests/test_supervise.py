"""The demo's supervisor (pools/management/supervise.py) with real child processes and an injected clock: a child
that exits is started again with a line saying so; one that exits within QUICK_S of each start QUICK_EXITS times
in a row is given up on; one that lived long enough before it exited is always started again. (The demo's own
processes, a worker killed under load: tests/test_demo_load.py.)"""

import subprocess
import sys

from pools.management.stopping import stop_children
from pools.management.supervise import QUICK_EXITS, QUICK_S, Supervisor

EXITS = [sys.executable, "-c", "print('flaky ready.'); raise SystemExit(3)"]
STAYS = [sys.executable, "-c", "import sys; print('steady ready.', flush=True); sys.stdin.read()"]


def test_a_child_that_exits_is_restarted_and_one_that_keeps_exiting_at_once_is_given_up(tmp_path):
    lines, now = [], [0.0]
    supervisor = Supervisor({"flaky": EXITS, "steady": STAYS},
                            lambda argv, **kwargs: subprocess.Popen(argv, stdin=subprocess.PIPE, **kwargs),
                            lines.append, clock=lambda: now[0])
    try:
        supervisor.start_all()
        assert supervisor.wait_up(120) == []
        steady = supervisor.processes["steady"].pid
        # Exits after a long life: started again, whatever the count before.
        for _ in range(QUICK_EXITS + 1):
            supervisor.processes["flaky"].wait()
            now[0] += QUICK_S + 1
            assert supervisor.check()
        assert sum("flaky (pid" in line and "exited with status 3" in line and "restarted it as pid" in line
                   for line in lines) == QUICK_EXITS + 1, lines
        # Exits at once, QUICK_EXITS times in a row: given up on, the others left running.
        for attempt in range(QUICK_EXITS):
            supervisor.processes["flaky"].wait()
            now[0] += 1
            assert supervisor.check() == (attempt < QUICK_EXITS - 1)
        assert supervisor.given_up == ["flaky"]
        assert "not restarting it" in lines[-1]
        assert supervisor.processes["steady"].pid == steady and supervisor.processes["steady"].poll() is None
        assert "steady ready." in lines
    finally:
        stop_children(supervisor.processes, 15, lines.append)
