"""Benchmark: following a pod's log (issue 26). Against the stand-in API server (tests/kube_standin.py) over real
HTTP on this machine.

Usage, from the project root (about 10 s on 2 idle cores):

    .venv/bin/python benchmarks/logs.py [--lines 200] [--follows 50]

Measured:
  1. Time to first byte: a follow is open; a line is written in the stand-in; the time until the reader holds it.
     Ours: `KubeCluster.follow_pod_log` with timestamps plus the resume bookkeeping the web door does per line
     (`scheduling.decisions.log_lines.Resumer`). Baseline, same run: the bare official client,
     `CoreV1Api.read_namespaced_pod_log(follow=True, _preload_content=False)`, reading the raw stream. Median of
     --lines lines each, and the ratio ours / baseline.
  2. Concurrent follows: --follows follows held open at once through one KubeCluster (one thread each, as a web
     process's worker threads hold them: a follow costs one thread for at most OSMO_LOG_FOLLOW_SECONDS); a line
     written then reaches every one of them; threads used and the median and worst delivery time.
"""

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from pools.cluster import LogQuery
from pools.cluster.kube import KubeCluster
from scheduling.decisions import log_lines
from tests.kube_standin import KubeStandin

NS = "bench"


def add_pod(standin, name):
    standin.add_pod({"metadata": {"name": name, "namespace": NS}, "spec": {"containers": [{"name": "user"}]},
                     "status": {"phase": "Running", "containerStatuses": [{"name": "user",
                                                                           "state": {"running": {}}}]}})


def first_bytes(standin, pod, chunks, lines: int, take) -> list[float]:
    """Writes `lines` lines one at a time; for each, the seconds until `take(chunk)` saw it."""
    got = threading.Event()
    seen = []

    def reader():
        for chunk in chunks:
            if take(chunk):
                seen.append(time.perf_counter())
                got.set()

    threading.Thread(target=reader, daemon=True).start()
    times = []
    for i in range(lines):
        got.clear()
        start = time.perf_counter()
        standin.append_log(pod, f"line {i}", namespace=NS)
        if not got.wait(10):
            raise SystemExit(f"line {i} never arrived")
        times.append(seen[-1] - start)
    standin.end_log(pod, namespace=NS)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--follows", type=int, default=50)
    args = parser.parse_args()
    with KubeStandin(crds=None) as standin, tempfile.TemporaryDirectory() as tmp:
        config = standin.kubeconfig(Path(tmp) / "kubeconfig")
        ours = KubeCluster.from_kubeconfig(config)
        add_pod(standin, "ours")
        resumer = log_lines.Resumer(log_lines.Position())
        stream = ours.follow_pod_log(NS, "ours", LogQuery(container="user", timestamps=True), timeout_seconds=600)
        mine = first_bytes(standin, "ours", stream, args.lines,
                           lambda chunk: any(resumer.take(line) is not None for line in log_lines.lines_of(chunk)))

        add_pod(standin, "bare")
        api = k8s.CoreV1Api(k8s_config.new_client_from_config(config_file=config))
        response = api.read_namespaced_pod_log("bare", NS, container="user", follow=True, _preload_content=False)
        bare = first_bytes(standin, "bare", response.stream(64 * 1024), args.lines, bool)
        ours_ms, bare_ms = statistics.median(mine) * 1000, statistics.median(bare) * 1000
        print(f"time to first byte of a followed log, median of {args.lines} lines: ours {ours_ms:.2f} ms, "
              f"bare kubernetes client {bare_ms:.2f} ms, ratio {ours_ms / bare_ms:.2f}")

        add_pod(standin, "many")
        before = threading.active_count()
        arrived: list[float] = []
        lock = threading.Lock()
        ready = threading.Barrier(args.follows + 1)

        def follower():
            chunks = ours.follow_pod_log(NS, "many", LogQuery(container="user"), timeout_seconds=120)
            ready.wait()
            for chunk in chunks:
                if b"go" in chunk:
                    with lock:
                        arrived.append(time.perf_counter())
                    break
            chunks.close()

        threads = [threading.Thread(target=follower, daemon=True) for _ in range(args.follows)]
        for thread in threads:
            thread.start()
        ready.wait()
        standin.wait_for_log_follows(args.follows, timeout=30)
        serving = sum("process_request" in t.name for t in threading.enumerate())  # the stand-in's own threads
        used = threading.active_count() - before - serving
        start = time.perf_counter()
        standin.append_log("many", "go", namespace=NS)
        for thread in threads:
            thread.join(30)
        delays = sorted(t - start for t in arrived)
        print(f"{len(arrived)} of {args.follows} concurrent follows served by one process with {used} threads "
              f"(one per follow; the stand-in's {serving} serving threads not counted); a line reached them in median"
              f" {statistics.median(delays) * 1000:.1f} ms, "
              f"worst {delays[-1] * 1000:.1f} ms")
        ours.close()


if __name__ == "__main__":
    main()
