"""Benchmark: how soon work moves on the demo's load (issue 24 point 3): submit to admitted, admitted to Job
created, cancel to Job deleted, with the workers of `manage.py demo` (a worker per queue group: sync, admission,
lifecycle) against the baseline of one worker serving every queue (as the demo ran before: two threads, which
the two backends' 25-second sync rounds take every 30 s).

Usage, from the project root (about 6 minutes on 2 cores with the defaults):

    .venv/bin/python benchmarks/latency.py [--samples 16] [--shared-samples 3] [--gap 3] [--shared-concurrency 2]
        [--cap 60]

The world is the demo's, in a scratch data directory (removed at the end): SQLite and the filesystem broker, as
`make demo` runs them; `migrate`, `config init` and `demo --no-serve` (the demo pools, departments and projects,
both simulated clusters read once). Then, for each arrangement in turn, Celery beat (the demo's schedule:
a sync round per backend every OSMO_SYNC_INTERVAL = 30 s, each watching 25 s; the trickle of submissions every
15 s; an admission cycle every 5 s; the lifecycle sweep every 10 s) and the workers:
  queues:  `manage.py demo`'s workers (pools.management.workers: threads, concurrency 4, 2 and 1);
  shared:  one worker serving every queue, threads, --shared-concurrency (2).
After 35 s (every backend's first sync round has started), --samples workloads (--shared-samples for the
baseline, whose waits are long) are submitted one at a time,
--gap seconds apart (1 GPU, normal priority, in a project and pool where a dry run says it fits now), each as
the API submits it (scheduling.submit.submission.submit: its cycle is asked for on commit, debounced to one message a
second), and canceled once its Job exists (scheduling.submit.submission.cancel: a stop message on commit). Measured from
the rows the workers write (polled every 20 ms): submitted_at to admitted_at, admitted_at to dispatched_at (the
Job created), and the cancel's call to finished_at (the Job deleted, the workload FAILED_CANCELED). Printed: the
median and 95th percentile of each, per arrangement, and the ratio shared / queues of the medians. A wait past
--cap seconds gives that sample up and counts the cap for its figures (a lower bound; the baseline's backlog of
admission cycles can keep a workload waiting for minutes).
Goal: each under 3 s with the queues (the debounce is 1 s of it).
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SCRATCH = Path(tempfile.mkdtemp(prefix="osmo-bench-latency-"))
ENV = {key: value for key, value in os.environ.items()
       if not key.startswith(("OSMO_", "DJANGO", "CELERY_")) and key not in ("DATABASE_URL", "DEBUG")}
ENV.update(OSMO_DATA_DIR=str(SCRATCH), OSMO_ENV_FILE="", DJANGO_SETTINGS_MODULE="osmo_site.settings", DEBUG="0",
           SECRET_KEY="benchmark-only-secret-key-" + "x" * 30, ALLOWED_HOSTS="127.0.0.1", OSMO_DEMO_TRICKLE="15",
           LOG_LEVEL="WARNING")
WARMUP = 35.0
POLL = 0.02


def manage(*args: str) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=BASE_DIR, env=ENV, check=True,
                   stdout=subprocess.DEVNULL)


def setup_django() -> None:
    os.environ.clear()
    os.environ.update(ENV)
    sys.path.insert(0, str(BASE_DIR))
    import django

    django.setup()


def processes(arrangement: str, shared_concurrency: int) -> dict[str, list[str]]:
    from django.conf import settings

    from pools.management.workers import worker_commands

    celery = [sys.executable, "-m", "celery", "-A", "osmo_site"]
    chosen = {"beat": [*celery, "beat", "--loglevel", "WARNING", "--schedule",
                       str(SCRATCH / f"beat-{arrangement}")]}
    if arrangement == "queues":
        chosen.update(worker_commands("--loglevel", "WARNING", pool="threads"))
    else:
        every = sorted({queue for queues in settings.OSMO_WORKER_QUEUES.values() for queue in queues})
        chosen["worker"] = [*celery, "worker", "--loglevel", "WARNING", "-Q", ",".join(every), "-n", "shared@%h",
                            "--pool", "threads", "--concurrency", str(shared_concurrency)]
    return chosen


def start(arrangement: str, shared_concurrency: int) -> dict[str, subprocess.Popen]:
    started = {}
    for name, argv in processes(arrangement, shared_concurrency).items():
        log = (SCRATCH / f"{arrangement}-{name}.log").open("w")
        started[name] = subprocess.Popen(argv, cwd=BASE_DIR, env=ENV, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)
    return started


def stop(started: dict[str, subprocess.Popen]) -> None:
    for process in started.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started.values():
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    folder = SCRATCH / "broker" / "in"  # what the stopped workers left is not the next arrangement's
    for path in folder.iterdir() if folder.exists() else ():
        path.unlink()


class GaveUp(Exception):
    pass


def wait_for(what: str, condition, limit: float = 300.0, detail=None):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(POLL)
    raise GaveUp(f"gave up after {limit:.0f} s waiting for {what}" + (f": {detail()}" if detail else ""))


def fitting_request(admin) -> dict:
    from pools.models import Project
    from scheduling.submit import submission

    why = []
    for project in Project.objects.exclude(name=Project.DEFAULT_NAME).order_by("name"):
        data = {"name": "latency", "project": project.name, "priority": "normal",
                "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"],
                "resources": {"gpu": 1, "cpu": "4", "memory": "32Gi"}}
        try:
            preview = submission.submit(admin, data, dry_run=True).preview
        except Exception as exc:  # refused there: try the next project
            why.append(f"{project.name}: {exc}")
            continue
        if preview.get("would_admit"):
            return data
        why.append(f"{project.name}: {preview}")
    raise SystemExit("no demo project can take a 1-GPU workload now:\n" + "\n".join(why))


def sample(admin, data: dict, index: int, cap: float) -> tuple[float, float, float]:
    from scheduling.models import Status, Workload
    from scheduling.submit import submission

    workload = submission.submit(admin, {**data, "name": f"latency-{index:03d}"}).workload
    rows = Workload.objects.filter(pk=workload.pk)
    row = wait_for("the admission", limit=cap, condition=lambda: rows.filter(
        admitted_at__isnull=False, dispatched_at__isnull=False).first() or rows.exclude(
        status__in=[Status.PENDING, Status.ADMITTED]).first())
    if row.dispatched_at is None:
        raise SystemExit(f"{row.name} ended {row.status} before its Job was created: {row.reasons}")
    canceled_at = time.time()
    if not submission.cancel(admin, row, "benchmark"):
        raise SystemExit(f"{row.name} could not be canceled: {Workload.objects.get(pk=row.pk).status}")

    def detail() -> str:
        now = Workload.objects.get(pk=workload.pk)
        events = "\n".join(f"  {e.at:%H:%M:%S.%f} {e.status} {e.reason}: {e.message}" for e in now.events.all())
        return f"{now.name} {now.status} stop_status={now.stop_status!r}\n{events}"

    done = wait_for("the cancel", lambda: Workload.objects.filter(pk=workload.pk, finished_at__isnull=False).first(),
                    limit=cap, detail=detail)
    return ((row.admitted_at - row.submitted_at).total_seconds(), (row.dispatched_at - row.admitted_at).total_seconds(),
            done.finished_at.timestamp() - canceled_at)


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def measure(arrangement: str, args) -> dict[str, list[float]]:
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.get(username="admin")
    started = start(arrangement, args.shared_concurrency)
    try:
        time.sleep(WARMUP)
        for name, process in started.items():
            if process.poll() is not None:
                log = (SCRATCH / f"{arrangement}-{name}.log").read_text().splitlines()
                raise SystemExit(f"{arrangement}: {name} exited {process.returncode}:\n" + "\n".join(log[-30:]))
        data = fitting_request(admin)
        figures = {"submit to admitted": [], "admitted to Job created": [], "cancel to Job deleted": []}
        for index in range(args.samples if arrangement == "queues" else args.shared_samples):
            begun = time.monotonic()
            try:
                values = sample(admin, data, index, args.cap)
            except GaveUp as exc:  # counted as the cap for every figure not measured: a lower bound
                print(f"  {arrangement} sample {index}: {str(exc).splitlines()[0]}")
                values = (args.cap,) * 3
            for key, value in zip(figures, values, strict=True):
                figures[key].append(value)
            time.sleep(max(0.0, args.gap - (time.monotonic() - begun)))
        return figures
    except BaseException:
        for name in started:
            log = (SCRATCH / f"{arrangement}-{name}.log").read_text().splitlines()
            print(f"--- {arrangement}-{name}.log, last lines:\n" + "\n".join(log[-15:]))
        raise
    finally:
        stop(started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--shared-samples", type=int, default=3)
    parser.add_argument("--cap", type=float, default=60.0, help="seconds a wait may take; past it the cap counts")
    parser.add_argument("--gap", type=float, default=3.0, help="seconds from one submission to the next")
    parser.add_argument("--shared-concurrency", type=int, default=2)
    args = parser.parse_args()
    if min(args.samples, args.shared_samples, args.shared_concurrency) < 1:
        parser.error("--samples, --shared-samples and --shared-concurrency at least 1")
    try:
        manage("migrate", "--noinput")
        manage("config", "init")
        manage("demo", "--no-serve")
        setup_django()
        from pools.models import Backend, Node

        print(f"the demo's world in {SCRATCH}: {Backend.objects.count()} simulated backends, "
              f"{Node.objects.count()} nodes; SQLite and the filesystem broker; trickle every 15 s")
        results = {}
        for arrangement in ("queues", "shared"):
            results[arrangement] = measure(arrangement, args)
            print(f"\n{arrangement}: " + ("a worker per queue group (sync, admission, lifecycle)"
                                          if arrangement == "queues" else
                                          f"one worker for every queue, {args.shared_concurrency} threads"))
            for key, values in results[arrangement].items():
                print(f"  {key:<24} median {statistics.median(values):6.2f} s   p95 {p95(values):6.2f} s   "
                      f"max {max(values):6.2f} s   ({len(values)} samples)")
        print("\nratio shared / queues (medians): " + ", ".join(
            f"{key} {statistics.median(results['shared'][key]) / max(statistics.median(values), 1e-3):.1f}x"
            for key, values in results["queues"].items()))
    finally:
        shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()
