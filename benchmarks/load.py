"""Benchmark: load on the production server (issue 15). Requests per second and p99 latency, measured by `wrk`,
of `/` and `/nodes/` (a staff session), `GET /api/resources/` and `POST /api/workloads/` (a researcher's bearer
token), against `manage.py serve --no-worker --no-beat` (gunicorn, deploy/gunicorn.conf.py, WEB_CONCURRENCY
workers); the baseline, in the same run, is the same requests against the development server
(`manage.py runserver --noreload`, threaded, one process) on the same database.

Fair by construction: both servers run side by side (the one not measured is idle) and each endpoint is measured
on them alternately, in --rounds slices of --seconds / --rounds each, in the order gunicorn, runserver, then
runserver, gunicorn (so a drift of the machine falls on both alike): equal times. Every slice starts from the same
rows: the workloads a POST slice created are deleted before the next slice. A server's figure is its requests over
its seconds, summed over its slices, and the worst p99 of its slices.

Usage, from the project root (needs `wrk`: `apt-get install wrk`; about 11 minutes with the defaults):

    .venv/bin/python benchmarks/load.py [--seconds 40] [--rounds 2] [--connections 16]
        [--workers 2] [--nodes 5000] [--keep]

Database: PostgreSQL, a scratch database `osmo_bench_load` on the server of DATABASE_URL if set (else
postgres://postgres@127.0.0.1:5432), dropped and recreated at start and dropped at the end (--keep leaves it).
The world is benchmarks/submit.py's (pool training, platform h100, project vision) with --nodes nodes of 8 H100s,
plus a staff user for the pages. Both servers run with DEBUG off, LOG_LEVEL=WARNING and admission on commit off
(no worker runs, so nothing but the requests uses the CPU). wrk runs 2 threads and --connections connections
per endpoint; "errors" counts non-2xx answers and socket errors.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers
import submit  # benchmarks/submit.py: the submission world

bench.BENCH_DB = "osmo_bench_load"
BASE_DIR = Path(__file__).resolve().parent.parent


def server_env(workers: int) -> dict:
    return {**os.environ, "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1", "OSMO_ADMISSION_ON_COMMIT": "0",
            "LOG_LEVEL": "WARNING", "WEB_CONCURRENCY": str(workers), "SESSION_COOKIE_SECURE": "0",
            "CSRF_COOKIE_SECURE": "0", "SECURE_SSL_REDIRECT": "0"}


def start(kind: str, port: int, workers: int) -> subprocess.Popen:
    if kind == "gunicorn":
        argv = [sys.executable, "manage.py", "serve", "--no-worker", "--no-beat", "--bind", f"127.0.0.1:{port}"]
    else:
        argv = [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"]
    log = open(Path(tempfile.gettempdir()) / f"osmo-bench-load-{kind}.log", "w")  # noqa: SIM115 (the server's life)
    server = subprocess.Popen(argv, cwd=BASE_DIR, env=server_env(workers), stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    import requests

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200:
                return server
        except requests.RequestException:
            pass
        if server.poll() is not None:
            raise SystemExit(f"the {kind} server did not start (its log: {log.name})")
        time.sleep(0.2)
    stop(server)
    raise SystemExit(f"the {kind} server did not answer /healthz within 60 s (its log: {log.name})")


def stop(server: subprocess.Popen) -> None:
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)


def session_cookie(base: str) -> str:
    import requests

    browser = requests.Session()
    page = browser.get(f"{base}/accounts/login/")
    if "csrftoken" not in browser.cookies:
        raise SystemExit(f"the sign-in page answered {page.status_code} without a CSRF cookie "
                         f"(the server's log: {tempfile.gettempdir()}/osmo-bench-load-*.log)")
    answer = browser.post(f"{base}/accounts/login/", data={
        "username": "load-staff", "password": "load-staff-pw", "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        headers={"Referer": f"{base}/accounts/login/"}, allow_redirects=False)
    if answer.status_code != 302 or "sessionid" not in browser.cookies:
        raise SystemExit(f"signing in answered {answer.status_code}")
    return f"sessionid={browser.cookies['sessionid']}"


def wrk(url: str, seconds: int, connections: int, headers: dict, body: dict | None, scripts: Path) -> dict:
    script = scripts / f"{abs(hash((url, json.dumps(body))))}.lua"
    lines = [f"wrk.headers[{json.dumps(name)}] = {json.dumps(value)}" for name, value in headers.items()]
    if body is not None:
        lines += ['wrk.method = "POST"', 'wrk.headers["Content-Type"] = "application/json"',
                  f"wrk.body = {json.dumps(json.dumps(body))}"]
    script.write_text("\n".join(lines) + "\n")
    output = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--timeout", "30s", "--latency",
                             "-s", str(script), url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    p99 = re.search(r"\s99%\s+([\d.]+)(us|ms|s)\b", output)
    p99_ms = float(p99.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[p99.group(2)]
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses:\s+(\d+)", output))
    socket = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    errors += sum(int(n) for n in socket.groups()) if socket else 0
    total = int(re.search(r"(\d+) requests in", output).group(1))
    return {"rps": rps, "p99": p99_ms, "errors": errors, "total": total}


CASES = [("GET /", "/", "cookie", None), ("GET /nodes/", "/nodes/", "cookie", None),
         ("GET /api/resources/", "/api/resources/", "bearer", None),
         ("POST /api/workloads/", "/api/workloads/", "bearer", submit.REQUEST)]


def forget_workloads() -> None:
    """Back to the world as built: a POST slice's workloads (and their events) deleted, so each slice sees the
    same rows."""
    from scheduling.models import Workload

    Workload.objects.all().delete()


def measure(ports: dict[str, int], args, token: str, scripts: Path) -> dict[str, dict[str, dict]]:
    """{server kind: {request label: figures}}, each endpoint measured on the servers alternately."""
    headers = {kind: {"cookie": {"Cookie": session_cookie(f"http://127.0.0.1:{port}")},
                      "bearer": {"Authorization": f"Bearer {token}"}} for kind, port in ports.items()}
    kinds = list(ports)
    results: dict[str, dict[str, dict]] = {kind: {} for kind in kinds}
    slice_seconds = max(1, args.seconds // args.rounds)
    for label, path, auth, body in CASES:
        slices: dict[str, list[dict]] = {kind: [] for kind in kinds}
        for kind in kinds:  # warm-up: every worker imports and caches
            wrk(f"http://127.0.0.1:{ports[kind]}{path}", 3, 4, headers[kind][auth], body, scripts)
        if body is not None:
            forget_workloads()
        for round_ in range(args.rounds):
            for kind in kinds if round_ % 2 == 0 else kinds[::-1]:
                slices[kind].append(wrk(f"http://127.0.0.1:{ports[kind]}{path}", slice_seconds, args.connections,
                                        headers[kind][auth], body, scripts))
                if body is not None:
                    forget_workloads()
        for kind in kinds:
            total = sum(one["total"] for one in slices[kind])
            results[kind][label] = {"rps": total / (slice_seconds * args.rounds), "total": total,
                                    "p99": max(one["p99"] for one in slices[kind]),
                                    "errors": sum(one["errors"] for one in slices[kind])}
            figures = results[kind][label]
            print(f"  {kind:<9} {label:<22} {figures['rps']:>8.1f} req/s  p99 {figures['p99']:>8.1f} ms"
                  f"  ({total} requests, {figures['errors']} errors)", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=40, help="wrk's duration per endpoint on each server")
    parser.add_argument("--rounds", type=int, default=2, help="slices each server's seconds are measured in")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers (WEB_CONCURRENCY)")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk is not installed (apt-get install wrk)")

    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    try:
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        call_command("collectstatic", "--noinput", verbosity=0)  # DEBUG off: whitenoise serves the collected files
        token = submit.build_world(args.nodes)
        get_user_model().objects.create_user("load-staff", password="load-staff-pw", is_staff=True,
                                             is_superuser=True)
        from django.db import connections

        connections.close_all()
        print(f"world: pool training with {args.nodes:,} nodes; wrk -t2 -c{args.connections}; gunicorn "
              f"{args.workers} workers x {os.environ.get('WEB_THREADS', '4')} threads and runserver, {args.seconds} s "
              f"per endpoint each, alternately in {args.rounds} slices")
        ports = {"gunicorn": args.port, "runserver": args.port + 1}
        servers = []
        try:
            for kind, port in ports.items():
                servers.append(start(kind, port, args.workers))
            with tempfile.TemporaryDirectory() as scripts:
                figures = measure(ports, args, token, Path(scripts))
        finally:
            for server in servers:
                stop(server)
        served, baseline = figures["gunicorn"], figures["runserver"]
        print(f"\n{'request':<22}{'gunicorn req/s':>16}{'p99 ms':>9}{'errors':>8}{'runserver req/s':>17}{'p99 ms':>9}"
              f"{'errors':>8}{'ratio':>7}")
        for label, result in served.items():
            base = baseline[label]
            print(f"{label:<22}{result['rps']:>16.1f}{result['p99']:>9.1f}{result['errors']:>8}{base['rps']:>17.1f}"
                  f"{base['p99']:>9.1f}{base['errors']:>8}{result['rps'] / base['rps']:>6.2f}x")
    finally:
        if not args.keep:
            bench.drop_database()


if __name__ == "__main__":
    main()
