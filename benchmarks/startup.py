"""Benchmark: what one `./manage.py` process costs before it does anything (issue 29: the test suite and CI start
well over a hundred of them, tests/test_readme_commands.py alone some 70 in sequence).

Usage, from the project root (about a minute on 2 idle cores, most of it the demo data):

    .venv/bin/python benchmarks/startup.py [--runs 10]

Data: a scratch SQLite database in a temporary directory (DEBUG=1), filled as docs/index.md says: migrate,
`config init`, `demo --no-serve`. No PostgreSQL needed.

Measured: the median CPU time (user + system, of the child process) of --runs runs each of `./manage.py help`
(Django's set-up, the admin included, and the commands' list) and `./manage.py pool list` (a CLI verb on the demo
data). Baseline, same run and interleaved with them: `./manage.py check`, Django's set-up plus the system checks
(the URL configuration, every view, DRF, drf_spectacular, the template tags), which every CLI verb ran before
pools.management.cli.CliCommand; and, for information, the bare interpreter (`python -c pass`).
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    manage = [sys.executable, str(ROOT / "manage.py")]
    with tempfile.TemporaryDirectory(prefix="osmo-bench-startup-") as tmp:
        env = {**os.environ, "DEBUG": "1", "DATABASE_URL": f"sqlite:///{tmp}/db.sqlite3", "OSMO_DATA_DIR": tmp}
        for step in (["migrate"], ["config", "init"], ["demo", "--no-serve"]):
            subprocess.run(manage + step, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=True)
        cases = {"python -c pass": [sys.executable, "-c", "pass"], "./manage.py check": [*manage, "check"],
                 "./manage.py help": [*manage, "help"], "./manage.py pool list": [*manage, "pool", "list"]}
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.runs):  # interleaved: a load that comes and goes weighs on every case alike
            for name, argv in cases.items():
                times[name].append(cpu_seconds(argv, env))
    median = {name: statistics.median(values) for name, values in times.items()}
    baseline = median["./manage.py check"]
    print(f"median CPU of {args.runs} runs each (load {os.getloadavg()[0]:.1f}):")
    for name, seconds in median.items():
        print(f"  {name:24s} {seconds:6.3f} s   {seconds / baseline:5.2f} x the baseline (./manage.py check)")


if __name__ == "__main__":
    main()
