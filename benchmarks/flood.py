"""Benchmark: one user floods the submission endpoint (issue 25). 500 `POST /api/workloads/` from one user at
20 concurrent clients, with the submission limits at their defaults (scheduling.submit.limits: 60 a minute per user),
while an admin loads `/` one page after another; the admin's p50/p99 beside the same admin's `/` on the idle
server in the same run, and how the flood was answered (201s and 429s).

Usage, from the project root (about a minute on 2 cores):

    .venv/bin/python benchmarks/flood.py [--clients 20] [--requests 500] [--nodes 200] [--port 8766]
        [--database osmo_bench_flood] [--keep]

The world and the server are benchmarks/submit.py's (runserver, threaded, DEBUG off, no admission on commit),
plus a staff user signed in with a session cookie. Database: a scratch PostgreSQL database, dropped at the end.
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers
import submit  # benchmarks/submit.py: the world, the server and a phase of requests

BASE_DIR = Path(__file__).resolve().parent.parent


def admin_session() -> str:
    """A session of a staff user, as the sign-in page would leave it: its cookie value."""
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
    from django.contrib.sessions.backends.db import SessionStore

    admin = get_user_model().objects.create_user("admin", password="bench-admin", is_staff=True, is_superuser=True)
    session = SessionStore()
    session[SESSION_KEY] = str(admin.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = admin.get_session_auth_hash()
    session.create()
    return session.session_key


def start_server(port: int) -> subprocess.Popen:
    """submit.py's server with the submission limits at their defaults (none of LIMITS_OFF)."""
    saved = dict(submit.LIMITS_OFF)
    submit.LIMITS_OFF.clear()
    try:
        return submit.start_server(port)
    finally:
        submit.LIMITS_OFF.update(saved)


def load_home(url: str, cookie: str, stop: threading.Event, latencies: list[float], codes: set[int],
              count: int | None = None) -> None:
    import requests

    session = requests.Session()
    session.cookies.set("sessionid", cookie)
    done = 0
    while not stop.is_set() and (count is None or done < count):
        started = time.perf_counter()
        response = session.get(url, timeout=120)
        latencies.append(time.perf_counter() - started)
        codes.add(response.status_code)
        done += 1


def figures(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return statistics.median(ordered) * 1000, ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--database", default="osmo_bench_flood")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    bench.BENCH_DB = args.database

    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    server = None
    try:
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        # DEBUG off: the pages name their static files through the manifest, which collectstatic writes.
        call_command("collectstatic", "--noinput", verbosity=0)
        token = submit.build_world(args.nodes)
        cookie = admin_session()
        server = start_server(args.port)
        base = f"http://127.0.0.1:{args.port}"
        print(f"server: runserver (threaded), DEBUG off; submission limits at their defaults "
              f"({settings.OSMO_SUBMISSIONS_PER_MINUTE} a minute per user)")
        idle, idle_codes = [], set()
        load_home(f"{base}/", cookie, threading.Event(), [], set(), count=5)  # warm-up
        load_home(f"{base}/", cookie, threading.Event(), idle, idle_codes, count=50)
        stop = threading.Event()
        busy, busy_codes = [], set()
        admin = threading.Thread(target=load_home, args=(f"{base}/", cookie, stop, busy, busy_codes))
        admin.start()
        flood = submit.phase(f"{base}/api/workloads/", "POST", token, args.clients, args.requests, submit.REQUEST,
                             all_codes=True)
        stop.set()
        admin.join()
        if idle_codes != {200} or busy_codes != {200}:
            raise SystemExit(f"the admin's / answered {idle_codes | busy_codes}")
        answered = flood["all_codes"]
        idle_p50, idle_p99 = figures(idle)
        busy_p50, busy_p99 = figures(busy)
        print(f"{'admin GET /':<34}{'loads':>8}{'p50 ms':>10}{'p99 ms':>10}")
        print(f"{'  idle server':<34}{len(idle):>8}{idle_p50:>10.1f}{idle_p99:>10.1f}")
        print(f"{'  during the flood':<34}{len(busy):>8}{busy_p50:>10.1f}{busy_p99:>10.1f}")
        print(f"flood: {args.requests} submissions from one user at {args.clients} concurrent in "
              f"{args.requests / flood['rps']:.1f} s: {answered.count(201)} answered 201, {answered.count(429)} "
              f"answered 429, {len(answered) - answered.count(201) - answered.count(429)} other")
        print(f"ratio (admin p99 during / idle): {busy_p99 / idle_p99:.2f}")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if not args.keep:
            bench.drop_database()


if __name__ == "__main__":
    main()
