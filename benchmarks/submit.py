"""Benchmark: submissions (issue 12). Requests per second and p50/p99 latency of `POST /api/workloads/` with
20 concurrent clients, beside `GET /api/profile/` (authentication, roles, the visible pools: the cheapest
signed-in API answer) on the same server in the same run.

Usage, from the project root (about a minute on 2 cores with the defaults):

    .venv/bin/python benchmarks/submit.py [--clients 20] [--requests 1000] [--nodes 200] [--port 8765] [--keep]
        [--database osmo_bench_submit] [--in-process [--rounds 3]]

Database: PostgreSQL, a scratch database `osmo_bench_submit` on the server of DATABASE_URL if set (else
postgres://postgres@127.0.0.1:5432), dropped and recreated at start and dropped at the end (--keep leaves it).

The server: `manage.py runserver --noreload` (threaded; one process, as the tests' live server) with DEBUG off
and OSMO_ADMISSION_ON_COMMIT off, so no admission cycle competes for the CPU. The world: the default
configuration, a pool `training` like the default pool (pod template `default_user`, the four default
validation rules and default variables) with platform h100 (an H100 node selector) with
--nodes nodes of 8 H100s, department research and project vision (deserved 100,000 GPUs, so nothing is
refused), a researcher who is a member and holds a role allowing the pool, and a bearer token. Each submission
is the example request (docs/researcher) (1 GPU, 4 CPU, 16Gi) through the whole pipeline (access, variables, the pool's
validation rules, templates rendered, platform, the never-fits check) and one insert of the workload and its
event. The clients: --clients threads, each with its own HTTP session, sharing --requests requests per phase;
phases: profile, submit, profile (the two profile phases are reported together).

`--in-process` measures instead the CPU of one request in this process (Django's test client: no HTTP, no
server threads, no other process), alternating --rounds phases of --requests profiles and --requests submissions
on the same world, and prints the best phase of each and their ratio. Issue 25 point 9 asks for a submission at
most twice a profile (docs/development/benchmarks.md has the figures).
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers

bench.BENCH_DB = "osmo_bench_submit"
BASE_DIR = Path(__file__).resolve().parent.parent
H100 = {"h100": {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}}
# The submission limits (scheduling.submit.limits) off: this measures the pipeline, not the refusals.
LIMITS_OFF = {"OSMO_SUBMISSIONS_PER_MINUTE": "0", "OSMO_MAX_LIVE_WORKLOADS_PER_USER": "1000000",
              "OSMO_MAX_LIVE_WORKLOADS_PER_PROJECT": "1000000"}
REQUEST = {"name": "resnet", "project": "vision", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
           "command": ["python", "train.py"], "resources": {"gpu": 1, "cpu": "4", "memory": "16Gi"}}


def build_world(nodes: int) -> str:
    """The world of the docstring; returns the researcher's bearer token."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from pools.access.tokens import create_token
    from pools.config import writes
    from pools.config.defaults import init_defaults
    from pools.models import Backend, ConfigKind, Node, NodeMembership, Pool, Role, RoleAssignment

    init_defaults(author="bench")
    Backend.objects.filter(name="default").update(last_sync_at=timezone.now())
    writes.import_document(ConfigKind.POD_TEMPLATE, H100, author="bench")
    writes.import_document(ConfigKind.POOL, {"pools": {"training": {
        "name": "training", "backend": "default", "default_platform": "h100", "common_pod_template": ["default_user"],
        "common_resource_validations": ["default_cpu", "default_memory", "default_storage", "default_gpu"],
        "common_default_variables": {"USER_CPU": 1, "USER_GPU": 0, "USER_MEMORY": "1Gi", "USER_STORAGE": "1Gi"},
        "platforms": {"h100": {"override_pod_template": ["h100"]}}}}}, author="bench")
    writes.import_document(ConfigKind.ROLE, {"name": "osmo-training", "policies": [{"actions": [
        {"base": "http", "path": "/api/pool/training*", "method": "post"}]}]}, author="bench")
    writes.import_document(ConfigKind.DEPARTMENT, {"research": {"name": "research"}}, author="bench")
    writes.import_document(ConfigKind.PROJECT, {"vision": {
        "name": "vision", "department": "research", "members": {"users": ["researcher"]},
        "default_node_pools": ["training"],
        "resources": [{"node_pool": "training", "gpu": {"deserved": 100_000, "limit": -1}}]}}, author="bench")
    backend = Backend.objects.get(name="default")
    gib = 1024 ** 3
    created = Node.objects.bulk_create(Node(
        backend=backend, name=f"dgx-{i:05d}", gpu_total=8, gpu_allocatable=8, gpu_free=8, cpu_allocatable=190_000,
        memory_allocatable=2000 * gib, storage_allocatable=2000 * gib, status="Ready", pool_names=["training"],
        platform_names=["training/h100"], last_seen=timezone.now(),
        labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}) for i in range(nodes))
    pool = Pool.objects.get(name="training")
    NodeMembership.objects.bulk_create(NodeMembership(node=node, pool=pool, platforms=["h100"]) for node in created)
    researcher = get_user_model().objects.create_user("researcher")
    RoleAssignment.objects.create(user=researcher, role=Role.objects.get(name="osmo-training"))
    _, secret = create_token(researcher, "bench", timezone.now() + timezone.timedelta(days=1))
    return secret


def start_server(port: int) -> subprocess.Popen:
    env = {**os.environ, "DEBUG": "0", "ALLOWED_HOSTS": "127.0.0.1", "OSMO_ADMISSION_ON_COMMIT": "0",
           "LOG_LEVEL": "WARNING", **LIMITS_OFF}
    server = subprocess.Popen([sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
                              cwd=BASE_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import requests

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.get(f"http://127.0.0.1:{port}/api/profile/", timeout=2)
            return server
        except requests.ConnectionError:
            if server.poll() is not None:
                raise SystemExit("the server did not start (run `manage.py runserver` by hand to see why)") from None
            time.sleep(0.2)
    server.kill()
    raise SystemExit("the server did not answer within 60 s")


def phase(url: str, method: str, token: str, clients: int, count: int, body=None, all_codes: bool = False) -> dict:
    import requests

    local = threading.local()
    headers = {"Authorization": f"Bearer {token}"}

    def one(index: int) -> tuple[float, int]:
        if not hasattr(local, "session"):
            local.session = requests.Session()
        payload = None if body is None else {**body, "name": f"{body['name']}-{index}"}
        started = time.perf_counter()
        response = local.session.request(method, url, json=payload, headers=headers, timeout=120)
        return time.perf_counter() - started, response.status_code

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as executor:
        results = list(executor.map(one, range(count)))
    wall = time.perf_counter() - started
    latencies = sorted(seconds for seconds, _ in results)
    codes = {code for _, code in results}
    answer = {"rps": count / wall, "p50": statistics.median(latencies) * 1000,
              "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, "codes": codes,
              "count": count}
    if all_codes:
        answer["all_codes"] = [code for _, code in results]
    return answer


def in_process(token: str, rounds: int, count: int) -> None:
    """CPU per request in this process (Django's test client, no HTTP or server threads): `rounds` alternating
    phases of `count` profiles then `count` submissions, so that both see the same machine; the best phase of each
    is reported (the least disturbed by other work)."""
    from django.test import Client

    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def profile(_index: int) -> int:
        return client.get("/api/profile/").status_code

    def submit(index: int) -> int:
        return client.post("/api/workloads/", {**REQUEST, "name": f"cpu-{index}"},
                           content_type="application/json").status_code

    for index in range(20):  # warm-up: imports, caches, the first connection
        profile(index), submit(10_000_000 + index)
    figures: dict[str, list[float]] = {"profile": [], "submit": []}
    for round_ in range(rounds):
        for name, call, expected in (("profile", profile, 200), ("submit", submit, 201)):
            started = time.process_time()
            codes = {call(round_ * count + index) for index in range(count)}
            figures[name].append((time.process_time() - started) / count * 1000)
            if codes != {expected}:
                raise SystemExit(f"unexpected answers to {name}: {codes}")
    best = {name: min(values) for name, values in figures.items()}
    print(f"CPU per request in process ({rounds} alternating phases of {count}; best phase, all phases):")
    for name in ("profile", "submit"):
        print(f"  {name:<8}{best[name]:>7.2f} ms   {', '.join(f'{v:.2f}' for v in figures[name])}")
    print(f"ratio (submit / profile): {best['submit'] / best['profile']:.2f}x CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--database", default=bench.BENCH_DB, help="the scratch database's name")
    parser.add_argument("--in-process", action="store_true",
                        help="measure CPU per request in this process instead of requests through a server")
    parser.add_argument("--rounds", type=int, default=3, help="--in-process: alternating phases of each")
    args = parser.parse_args()
    bench.BENCH_DB = args.database

    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    version = bench.create_database()
    os.environ["DATABASE_URL"] = f"{bench.server_url()}/{bench.BENCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "osmo_site.settings"
    os.environ["DEBUG"] = "0"
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    if args.in_process:  # this process answers, as the server would: no limits, no admission cycle
        os.environ.update({**LIMITS_OFF, "ALLOWED_HOSTS": "testserver", "OSMO_ADMISSION_ON_COMMIT": "0",
                           "LOG_LEVEL": "WARNING"})
    print(f"database: PostgreSQL {version}, scratch database {bench.BENCH_DB} (created for this run)")
    server = None
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        token = build_world(args.nodes)
        from scheduling.models import Workload

        if args.in_process:
            in_process(token, args.rounds, args.requests)
            return

        server = start_server(args.port)
        base = f"http://127.0.0.1:{args.port}"
        print(f"server: runserver (threaded), DEBUG off; {args.clients} clients, {args.requests} requests a phase; "
              f"pool training with {args.nodes} nodes")
        phase(f"{base}/api/profile/", "GET", token, args.clients, 50)  # warm-up
        first = phase(f"{base}/api/profile/", "GET", token, args.clients, args.requests)
        submit = phase(f"{base}/api/workloads/", "POST", token, args.clients, args.requests, REQUEST)
        second = phase(f"{base}/api/profile/", "GET", token, args.clients, args.requests)
        if submit["codes"] != {201} or first["codes"] != {200} or second["codes"] != {200}:
            raise SystemExit(f"unexpected answers: submit {submit['codes']}, profile {first['codes']} "
                             f"{second['codes']}")
        stored = Workload.objects.count()
        if stored != args.requests:
            raise SystemExit(f"{stored} workloads stored for {args.requests} submissions")
        profile = {"rps": (first["rps"] + second["rps"]) / 2, "p50": (first["p50"] + second["p50"]) / 2,
                   "p99": max(first["p99"], second["p99"])}
        print(f"{'request':<28}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}")
        print(f"{'GET /api/profile/':<28}{profile['rps']:>10.1f}{profile['p50']:>10.1f}{profile['p99']:>10.1f}")
        print(f"{'POST /api/workloads/':<28}{submit['rps']:>10.1f}{submit['p50']:>10.1f}{submit['p99']:>10.1f}")
        print(f"ratio (submit / profile): throughput {submit['rps'] / profile['rps']:.2f}, "
              f"p50 latency {submit['p50'] / profile['p50']:.2f}x, p99 latency {submit['p99'] / profile['p99']:.2f}x; "
              f"{stored} workloads stored")
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        if not args.keep:
            bench.drop_database()


if __name__ == "__main__":
    main()
