"""Benchmark: one user floods the submission endpoint (issue 25). 500 `POST /api/workloads/` from one user at
20 concurrent clients, with the submission limits at their defaults (scheduling.submit.limits: 60 a minute per user),
while an admin loads `/` one page after another; the admin's p50/p99 beside the same admin's `/` on the idle
server in the same run, and how the flood was answered (201s and 429s).

Usage, from the project root (about a minute on 2 cores):

    .venv/bin/python benchmarks/flood.py [--clients 20] [--requests 500] [--nodes 200] [--port 8766]
        [--database osmo_bench_flood] [--keep]

The world and the server are benchmarks/submit.py's (runserver, threaded, DEBUG off, no admission on commit),
plus a staff user signed in with a session cookie. Database: a scratch PostgreSQL database, dropped at the end.

With `--attacks` (issue 42; about two minutes): `manage.py serve --no-worker --no-beat` as production runs it
(gunicorn, 2 workers x 4 threads, DEBUG off, PostgreSQL), one hostile signed-in user attacking three ways at once
for --seconds (60): two clients posting the 85-byte quadratic template (`h.rfind(nd)`) as OSMO dry runs, one a
second each; eight log follows of a running workload (the stand-in API server plays the cluster), reopened as they
end or are refused; ten slowloris connections sending a header line every 3 s, reconnecting when cut off. Meanwhile
an admin loads `/` once a second: the admin's p50/p99 beside the same admin's on the idle server (--baseline 15
loads first, same run), how each attack was answered, and whether gunicorn killed a worker (`WORKER TIMEOUT`).
Target: p99 under 2 s and no worker killed. Everything is on loopback, bounded in time and connections.

    .venv/bin/python benchmarks/flood.py --attacks [--seconds 60] [--baseline 15] [--port 8767]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
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
    parser.add_argument("--attacks", action="store_true", help="issue 42's attacks against manage.py serve")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--baseline", type=int, default=15)
    parser.add_argument("--admin-loads", nargs=3, metavar=("URL", "COOKIE", "SECONDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.admin_loads:
        url, cookie, seconds = args.admin_loads
        return admin_loads(url, cookie, int(seconds))
    bench.BENCH_DB = args.database
    if args.attacks:
        return attacks(args)

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


# ---- issue 42: the attacks together against manage.py serve ---------------------------------------------------

QUADRATIC = "{% set h = 'a'*999996 %}{% set nd = 'a'*249999 ~ 'b' ~ 'a'*249999 %}{{ h.rfind(nd) }}"
WORKFLOW = f"""workflow:
  name: quadratic
  resources:
    default: {{cpu: 1, gpu: 0, memory: 1Gi}}
  tasks:
  - name: one
    image: ubuntu:24.04
    command: ["{QUADRATIC}"]
"""


def running_workload(standin, kube):
    """One workload of the researcher's, admitted, dispatched to the stand-in and running (its pod written as the
    kubelet would), through the API and the product's own cycle, dispatch and sync."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from scheduling.models import Workload
    from scheduling.run.cycle import run_cycle
    from scheduling.run.dispatch import dispatch
    from tests.scheduling.test_workload_logs import kubelet_pod
    from tests.support.lifecycle import observe

    api = APIClient()
    api.force_authenticate(get_user_model().objects.get(username="researcher"))
    created = api.post("/api/workloads/", {**submit.REQUEST, "resources": {"gpu": 1, "cpu": "1", "memory": "1Gi"}},
                       format="json")
    if created.status_code != 201:
        raise SystemExit(f"the submission answered {created.status_code}: {created.content[:300]}")
    run_cycle()
    if dispatch(created.json()["id"], clusters=lambda backend: kube) != "created":
        raise SystemExit("the workload was not dispatched")
    workload = Workload.objects.select_related("pool").get(pk=created.json()["id"])
    pod = kubelet_pod(standin, workload, 0, node="dgx-00000")
    workload = observe(kube, workload)
    if workload.status != "RUNNING":
        raise SystemExit(f"the workload is {workload.status}, not RUNNING")
    return workload, pod


class Attacks:
    """The hostile user's three attacks, each in threads of its own until `stop` is set; counts what came back."""

    def __init__(self, base: str, port: int, token: str, workload_id: str):
        self.base, self.port, self.workload_id = base, port, workload_id
        self.headers = {"Authorization": f"Bearer {token}"}
        self.stop = threading.Event()
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.follows: list = []
        self.threads = [threading.Thread(target=self.quadratic, daemon=True) for _ in range(2)]
        self.threads += [threading.Thread(target=self.follow, daemon=True) for _ in range(8)]
        self.threads += [threading.Thread(target=self.slowloris, daemon=True)]

    def count(self, what: str) -> None:
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + 1

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def end(self) -> None:
        self.stop.set()
        with self.lock:
            for response in self.follows:
                response.close()
        for thread in self.threads:
            thread.join(timeout=40)

    def quadratic(self) -> None:
        import requests

        session = requests.Session()
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                answer = session.post(f"{self.base}/api/pool/training/workflow?dry_run=true", headers=self.headers,
                                      json={"file": WORKFLOW, "set_variables": []}, timeout=120)
                self.count(f"quadratic template: {answer.status_code}")
            except requests.RequestException:
                self.count("quadratic template: no answer")
            self.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))

    def follow(self) -> None:
        import requests

        while not self.stop.is_set():
            try:
                response = requests.get(f"{self.base}/api/workloads/{self.workload_id}/logs?follow=1",
                                        headers=self.headers, stream=True, timeout=(10, None))
            except requests.RequestException:
                self.count("follow: no answer")
                self.stop.wait(1)
                continue
            self.count(f"follow: {response.status_code}")
            if response.status_code != 200:
                response.close()
                self.stop.wait(min(2.0, float(response.headers.get("Retry-After") or 1)))
                continue
            with self.lock:
                self.follows.append(response)
            try:
                for _ in response.iter_content(chunk_size=None):
                    if self.stop.is_set():
                        break
            except (requests.RequestException, OSError, AttributeError):
                pass
            finally:
                response.close()

    def slowloris(self, connections: int = 10, every: float = 3.0) -> None:
        def connect():
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            self.count("slowloris: connections opened")
            return sock

        sockets = [connect() for _ in range(connections)]
        line = 0
        while not self.stop.wait(every):
            line += 1
            for index, sock in enumerate(sockets):
                try:
                    sock.sendall(f"X-Slow-{line}: 1\r\n".encode())
                except OSError:
                    self.count("slowloris: cut off by the server")
                    sock.close()
                    sockets[index] = connect()
        for sock in sockets:
            sock.close()


def serve(port: int, log_path: Path) -> tuple[subprocess.Popen, object]:
    log = log_path.open("w")
    env = {**os.environ, "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1,testserver", "WEB_CONCURRENCY": "2",
           "WEB_THREADS": "4", "OSMO_DB_POOL_MAX": "4", "SECURE_SSL_REDIRECT": "0", "SESSION_COOKIE_SECURE": "0",
           "CSRF_COOKIE_SECURE": "0", "LOG_LEVEL": "INFO", "OSMO_ADMISSION_ON_COMMIT": "0"}
    server = subprocess.Popen([sys.executable, "manage.py", "serve", "--no-worker", "--no-beat", "--bind",
                               f"127.0.0.1:{port}"], cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    import requests

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and server.poll() is None:
        try:
            if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200:
                return server, log
        except requests.RequestException:
            time.sleep(0.5)
    if server.poll() is None:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)
    raise SystemExit("serve did not answer /healthz; its log ends:\n"
                     + "\n".join(log_path.read_text().splitlines()[-15:]))


def admin_every_second(url: str, cookie: str, seconds: int, latencies: list[float], codes: list) -> None:
    """The admin's loads, from a process of their own (the attackers' threads and the stand-in API server share
    this one's interpreter lock, which would add their time to the admin's)."""
    import json

    done = subprocess.run([sys.executable, __file__, "--admin-loads", url, cookie, str(seconds)], check=True,
                          capture_output=True, text=True)
    for latency, code in json.loads(done.stdout):
        latencies.append(latency)
        codes.append(code)


def admin_loads(url: str, cookie: str, seconds: int) -> None:
    import json

    import requests

    latencies, codes = [], []
    session = requests.Session()
    session.cookies.set("sessionid", cookie)
    start = time.monotonic()
    for n in range(seconds):
        time.sleep(max(0.0, start + n - time.monotonic()))
        began = time.perf_counter()
        try:
            codes.append(session.get(url, timeout=30).status_code)
        except requests.RequestException as exc:
            codes.append(type(exc).__name__)
        latencies.append(time.perf_counter() - began)
    print(json.dumps(list(zip(latencies, codes, strict=True))))


def training_log(standin, pod: str, namespace: str, stop: threading.Event) -> None:
    """The followed workload writes a line a second, as a training job does."""
    step = 0
    while not stop.wait(1.0):
        step += 1
        standin.append_log(pod, f"step {step} loss {2.31 / step:.4f}", namespace=namespace)


def attacks(args) -> None:
    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    from tests.kube_standin import KubeStandin

    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ.update(DEBUG="0", ALLOWED_HOSTS="127.0.0.1,testserver", OSMO_ADMISSION_ON_COMMIT="0")
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    server = log = None
    with KubeStandin() as standin, tempfile.TemporaryDirectory() as tmp:
        try:
            import django

            django.setup()
            from django.core.management import call_command

            from pools.cluster.kube import KubeCluster
            from pools.models import Backend

            call_command("migrate", verbosity=0)
            call_command("collectstatic", "--noinput", verbosity=0)
            token = submit.build_world(8)
            cookie = admin_session()
            kubeconfig = standin.kubeconfig(Path(tmp) / "kubeconfig")
            Backend.objects.filter(name="default").update(kind=Backend.Kind.KUBERNETES, kubeconfig_path=kubeconfig)
            kube = KubeCluster.from_kubeconfig(kubeconfig)
            workload, pod = running_workload(standin, kube)
            standin.append_log(pod, "epoch 1 loss 2.31", namespace=workload.namespace)
            log_path = Path(tmp) / "serve.log"
            server, log = serve(args.port, log_path)
            base = f"http://127.0.0.1:{args.port}"
            print("server: manage.py serve (gunicorn, 2 workers x 4 threads), DEBUG off")
            idle, idle_codes = [], []
            admin_every_second(f"{base}/", cookie, 3, [], [])  # warm-up
            admin_every_second(f"{base}/", cookie, args.baseline, idle, idle_codes)
            attack = Attacks(base, args.port, token, str(workload.pk))
            attack.start()
            writing = threading.Thread(target=training_log, args=(standin, pod, workload.namespace, attack.stop),
                                       daemon=True)
            writing.start()
            busy, busy_codes = [], []
            admin_every_second(f"{base}/", cookie, args.seconds, busy, busy_codes)
            attack.stop.set()
            writing.join()
            standin.end_log(pod, namespace=workload.namespace)  # the container ends: so do the follows
            attack.end()
            text = log_path.read_text()
            killed = text.count("WORKER TIMEOUT")
            idle_p50, idle_p99 = figures(idle)
            busy_p50, busy_p99 = figures(busy)
            print(f"{'admin GET / once a second':<34}{'loads':>8}{'p50 ms':>10}{'p99 ms':>10}  answers")
            print(f"{'  idle server':<34}{len(idle):>8}{idle_p50:>10.1f}{idle_p99:>10.1f}  "
                  f"{sorted(set(map(str, idle_codes)))}")
            print(f"{'  during the attacks':<34}{len(busy):>8}{busy_p50:>10.1f}{busy_p99:>10.1f}  "
                  f"{sorted(set(map(str, busy_codes)))}")
            for what, count in sorted(attack.counts.items()):
                print(f"  {what}: {count}")
            print(f"  the admin's slowest loads during the attacks: "
                  f"{', '.join(f'{t * 1000:.0f} ms' for t in sorted(busy)[-3:])}")
            print(f"workers killed (WORKER TIMEOUT): {killed}")
            print(f"ratio (admin p99 during / idle): {busy_p99 / idle_p99:.2f}; target p99 < 2000 ms: "
                  f"{'met' if busy_p99 < 2000 and not killed and set(busy_codes) == {200} else 'NOT met'}")
        finally:
            if server is not None and server.poll() is None:
                os.killpg(server.pid, 15)
                server.wait(timeout=60)
            if log is not None:
                log.close()
            if not args.keep:
                bench.drop_database()


if __name__ == "__main__":
    main()
