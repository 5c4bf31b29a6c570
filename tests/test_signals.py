"""The foreground commands stopped as an operator or a supervisor stops them (Ctrl-C, `kill PID`, a closed
terminal): each is started as a real process against the test database, signalled, and must end with every process
it started gone and its lease or lock released, so that a restart right after takes it at once. And `sync NAME
--once` beside a sync that holds the lease: it asks that sync for a full list and waits for it, never failing."""

import contextlib
import os
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import OperationalError, transaction
from django.utils import timezone

from pools.models import Backend
from scheduling.models import AdmissionState
from tests.faults.conftest import busy_cluster
from tests.processes import descendants, running
from tests.support.children import child_env
from tests.support.ports import free_port
from tests.waiting import until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
ROOT = Path(settings.BASE_DIR)


class Command:
    """`manage.py ARGS` as its own process (a session of its own, as a terminal's job is), output to a file."""

    def __init__(self, tmp_path: Path, *args: str, argv: list[str] | None = None, **env: str):
        self.log = tmp_path / f"{args[0] if args else 'make'}-{free_port()}.log"
        self.process = subprocess.Popen(
            argv or [sys.executable, "manage.py", *args], cwd=ROOT,
            env=child_env(PYTHONUNBUFFERED="1", OSMO_DATA_DIR=str(tmp_path / "data"), **env),
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)

    def output(self) -> str:
        return self.log.read_text()

    def signal(self, number: int) -> tuple[int, set[int]]:
        """Sends `number`; returns the exit status and the processes that were below it just before."""
        below = descendants(self.process.pid)
        self.process.send_signal(number)
        return self.wait(), below

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"{self.process.args} did not end after the signal: {self.output()[-3000:]}")

    def kill(self, others: set[int] = frozenset()) -> None:
        """The test's own clean-up, whatever happened: its session, and `others` (processes seen below it, which
        may be in sessions of their own)."""
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def lease(name: str) -> str:
    return Backend.objects.values_list("sync_lease_owner", flat=True).get(name=name)


@pytest.fixture
def prod(standin, tmp_path, defaults):
    call_command("backend", "add", "prod", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    busy_cluster(standin)
    return Backend.objects.get(name="prod")


def watching(tmp_path, name: str = "prod") -> Command:
    """`sync NAME`, once it holds the lease and has listed (it then follows the watches)."""
    sync = Command(tmp_path, "sync", name)
    until(lambda: sync.process.poll() is not None or (
        f":{sync.process.pid}:" in lease(name) and Backend.objects.get(name=name).listed_at),
        "the sync to take the lease and list", detail=sync.output)
    assert sync.process.poll() is None, sync.output()
    return sync


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_watching_sync_stopped_by_a_signal_releases_its_lease_and_a_restart_takes_it_at_once(
        prod, tmp_path, number):
    first = watching(tmp_path)
    try:
        status, below = first.signal(number)
    finally:
        first.kill()
    assert status == 0, first.output()
    assert "Stopped." in first.output()
    assert lease("prod") == ""  # released on the way out, not left to expire
    assert not [pid for pid in below if running(pid)]

    again = watching(tmp_path)
    try:
        assert "another sync holds the lease" not in again.output()
    finally:
        again.signal(signal.SIGTERM)
        again.kill()
    assert lease("prod") == ""


def test_sync_once_beside_a_running_sync_asks_it_for_a_full_list_and_waits_for_it(prod, tmp_path, standin):
    from tests.kube_objects import make_node

    sync = watching(tmp_path)
    try:
        asked = timezone.now()
        # Added where only a full list or the watch would bring it; the answer is the running sync's full list.
        standin.add_nodes([make_node("gpu-c", gpus=8)])
        once = subprocess.run([sys.executable, "manage.py", "sync", "prod", "--once"], cwd=ROOT,
                              env=child_env(OSMO_DATA_DIR=str(tmp_path / "data")), capture_output=True, text=True,
                              timeout=600)
        assert once.returncode == 0, once.stderr
        assert f"prod: a sync is running ({lease('prod')}); asked it for a full list" in once.stdout
        assert "prod: listed in full by the running sync" in once.stdout, once.stdout
        assert "another sync holds the lease" not in once.stdout + once.stderr
        assert Backend.objects.get(name="prod").listed_at >= asked
        assert "asked for a full list" in sync.output()  # the running sync's own account of it
        assert sync.process.poll() is None  # and it goes on watching
    finally:
        sync.signal(signal.SIGTERM)
        sync.kill()
    assert lease("prod") == ""


def test_sync_once_beside_a_sync_that_does_not_list_says_so_and_exits_0(prod, capsys):
    # A holder that never answers the ask: another host's sync, stuck (by hand: no process here can be it).
    Backend.objects.filter(name="prod").update(sync_lease_owner="elsewhere:1:stuck",
                                               sync_lease_expires_at=timezone.now() + timedelta(hours=1))
    call_command("sync", "prod", "--once", "--wait", "0.5")
    out = capsys.readouterr().out
    assert "prod: a sync is running (elsewhere:1:stuck); asked it for a full list" in out
    assert "prod: the running sync (elsewhere:1:stuck) has not listed in full within 0.5 s" in out
    assert lease("prod") == "elsewhere:1:stuck"  # not ours to take


def test_sync_once_refuses_a_wait_that_is_not_a_number_of_seconds(prod):
    result = subprocess.run([sys.executable, "manage.py", "sync", "prod", "--once", "--wait", "-1"], cwd=ROOT,
                            env=child_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.strip() == "CommandError: --wait must be a number of seconds from 0 to 86400 (not -1)"


def admission_lock_free() -> bool:
    try:
        with transaction.atomic():
            list(AdmissionState.objects.select_for_update(nowait=True).filter(pk=1))
    except OperationalError:
        return False
    return True


def test_schedule_stopped_by_sigterm_ends_cleanly_and_a_restart_cycles_at_once(world, tmp_path):
    schedule = Command(tmp_path, "schedule", "--interval", "0.5")
    try:
        until(lambda: schedule.process.poll() is not None or schedule.output().count("Cycle:") >= 2,
              "two admission cycles", detail=schedule.output)
        status, below = schedule.signal(signal.SIGTERM)
    finally:
        schedule.kill()
    assert status == 0, schedule.output()
    assert schedule.output().rstrip().endswith("Stopped.")
    assert not [pid for pid in below if running(pid)]
    assert admission_lock_free()
    again = subprocess.run([sys.executable, "manage.py", "schedule", "--once"], cwd=ROOT, env=child_env(),
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and again.stdout.startswith("Cycle:"), again.stdout + again.stderr


def served_pids(output: str) -> list[int]:
    line = next(line for line in output.splitlines() if line.startswith("Serving:"))
    return [int(part.split(")")[0]) for part in line.split("pid ")[1:]]


def make_demo(tmp_path, port: int, **env: str) -> Command:
    """`make demo` as the README runs it, less the install step (`-o install`: this interpreter's environment is
    the one installed), on a free port. Beat starts its first sync round as it starts (OSMO_SYNC_AT_START), not one
    OSMO_SYNC_INTERVAL later, and the round lasts that interval less 5 s (25 s by default): the test stops the demo
    in the middle of it as soon as the worker holds the lease. `env` overrides."""
    venv = Path(sys.executable).parent.parent
    return Command(tmp_path, argv=["make", "-o", "install", "demo", f"VENV={venv}", f"PORT={port}"],
                   **{"OSMO_DEMO_TRICKLE": "0", **env})


@pytest.mark.parametrize("how", ["kill make", "close the terminal"])
def test_make_demo_stopped_leaves_no_process_and_no_lease(tmp_path, how):
    port = free_port()
    demo = make_demo(tmp_path, port)
    below: set[int] = set()
    try:
        until(lambda: demo.process.poll() is not None or "Serving:" in demo.output(), "the demo to serve",
              seconds=600, detail=lambda: demo.output()[-3000:])
        assert demo.process.poll() is None, demo.output()[-3000:]
        pids = served_pids(demo.output())
        # Stopped in the middle of a sync round of the worker's (beat starts one per backend as it starts, then
        # every 30 s).
        worker = pids[1]
        # 300 s, not the usual 120, against hanging only: on a loaded machine (two suites beside the demo's five
        # processes) CI once saw no round within 120 s, and the lines of the sync worker then say why.
        # A demo that stopped (its site could not take the port, say) ends the wait at once and says why.
        until(lambda: demo.process.poll() is not None
              or Backend.objects.filter(sync_lease_owner__contains=f":{worker}:").exists(),
              "a sync round in the worker", seconds=300, detail=lambda: "\n".join(
                  line for line in demo.output().splitlines() if "sync" in line.lower())[-4000:])
        assert demo.process.poll() is None, demo.output()[-3000:]
        below = descendants(demo.process.pid)
        assert set(pids) <= below
        if how == "kill make":
            demo.process.send_signal(signal.SIGTERM)  # make passes it on to `manage.py demo`
        else:
            os.killpg(demo.process.pid, signal.SIGHUP)  # what the terminal sends its foreground job
        demo.wait()
    finally:
        demo.kill(below)
    assert "Stopped." in demo.output(), demo.output()[-3000:]
    assert not [pid for pid in below if running(pid)], demo.output()[-3000:]
    assert not Backend.objects.exclude(sync_lease_owner="").exists()
