"""Benchmark: one GPU utilization round (scheduling.run.utilization.sample) at --workloads running workloads of
--replicas pods each, in one run on a scratch PostgreSQL database.

A round is two POSTs to Prometheus, both answers parsed and matched to the workloads' pods, and one upsert of a
row per workload. Prometheus here is a local HTTP server that answers every query with the same canned vector (a
figure for every pod), so the figure is our side's cost, not a Prometheus's. The baseline, measured in the same
run: the same two POSTs read with bare urllib and `json.loads`, and one bulk upsert of the same number of rows with
constant values (no matching, no idle decision).

Usage, from the project root:

    .venv/bin/python benchmarks/gpu_utilization.py [--workloads 2000] [--replicas 4] [--rounds 5] [--keep]

Database: `osmo_bench_gpu` on the server of DATABASE_URL (else postgres://postgres@127.0.0.1:5432), created at
start and dropped at the end (--keep leaves it).
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time
import urllib.request
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers
import submit as submit_bench  # benchmarks/submit.py: its world (a training pool, project vision)

BENCH_DB = "osmo_bench_gpu"
BASE_DIR = Path(__file__).resolve().parent.parent
NAMESPACE = "osmo-bench"


def canned_server(body: bytes) -> tuple[ThreadingHTTPServer, str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def running_workloads(count: int, replicas: int) -> list[tuple[str, str]]:
    """`count` RUNNING workloads with their ManagedJob rows; returns every pod's (namespace, name)."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from pools.models import ManagedJob, Pool, Project
    from scheduling.models import Status, Workload

    now = timezone.now()
    pool, project = Pool.objects.get(name="training"), Project.objects.get(name="vision")
    user = get_user_model().objects.get(username="researcher")
    workloads = Workload.objects.bulk_create(Workload(
        name=f"train-{i}", project=project, project_name="vision", submitter=user, submitter_name=user.username,
        request={}, gpu=8, replicas=replicas, pools=["training"], pool=pool, pool_name="training", platform="h100",
        status=Status.RUNNING, job_name=f"train-{i}-a1", namespace=NAMESPACE, submitted_at=now - timedelta(hours=3),
        admitted_at=now - timedelta(hours=3), started_at=now - timedelta(hours=2)) for i in range(count))
    pods = []
    jobs = []
    for workload in workloads:
        names = [f"{workload.job_name}-{r}-x9z" for r in range(replicas)]
        pods += [(NAMESPACE, name) for name in names]
        jobs.append(ManagedJob(backend_id=pool.backend_id, namespace=NAMESPACE, name=workload.job_name,
                               workload=str(workload.id), attempt=1, updated_at=now,
                               pods={name: {"node": "dgx-00000", "phase": "Running"} for name in names}))
    ManagedJob.objects.bulk_create(jobs, batch_size=2000)
    return pods


def baseline_round(url: str, workload_ids: list, now) -> None:
    from scheduling.models import WorkloadUtilization

    for _ in range(2):
        request = urllib.request.Request(url + "/api/v1/query", data=b"query=x", method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            json.loads(answer.read())
    WorkloadUtilization.objects.bulk_create(
        [WorkloadUtilization(workload_id=pk, measured_at=now, average=50.0, peak=60.0, pods={}) for pk in workload_ids],
        update_conflicts=True, unique_fields=["workload"], update_fields=["measured_at", "average", "peak", "pods"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    bench.BENCH_DB = BENCH_DB
    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["OSMO_ADMISSION_ON_COMMIT"] = "0"
    os.environ["OSMO_ENGINE_RECONCILE_ON_COMMIT"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.utils import timezone

        call_command("migrate", verbosity=0)
        submit_bench.build_world(10)
        pods = running_workloads(args.workloads, args.replicas)
        vector = [{"metric": {"namespace": ns, "pod": pod}, "value": [0, f"{(i * 7) % 100}"]}
                  for i, (ns, pod) in enumerate(pods)]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": vector}}).encode()
        server, url = canned_server(body)
        from scheduling.models import Workload
        from scheduling.run.utilization import sample
        from scheduling.usage.utilization import Prometheus

        source = Prometheus(url, timeout=60, max_bytes=256 * 1024 * 1024, max_series=10_000_000)
        ids = list(Workload.objects.values_list("id", flat=True))
        ours, base = [], []
        sample(timezone.now(), source)  # warm-up: the rows exist from here on, as in every later round
        for _ in range(args.rounds):
            started = time.perf_counter()
            done = sample(timezone.now(), source)
            ours.append(time.perf_counter() - started)
            if done.error or done.measured != args.workloads:
                raise SystemExit(f"round failed: {done.summary()}")
            started = time.perf_counter()
            baseline_round(url, ids, timezone.now())
            base.append(time.perf_counter() - started)
        server.shutdown()
        ours_ms, base_ms = statistics.median(ours) * 1000, statistics.median(base) * 1000
        print(f"answer: {len(body) / 1024 / 1024:.1f} MiB, {len(pods):,} pods of {args.workloads:,} workloads")
        print(f"{'':<46}{'median ms':>10}")
        print(f"{'utilization round (sample)':<46}{ours_ms:>10.1f}")
        print(f"{'baseline: 2 fetches + json.loads + 1 upsert':<46}{base_ms:>10.1f}")
        print(f"ratio: {ours_ms / base_ms:.2f}")
    finally:
        if not args.keep:
            bench.drop_database()


if __name__ == "__main__":
    main()
