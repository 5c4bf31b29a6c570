"""`make demo` holds up (issue 44): the demo's broker (kombu's SQLAlchemy transport on SQLite,
osmo_site/sqlite_broker.py) under load from many writers and readers at once, and the demo's own processes kept up.

The issue asks for ten minutes of load. What broke in those minutes was one message read half-written by a second
reader: a matter of how many messages cross the broker while several processes read it, not of how long. So the
test counts messages instead of minutes: with beat's intervals shortened (a trickle round every second, a cycle
every second, a sync every 5 s), it sends bursts of real tasks (trickle rounds that submit, cycles that admit,
syncs, sweeps, and stops for the workloads it cancels) from four threads at once, more at a time than each worker
has threads, so every worker is busy; and then requires each of them received exactly once and finished, with no
worker lost and the demo still serving. Then it kills a worker and sees the demo start it again, saying so, and the
new one work."""

import os
import re
import signal
import threading
from itertools import cycle

import pytest

from pools import tasks as pool_tasks
from scheduling import tasks
from scheduling.models import ALIVE, Workload
from scheduling.submit import submission
from tests.celery_app import broker_at
from tests.processes import running
from tests.support.ports import free_port
from tests.test_signals import Command, make_demo, served_pids
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 6
SENDERS = 4
FAST = {"OSMO_DEMO_TRICKLE": "1", "OSMO_ADMISSION_INTERVAL": "1", "OSMO_LIFECYCLE_INTERVAL": "1",
        "OSMO_SYNC_INTERVAL": "6"}
TRANSPORT = "osmo_site.sqlite_broker:Transport"


def finished(output: str, task_id: str) -> int:
    return len(re.findall(rf"\[{task_id}\] (?:succeeded|raised|retry)", output))


def unfinished(output: str, sent: list[str]) -> list[str]:
    """The tasks of `sent` with no line saying they finished: one pass over the output, not one per task, as it is
    polled while the demo works (the verdicts below count each task's lines)."""
    done = set(re.findall(r"\[([0-9a-f-]{36})\] (?:succeeded|raised|retry)", output))
    return [task_id for task_id in sent if task_id not in done]


def test_the_demo_under_load_loses_no_message_and_restarts_a_killed_worker(tmp_path):
    port = free_port()
    demo = make_demo(tmp_path, port, **FAST)
    pids: list[int] = []
    again = None
    try:
        until(lambda: demo.process.poll() is not None or "Admin login:" in demo.output(), "the demo's login line",
              seconds=600, detail=lambda: demo.output()[-3000:])
        assert demo.process.poll() is None, demo.output()[-3000:]
        pids = served_pids(demo.output())
        # The login comes last, below every banner: the workers' "ready." lines are above it.
        head, _, tail = demo.output().partition("Admin login:")
        assert head.count(" ready.") == 3, head[-3000:]
        assert tail.split("\n")[0].split("(")[1].startswith(f"http://127.0.0.1:{port}/admin/;"), tail[:300]
        # `demo --no-serve` in another terminal, meanwhile: the login again, with the port the demo serves on.
        again = Command(tmp_path, "demo", "--no-serve")

        sent: list[str] = []
        lock = threading.Lock()
        broker = f"sqlite:///{tmp_path / 'data' / 'broker.sqlite3'}"
        with broker_at(broker, TRANSPORT):
            def send(calls) -> None:
                for task, args in calls:
                    result = task.apply_async(args=args)
                    with lock:
                        sent.append(result.id)

            burst = cycle([(tasks.admission_cycle, []), (tasks.demo_trickle, []), (tasks.admission_cycle, []),
                           (tasks.lifecycle_sweep, [])])
            for _ in range(ROUNDS):
                calls = [next(burst) for _ in range(2 * SENDERS)] + [(pool_tasks.sync_backends, [])]
                # Cancels as a researcher's would come: the stop of each alive workload sent with the rest.
                alive = list(Workload.objects.filter(status__in=ALIVE, stop_status="").order_by("?")[:3])
                for workload in alive:
                    submission.cancel(None, workload, "load test", operator="load-test")
                if alive:
                    calls.append((tasks.stop_workloads, [[str(workload.pk) for workload in alive]]))
                threads = [threading.Thread(target=send, args=(calls[index::SENDERS],)) for index in range(SENDERS)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            assert len(sent) >= ROUNDS * 2 * SENDERS
            until(lambda: not unfinished(demo.output(), sent), f"the {len(sent)} tasks sent to finish", seconds=600,
                  detail=lambda: unfinished(demo.output(), sent)[:10])
        output = demo.output()
        assert all(len(re.findall(rf"\[{task_id}\] received", output)) == 1 for task_id in sent)
        assert all(finished(output, task_id) == 1 for task_id in sent)
        assert "Unrecoverable error" not in output and "JSONDecodeError" not in output, output[-3000:]
        assert " exited with status " not in output, output[-3000:]
        assert demo.process.poll() is None
        assert Workload.objects.exclude(submitter__username="admin").exists()
        assert again.wait() == 0, again.output()[-3000:]
        assert f"(http://127.0.0.1:{port}/admin/;" in again.output().splitlines()[-1], again.output()[-3000:]

        # A worker killed: the demo says so, starts it again, and the new one takes work.
        names = ["web", "worker-sync", "worker-admission", "worker-lifecycle", "beat"]
        killed = dict(zip(names, pids, strict=True))["worker-admission"]
        os.kill(killed, signal.SIGKILL)
        line = until(lambda: re.search(rf"worker-admission \(pid {killed}\) exited with status -9 after \d+ s; "
                                       r"restarted it as pid (\d+)\.", demo.output()),
                     "the restart line", detail=lambda: demo.output()[-3000:])
        pids.append(int(line.group(1)))
        with broker_at(broker, TRANSPORT):
            cycle_id = tasks.admission_cycle.apply_async().id
        until(lambda: f"[{cycle_id}] succeeded" in demo.output(),
              "a cycle in the restarted worker", seconds=300, detail=lambda: demo.output()[-3000:])
        assert demo.process.poll() is None and running(pids[-1])
        demo.process.send_signal(signal.SIGTERM)
        demo.wait()
    finally:
        demo.kill(set(pids))
        if again is not None:
            again.kill()
    assert "Stopped." in demo.output()
