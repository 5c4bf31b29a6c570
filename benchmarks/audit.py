"""Benchmark: the cost of the audit log (issue 28), in one run on a scratch PostgreSQL database.

1. Submissions (`scheduling.submit.submission.submit`, the whole pipeline and its insert, in process) and a burst of
   quota edits (a project document's deserved GPUs written again and again through `writes.import_document`),
   each in rounds that alternate audit rows on and off (off: `pools.models.audit.record_many` replaced by a
   no-op for the round), equal counts on the same data: milliseconds per action and the ratio on/off.
2. `audit verify` over --rows chained rows (default 1,000,000, written by COPY): its time, beside a baseline
   that reads the same rows in the same batches without hashing.

Usage, from the project root (a few minutes on 2 cores with the defaults):

    .venv/bin/python benchmarks/audit.py [--submissions 300] [--edits 300] [--rounds 6] [--rows 1000000] [--keep]

Database: `osmo_bench_audit` on the server of DATABASE_URL (else postgres://postgres@127.0.0.1:5432), created
at start and dropped at the end (--keep leaves it).
"""

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers
import submit as submit_bench  # benchmarks/submit.py: the world of its submissions

BENCH_DB = "osmo_bench_audit"
BASE_DIR = Path(__file__).resolve().parent.parent

def build_world():
    """benchmarks/submit.py's world with 20 nodes; returns its researcher."""
    from django.contrib.auth import get_user_model

    submit_bench.build_world(20)
    return get_user_model().objects.get(username="researcher")


def project_document(deserved: int):
    from pools.config import writes
    from pools.models import ConfigKind

    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["researcher"]},
        "default_node_pools": ["training"],
        "resources": [{"node_pool": "training", "gpu": {"deserved": deserved, "limit": -1}}]}}, author="bench")


def timed_rounds(action, count: int, rounds: int) -> dict:
    """ms per action with audit rows on and off, alternating rounds of count // rounds actions each."""
    from pools.models import audit

    real = audit.record_many
    per = max(1, count // rounds)
    times = {"on": [], "off": []}
    for index in range(rounds * 2):
        mode = "on" if index % 2 == 0 else "off"
        audit.record_many = real if mode == "on" else (lambda entries, actor=None: [None] * len(entries))
        try:
            started = time.perf_counter()
            for n in range(per):
                action(n)
            times[mode].append((time.perf_counter() - started) * 1000 / per)
        finally:
            audit.record_many = real
    return {mode: statistics.median(values) for mode, values in times.items()}


def write_chain(rows: int) -> None:
    """`rows` chained audit rows, as record() would write them, by COPY."""
    from django.db import connection
    from django.utils import timezone

    from pools.models import AuditEvent
    from pools.models.audit import GENESIS, chain_hash, content_of

    previous = AuditEvent.objects.order_by("-id").values_list("hash", flat=True).first() or GENESIS
    now = timezone.now()
    columns = ("at", "actor_kind", "actor", "token", "address", "request_id", "kind", "object", "action", "summary",
               "previous_hash", "hash")
    batch = 100_000
    with connection.cursor() as cursor:
        for start in range(0, rows, batch):
            buffer = io.StringIO()
            for index in range(start, min(rows, start + batch)):
                fields = (now, "user", f"user{index % 500}", "", "10.0.0.1", f"req{index}", "workload",
                          f"workload/{index}", "submit", f"resnet in project vision via api ({index})")
                digest = chain_hash(previous, content_of(*fields))
                buffer.write("\t".join([now.isoformat(), *map(str, fields[1:]), previous, digest]) + "\n")
                previous = digest
            buffer.seek(0)
            with cursor.cursor.copy(f"COPY pools_auditevent ({', '.join(columns)}) FROM STDIN") as copy:
                copy.write(buffer.getvalue())


def read_baseline(batch: int = 20_000) -> int:
    from pools.models import AuditEvent

    last, count = 0, 0
    fields = ("id", "at", "actor_kind", "actor", "token", "address", "request_id", "kind", "object", "action",
              "summary", "previous_hash", "hash")
    while True:
        rows = list(AuditEvent.objects.filter(id__gt=last).order_by("id").values_list(*fields)[:batch])
        if not rows:
            return count
        count += len(rows)
        last = rows[-1][0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=300)
    parser.add_argument("--edits", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()

    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    bench.BENCH_DB = BENCH_DB  # set after importing submit, which names its own
    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["OSMO_ADMISSION_ON_COMMIT"] = "0"
    os.environ["OSMO_ENGINE_RECONCILE_ON_COMMIT"] = "0"
    os.environ.update(submit_bench.LIMITS_OFF)  # measures the pipeline, not the submission limits
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        user = build_world()
        from pools.models import AuditEvent
        from pools.models.audit import verify
        from scheduling.submit.submission import submit

        submit(user, dict(submit_bench.REQUEST))  # warm-up
        submitted = timed_rounds(lambda n: submit(user, dict(submit_bench.REQUEST, name=f"resnet-{n}")),
                                 args.submissions, args.rounds)
        edits = timed_rounds(lambda n: project_document(100_000 - 1 - n % 2), args.edits, args.rounds)
        print(f"{'action':<34}{'audit on ms':>12}{'audit off ms':>14}{'ratio':>8}")
        for label, figures in (("submission (in process)", submitted), ("quota edit (project document)", edits)):
            print(f"{label:<34}{figures['on']:>12.2f}{figures['off']:>14.2f}{figures['on'] / figures['off']:>8.2f}")

        before = AuditEvent.objects.count()
        started = time.perf_counter()
        write_chain(args.rows)
        print(f"wrote {args.rows:,} chained rows by COPY in {time.perf_counter() - started:.1f} s "
              f"(after {before:,} rows of the runs above)")
        started = time.perf_counter()
        baseline = read_baseline()
        read_seconds = time.perf_counter() - started
        started = time.perf_counter()
        checked, broken = verify()
        verify_seconds = time.perf_counter() - started
        if broken is not None or checked != baseline:
            raise SystemExit(f"verify found {broken} after {checked} rows (of {baseline})")
        print(f"audit verify: {checked:,} rows in {verify_seconds:.1f} s; reading them alone "
              f"{read_seconds:.1f} s (ratio {verify_seconds / read_seconds:.2f})")
    finally:
        if not args.keep:
            bench.drop_database()


if __name__ == "__main__":
    main()
