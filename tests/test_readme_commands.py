"""Every CLI command in README.md works as printed, on a fresh data directory.

The README's rule: a ```sh (or ```shell, ```bash) block holds CLI commands only, each starting with
`./manage.py`; one may go on over lines that end in `\\` or feed a heredoc (`<<'EOF'` ... `EOF`). This test
runs every such command with bash from the checkout, in the README's order, after what `make install` does
beyond installing (the data directory's settings file, `python -m osmo_site.env`), on a scratch data directory
whose SQLite file is the database (the README's own setup block migrates and loads the demo). A command fails
the test when it exits non-zero (with `pipefail`, so `./manage.py ... | head` counts) or prints a Python
traceback. Commands that serve or need make (`make demo`, `runserver`) go in ```console blocks, which are not run.

The commands run with the environment of the test minus every setting the project reads, so the settings file
has to do its job; `./manage.py` starts with the `python3` on PATH and hands itself to `.venv/bin/python`
(when the checkout has no `.venv`, the interpreter running this test comes first on PATH instead).
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BASE_DIR = Path(__file__).resolve().parents[1]
README = BASE_DIR / "README.md"
RUN_LANGUAGES = {"sh", "shell", "bash"}
FENCE = re.compile(r"^\s*```\s*([\w+-]*)\s*$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
# Variables the project reads: none may leak from the test's environment into the commands.
PROJECT_VARIABLES = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL",
                     "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "REQUIRE_SERVICES", "TEST_REDIS_URL", "REDIS_URL")
PROJECT_PREFIXES = ("OSMO_", "ACCESS_")


def readme_commands(text: str) -> list[str]:
    """The commands of the runnable blocks, in order; refuses a line in such a block that is not a CLI command."""
    commands: list[str] = []
    language = None  # inside a fence: its language
    pending: list[str] = []
    heredoc_end = None
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if heredoc_end is not None:
            pending.append(line)
            if line.strip() == heredoc_end:
                commands.append("\n".join(pending))
                pending, heredoc_end = [], None
            continue
        if fence and language is None:
            language = fence.group(1).lower()
            continue
        if fence:
            assert not pending, f"README.md line {number}: the block ends inside a command"
            language = None
            continue
        if language not in RUN_LANGUAGES or (not pending and (not line.strip() or line.lstrip().startswith("#"))):
            continue
        if not pending and not line.startswith("./manage.py "):
            raise AssertionError(f"README.md line {number}: a ```{language} block holds only ./manage.py commands "
                                 f"(put others in a ```console block): {line!r}")
        pending.append(line)
        if line.endswith("\\"):
            continue
        heredoc = HEREDOC.search(line)
        if heredoc:
            heredoc_end = heredoc.group(2)
            continue
        commands.append("\n".join(pending))
        pending = []
    assert not pending and heredoc_end is None, "README.md ends inside a command"
    return commands


def scratch_environment(data_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in PROJECT_VARIABLES and not key.startswith(PROJECT_PREFIXES)}
    env["OSMO_DATA_DIR"] = str(data_dir)
    if not (BASE_DIR / ".venv" / "bin" / "python").exists():
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_readme_extraction_follows_its_rules():
    text = """
```console
$ make demo
```
```sh
# a comment
./manage.py pool list | head -3
./manage.py config show \\
  POOL training
./manage.py create -f /dev/stdin <<'EOF'
kind: pool
EOF
```
```json
{"not": "run"}
```
"""
    assert readme_commands(text) == [
        "./manage.py pool list | head -3",
        "./manage.py config show \\\n  POOL training",
        "./manage.py create -f /dev/stdin <<'EOF'\nkind: pool\nEOF",
    ]
    with pytest.raises(AssertionError, match=r"holds only \./manage\.py commands"):
        readme_commands("```sh\npython manage.py pool list\n```\n")


def test_the_readme_shows_one_way_to_run_the_cli():
    other_ways = re.compile(r"(\bpython[\d.]*|/bin/python|DEBUG=1)\s+(\S*/)?manage\.py")
    shown = [line for line in README.read_text(encoding="utf-8").splitlines() if other_ways.search(line)]
    assert not shown, f"README.md runs the CLI as ./manage.py only: {shown}"


def test_every_cli_command_in_the_readme_runs_as_printed(tmp_path):
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert len(commands) >= 15, commands
    env = scratch_environment(tmp_path / "data")
    done = subprocess.run([sys.executable, "-m", "osmo_site.env"], cwd=BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    failures = []
    for command in commands:
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=BASE_DIR, env=env,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0 or "Traceback (most recent call last)" in done.stderr:
            failures.append(f"$ {command}\nexit status {done.returncode}\n{done.stdout[-1500:]}{done.stderr[-3000:]}")
    assert not failures, "README commands that fail:\n\n" + "\n\n".join(failures)


EXAMPLE = re.compile(r"^<!-- example: ([\w-]+)[^\n]*-->\n```\w*\n(.*?)^```", re.M | re.S)
# Run in the demo's data directory by `./manage.py shell`: the README's examples through the doors they document
# (the API body, OSMO's workflow path), as the demo's admin, then a sync of the KAI cluster and an admission cycle.
EXAMPLES_PROBE = """
import json, sys
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient
from scheduling.models import Workload

examples = json.loads(sys.stdin.read())
api = APIClient(SERVER_NAME="localhost")
api.force_authenticate(get_user_model().objects.get(username="admin"))
out = {}
answer = api.post("/api/workloads/", json.loads(examples["request"]), format="json")
out["request"] = [answer.status_code, answer.json()]
workflow = {"file": examples["osmo-workflow"], "set_variables": ["dataset=imagenet"]}
answer = api.post("/api/pool/kai-training/workflow?priority=NORMAL", workflow, format="json")
out["workflow_in_default"] = [answer.status_code, answer.json()]
out["profile"] = api.patch("/api/profile/", {"default_project": "llm-research"}, format="json").status_code
answer = api.post("/api/pool/kai-training/workflow?priority=NORMAL", workflow, format="json")
out["workflow"] = [answer.status_code, answer.json()]
call_command("sync", "kai-cluster", "--once", stdout=sys.stderr)
call_command("schedule", "--once", stdout=sys.stderr)
out["after_cycle"] = {f"{w.workflow or '-'}/{w.name}": [w.status, w.pool.name if w.pool else None, w.reasons]
                      for w in Workload.objects.select_related("pool")}
print("EXAMPLES " + json.dumps(out, default=str))
"""


def readme_examples(text: str) -> dict[str, str]:
    """The code blocks the README marks `<!-- example: NAME ... -->`, by name."""
    return {name: body for name, body in EXAMPLE.findall(text)}


def test_the_readme_request_and_workflow_examples_run_against_the_demo(tmp_path):
    """The request example and the OSMO workflow example, posted as printed to the demo's data (the README's own
    setup block: migrate, config init, demo --no-serve), are accepted and admitted; the workflow from a project
    with no guarantee there is refused with the hint in the syntax of OSMO's path."""
    text = README.read_text(encoding="utf-8")
    examples = readme_examples(text)
    assert set(examples) == {"request", "osmo-workflow"}, examples.keys()
    env = scratch_environment(tmp_path / "data")
    done = subprocess.run([sys.executable, "-m", "osmo_site.env"], cwd=BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    setup = readme_commands(text)[:3]
    assert setup == ["./manage.py migrate --noinput", "./manage.py config init", "./manage.py demo --no-serve"]
    for command in setup:
        done = subprocess.run(["bash", "-c", command], cwd=BASE_DIR, env=env, capture_output=True, text=True,
                              timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
    done = subprocess.run(["./manage.py", "shell", "-c", EXAMPLES_PROBE], cwd=BASE_DIR, env=env,
                          input=json.dumps(examples), capture_output=True, text=True, timeout=180)
    lines = [line for line in done.stdout.splitlines() if line.startswith("EXAMPLES ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
    out = json.loads(lines[0].removeprefix("EXAMPLES "))

    assert out["request"][0] == 201, out["request"]
    status, refused = out["workflow_in_default"]
    assert status == 400 and "with ?priority=LOW on the workflow path" in refused["detail"], refused
    assert "priority: low" not in refused["detail"]
    assert out["profile"] == 200
    assert out["workflow"][0] == 200, out["workflow"]
    name = out["workflow"][1]["name"]
    assert out["after_cycle"].keys() == {"-/resnet", f"{name}/train"}
    for key, (status, pool, reasons) in out["after_cycle"].items():
        # Admitted (handed to KAI in kai-training, its Job created), not waiting on QUOTA or anything else.
        assert status in ("ADMITTED", "SCHEDULING", "RUNNING") and pool == "kai-training", (key, status, reasons)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_stops_at_once_when_the_interpreter_is_too_old(tmp_path):
    old = tmp_path / "python-old"
    old.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "Python 3.10.13" && exit 0\nexit 1\n')
    old.chmod(0o755)
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "install", f"PYTHON={old}", f"VENV={venv}"], cwd=BASE_DIR,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert f"needs Python 3.11 or newer; PYTHON={old} is Python 3.10.13" in done.stderr
    assert "PYTHON=python3.12" in done.stderr
    assert not venv.exists()
