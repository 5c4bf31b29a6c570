"""Benchmark: how good the start estimates are (issue 26 point 4), over a replay of the demo's workload stream.

Usage, from the project root (about 5 minutes on 2 cores with the defaults):

    .venv/bin/python benchmarks/estimates.py [--minutes 120] [--step 30] [--seed 26] [--keep]

Database: PostgreSQL, a scratch database `osmo_bench_estimates` on the server of DATABASE_URL if set (else
postgres://postgres@127.0.0.1:5432), dropped and recreated at start and dropped at the end (--keep leaves it).

The world is the demo's (`pools.config.defaults.init_demo`: the pools training, simulation, inference and dev on
the simulated cluster of the `default` backend, its departments and projects) with a superuser `admin`; the KAI
lab of `manage.py demo` is left out (KAI, not our admission, decides when its work starts). The clock is the
simulated cluster's, moved by this script (no wall clock anywhere): every --step simulated seconds, as beat and the
workers would, in the order of tests/scheduling/test_demo.py's SimulatedTime:
  the demo's trickle (`scheduling.demo.trickle`, --seed: its submissions and the reclaim scene), stamped at the
  simulated moment; an admission cycle (`run_cycle(now)`); the lifecycle sweep with dispatch (`sweeps.sweep(now,
  act=True)`: Jobs created on the simulated cluster, which runs each for one to ten minutes while its own fleet's
  pods come and go); then the clock moves on, the sync reads the cluster (`BackendSync.run(seconds=0)`) and the
  follower (`follow.observe`) marks what started and finished.
Each workload's estimate is recorded at the first cycle that numbers it in a queue (each attempt's: one queued again
is estimated again) (`scheduling.run.estimates.
forecasts`, the code the API and pages call), beside the baseline "position x median run time" (its first numbered
pool's position times the median run time of that pool's last 50 finished workloads, also read then), and the naive
"unknown". When the replay ends, each recorded wait that ended has its actual start (the workload's first RUNNING
event after the estimate).

Printed: the workloads recorded and started; for each method, how many it estimated and the median absolute error
(minutes) over those, and over the workloads both ours and the baseline estimated (the fair comparison), with the
ratio ours / baseline; "unknown" estimates none (its error has no figure; it is the count to beat).
"""

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py

bench.BENCH_DB = "osmo_bench_estimates"
SCRATCH = Path(tempfile.mkdtemp(prefix="osmo-bench-estimates-"))
# The replay starts at the machine's time and runs ahead of it: the few reads of the wall clock outside the
# replay's reach (the trickle's reclaim scene, submission's pool status) then see backends synced recently.
START = float(int(time.time()))


def setup_django() -> None:
    sys.path.insert(0, str(bench.BASE_DIR))
    os.chdir(bench.BASE_DIR)
    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    os.environ["ALLOWED_HOSTS"] = "testserver"
    os.environ["OSMO_DATA_DIR"] = str(SCRATCH)
    os.environ["CELERY_BROKER_URL"] = "filesystem://"
    os.environ["OSMO_ADMISSION_ON_COMMIT"] = "0"  # this script runs every cycle, at its own clock
    os.environ["OSMO_ENGINE_RECONCILE_ON_COMMIT"] = "0"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB}; django {django.get_version()}, "
          f"python {sys.version.split()[0]}, DEBUG off")


class Replay:
    """The demo at a clock this script moves."""

    def __init__(self, seed: int):
        from django.contrib.auth import get_user_model

        from pools.config.defaults import init_demo
        from pools.models import Backend

        self.at = START
        self.rng = random.Random(seed)
        list(init_demo(author="bench"))
        get_user_model().objects.create_superuser("admin", password="bench-admin-pw")
        self.backends = list(Backend.objects.filter(kind=Backend.Kind.SIMULATED))
        self.sync()

    @property
    def now(self) -> datetime:
        return datetime.fromtimestamp(self.at, UTC)

    def cluster(self, backend):
        from pools.cluster.simulated import SimulatedCluster

        return SimulatedCluster(backend.name, SCRATCH / "sim", clock=lambda: self.at)

    def sync(self) -> None:
        from pools.fleet.sync import BackendSync
        from pools.models import Backend

        for backend in self.backends:
            BackendSync(backend, self.cluster(backend)).run(seconds=0)
        Backend.objects.update(last_sync_at=self.now)  # synced at the replay's moment, not the machine's

    def step(self, seconds: float, seen: dict) -> None:
        from scheduling import demo
        from scheduling.models import Workload
        from scheduling.run import follow, sweeps
        from scheduling.run.cycle import run_cycle

        now = self.now
        submitted = demo.trickle(self.rng, now).submitted
        Workload.objects.filter(pk__in=submitted).update(submitted_at=now, queued_at=now)
        run_cycle(now)
        record(seen, now)  # as the cycle numbered them, before dispatch
        sweeps.sweep(now, act=True, clusters=self.cluster)
        self.at += seconds
        self.sync()
        follow.observe(now=self.now)


def baseline(pool: str, position: int, now: datetime) -> float | None:
    """Position x the median run time of the pool's last 50 finished workloads (seconds from now), or None."""
    from scheduling.models import Workload
    from scheduling.run.estimates import RAN

    runs = [(f - s).total_seconds() for s, f in Workload.objects.filter(
        pool__name=pool, status__in=RAN, started_at__isnull=False, finished_at__lte=now).order_by(
        "-finished_at").values_list("started_at", "finished_at")[:50]]
    return position * statistics.median(runs) if len(runs) >= 3 else None


def record(seen: dict, now: datetime) -> None:
    """The estimates of the workloads numbered in a queue for the first time."""
    from scheduling.decisions.positions import first_position, positions_of
    from scheduling.models import Status, Workload
    from scheduling.run import estimates

    fresh = [w for w in Workload.objects.filter(status=Status.PENDING).exclude(positions={}).light()
             if f"{w.id}#{w.attempt}" not in seen]
    forecasts = estimates.forecasts(fresh, now)
    for workload in fresh:
        forecast = forecasts[str(workload.id)]
        pool, position = first_position(positions_of(workload.positions, workload.pools))
        ours = forecast.at - now.timestamp() if forecast.at is not None else None
        seen[f"{workload.id}#{workload.attempt}"] = {"at": now, "ours": ours, "basis": forecast.basis,
                                  "baseline": baseline(pool, position, now) if pool else None}


def median_error(errors: list[float]) -> str:
    return f"{statistics.median(errors) / 60:7.1f} min" if errors else "      -    "


def report(seen: dict, seconds: float) -> None:
    from scheduling.models import Status, WorkloadEvent

    # The first RUNNING after the estimate: `started_at` is the last attempt's, and a workload queued again (its
    # placement broken, or reclaimed) was estimated anew when it was numbered again.
    runs: dict[str, list[datetime]] = {}
    for workload_id, at in WorkloadEvent.objects.filter(status=Status.RUNNING).values_list("workload_id", "at"):
        runs.setdefault(str(workload_id), []).append(at)
    rows = []
    for workload_id, item in seen.items():
        actual = min((at for at in runs.get(workload_id.split("#")[0], []) if at >= item["at"]), default=None)
        if actual is not None:
            rows.append(((actual - item["at"]).total_seconds(), item["ours"], item["baseline"]))
    print(f"\nreplay: {seconds / 60:.0f} simulated minutes; {len(seen)} workloads waited in a queue, "
          f"{len(rows)} of them started before the end (the figures are over those)")
    if not rows:
        return
    ours = [abs(o - a) for a, o, _ in rows if o is not None]
    base = [abs(b - a) for a, _, b in rows if b is not None]
    both = [(abs(o - a), abs(b - a)) for a, o, b in rows if o is not None and b is not None]
    waits = [a for a, _, _ in rows]
    print(f"actual wait: median {statistics.median(waits) / 60:.1f} min, max {max(waits) / 60:.1f} min")
    print(f"{'method':<34}{'estimated':>12}{'median abs error':>20}")
    print(f"{'ours (scheduling.run.estimates)':<34}{len(ours):>6} / {len(rows):<4}{median_error(ours):>19}")
    print(f"{'position x median run time':<34}{len(base):>6} / {len(rows):<4}{median_error(base):>19}")
    print(f"{'naive: unknown':<34}{0:>6} / {len(rows):<4}{'no figure':>19}")
    if both:
        mine, theirs = statistics.median(e for e, _ in both), statistics.median(e for _, e in both)
        ratio = f"{mine / theirs:.2f}" if theirs else "-"
        print(f"on the {len(both)} both estimated: ours {mine / 60:.1f} min, baseline {theirs / 60:.1f} min, "
              f"ratio ours / baseline {ratio}")
    unknown = [item["basis"].split(":", 1)[1].strip()[:60] for item in seen.values() if item["ours"] is None]
    if unknown:
        counts: dict[str, int] = {}
        for words in unknown:
            counts[words] = counts.get(words, 0) + 1
        print(f"ours unknown for {len(unknown)} of {len(seen)}; most common reasons:")
        for words, count in sorted(counts.items(), key=lambda item: -item[1])[:4]:
            print(f"  {count:4d}  {words}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=120.0, help="Simulated minutes to replay.")
    parser.add_argument("--step", type=float, default=30.0, help="Simulated seconds between two rounds.")
    parser.add_argument("--seed", type=int, default=26)
    parser.add_argument("--keep", action="store_true", help="Leave the scratch database.")
    args = parser.parse_args()
    setup_django()
    try:
        replay = Replay(args.seed)
        seen: dict[str, dict] = {}
        began, steps = time.perf_counter(), int(args.minutes * 60 / args.step)
        for index in range(steps):
            replay.step(args.step, seen)
            if index % 20 == 19:
                print(f"  {index + 1}/{steps} rounds, {len(seen)} recorded, {time.perf_counter() - began:.0f} s")
        report(seen, steps * args.step)
    finally:
        if not args.keep:
            bench.drop_database()
        shutil.rmtree(SCRATCH, ignore_errors=True)


if __name__ == "__main__":
    main()

