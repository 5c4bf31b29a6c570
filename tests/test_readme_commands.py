"""Every CLI command in README.md and in the documentation pages (docs/**/*.md) works as printed, on a fresh data
directory.

The rule of every page: a ```console block's lines that begin with `$ ` are commands, and a command may go on over
lines that end in `\\` or feed a heredoc (`<<'EOF'` ... `EOF`); its other lines are output, not checked. A ```sh
(or ```shell, ```bash) block holds commands only, every line. A runnable command is a `./manage.py` command. A
block that cannot run here (it serves, as `make demo` does, or needs a cluster, a database server or a token) is
marked by an HTML comment on the line before it, `<!-- not run: why -->`; a command that is not `./manage.py ...`
in an unmarked block fails the extraction, so nothing is left unrun by accident.

This test runs every command with bash from the checkout. After what `make install` does beyond installing (the
data directory's settings file, `python -m osmo_site.env`), the README's setup block (it migrates and loads the
demo) runs once per test process on a scratch data directory whose SQLite file is the database; then each page's
commands (the README's after that block) run in order on a copy of that directory. A command fails the test when
it exits non-zero (with `pipefail`, so `./manage.py ... | head` counts) or prints a Python traceback.

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
DOCS = BASE_DIR / "docs"
RUN_LANGUAGES = {"sh", "shell", "bash"}
PROMPT_LANGUAGES = {"console"}
FENCE = re.compile(r"^\s*```\s*([\w+-]*)\s*$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*\S.*-->\s*$")
# Variables the project reads: none may leak from the test's environment into the commands.
PROJECT_VARIABLES = ("DJANGO_SETTINGS_MODULE", "DATABASE_URL", "DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL",
                     "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "REQUIRE_SERVICES", "TEST_REDIS_URL", "REDIS_URL")
PROJECT_PREFIXES = ("OSMO_", "ACCESS_")


def documents() -> list[Path]:
    """The README, then every page of the documentation site, by path."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def located_commands(text: str, name: str = "README.md") -> list[tuple[str, str]]:
    """(`name:line`, command) of the runnable blocks, in order; refuses a command in such a block that is not a
    CLI command."""
    commands: list[tuple[str, str]] = []
    language = None  # inside a fence: its language
    skipped = False  # inside a fence marked `<!-- not run: ... -->`
    marked = False  # the line before a fence was that mark
    pending: list[str] = []
    start = 0
    heredoc_end = None
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if heredoc_end is not None:
            pending.append(line)
            if line.strip() == heredoc_end:
                commands.append((f"{name}:{start}", "\n".join(pending)))
                pending, heredoc_end = [], None
            continue
        if fence and language is None:
            language, skipped, marked = fence.group(1).lower(), marked, False
            continue
        if fence:
            assert not pending, f"{name} line {number}: the block ends inside a command"
            language = None
            continue
        if language is None:
            marked = bool(NOT_RUN.match(line)) or (marked and not line.strip())
            continue
        if skipped or language not in RUN_LANGUAGES | PROMPT_LANGUAGES:
            continue
        if not pending:
            if language in PROMPT_LANGUAGES:
                if not line.startswith("$ "):
                    continue  # output
                line = line[2:]
            elif not line.strip() or line.lstrip().startswith("#"):
                continue
            if not line.startswith("./manage.py "):
                raise AssertionError(f"{name} line {number}: a runnable block holds only ./manage.py commands; "
                                     f"mark a block that cannot run with <!-- not run: why --> before it: {line!r}")
            start = number
        pending.append(line)
        if line.endswith("\\"):
            continue
        heredoc = HEREDOC.search(line)
        if heredoc:
            heredoc_end = heredoc.group(2)
            continue
        commands.append((f"{name}:{start}", "\n".join(pending)))
        pending = []
    assert not pending and heredoc_end is None, f"{name} ends inside a command"
    return commands


def readme_commands(text: str) -> list[str]:
    """The commands of the runnable blocks of one page, in order."""
    return [command for _, command in located_commands(text)]


def all_commands() -> list[tuple[str, str]]:
    return [located for path in documents()
            for located in located_commands(path.read_text(encoding="utf-8"), str(path.relative_to(BASE_DIR)))]


def scratch_environment(data_dir: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if key not in PROJECT_VARIABLES and not key.startswith(PROJECT_PREFIXES)}
    env["OSMO_DATA_DIR"] = str(data_dir)
    if not (BASE_DIR / ".venv" / "bin" / "python").exists():
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_the_extraction_follows_its_rules():
    text = """
```console
$ make demo
```
<!-- not run: needs a cluster -->
```console
$ kubectl apply -k deploy/base
```
```console
$ ./manage.py pool list | head -3
POOL NAME   STATUS
$ ./manage.py config show \\
    POOL training
```
```sh
# a comment
./manage.py create -f /dev/stdin <<'EOF'
kind: pool
EOF
```
```json
{"not": "run"}
```
"""
    with pytest.raises(AssertionError, match=r"line 3: a runnable block holds only \./manage\.py commands"):
        readme_commands(text)
    text = text.replace("```console\n$ make demo\n```\n", "")
    assert located_commands(text, "page.md") == [
        ("page.md:7", "./manage.py pool list | head -3"),
        ("page.md:9", "./manage.py config show \\\n    POOL training"),
        ("page.md:14", "./manage.py create -f /dev/stdin <<'EOF'\nkind: pool\nEOF"),
    ]
    with pytest.raises(AssertionError, match=r"holds only \./manage\.py commands"):
        readme_commands("```sh\npython manage.py pool list\n```\n")


def test_the_pages_show_one_way_to_run_the_cli():
    other_ways = re.compile(r"(\bpython[\d.]*|/bin/python|DEBUG=1)\s+(\S*/)?manage\.py")
    shown = [f"{path.relative_to(BASE_DIR)}: {line}" for path in documents()
             for line in path.read_text(encoding="utf-8").splitlines() if other_ways.search(line)]
    assert not shown, f"the pages run the CLI as ./manage.py only: {shown}"


SETUP = ["./manage.py migrate --noinput", "./manage.py config init", "./manage.py demo --no-serve"]


def run_commands(commands: list[tuple[str, str]], env: dict[str, str], quiet: bool = False) -> list[str]:
    """Runs each command as printed, in order; the failures, each with its place, output and exit status.
    `quiet`: a command that writes to stderr (a warning a newcomer would wonder about) fails too."""
    failures = []
    for where, command in commands:
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=BASE_DIR, env=env,
                              capture_output=True, text=True, timeout=180)
        if done.returncode != 0 or "Traceback (most recent call last)" in done.stderr or (quiet and done.stderr):
            failures.append(f"{where}\n$ {command}\nexit status {done.returncode}\n"
                            f"{done.stdout[-1500:]}{done.stderr[-3000:]}")
    return failures


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory) -> Path:
    """A data directory after the README's setup block (migrate, config init, demo --no-serve), run as printed
    once per test process; each test below works on its own copy of it."""
    commands = located_commands(README.read_text(encoding="utf-8"))[:3]
    assert [command for _, command in commands] == SETUP
    data = tmp_path_factory.mktemp("readme") / "data"
    env = scratch_environment(data)
    done = subprocess.run([sys.executable, "-m", "osmo_site.env"], cwd=BASE_DIR, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    failures = run_commands(commands, env, quiet=True)
    assert not failures, "the README's setup block fails:\n\n" + "\n\n".join(failures)
    return data


def copy_of(demo_data: Path, tmp_path: Path) -> dict[str, str]:
    """The environment of commands run on a fresh copy of the demo's data directory."""
    data = tmp_path / "data"
    shutil.copytree(demo_data, data)
    return scratch_environment(data)


def test_the_readme_begins_with_the_setup_and_most_pages_have_commands():
    commands = all_commands()
    assert [command for _, command in commands[:3]] == SETUP
    assert len({where.split(":")[0] for where, _ in commands}) >= 15, commands


@pytest.mark.parametrize("document", [str(path.relative_to(BASE_DIR)) for path in documents()
                                      if located_commands(path.read_text(encoding="utf-8"))])
def test_every_cli_command_of_the_readme_and_the_pages_runs_as_printed(document, demo_data, tmp_path):
    """One page's commands, in order, on a copy of the data the README's setup block made (for the README, its
    commands after that block): a newcomer can follow any one page after the setup."""
    commands = located_commands((BASE_DIR / document).read_text(encoding="utf-8"), document)
    if document == "README.md":
        commands = commands[3:]
    failures = run_commands(commands, copy_of(demo_data, tmp_path))
    assert not failures, "commands that fail:\n\n" + "\n\n".join(failures)


EXAMPLE = re.compile(r"^<!-- example: ([\w-]+)[^\n]*-->\n```\w*\n(.*?)^```", re.M | re.S)
# Run in the demo's data directory by `./manage.py shell`: the pages' examples through the doors they document
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
    """The code blocks a page marks `<!-- example: NAME ... -->`, by name."""
    return {name: body for name, body in EXAMPLE.findall(text)}


def test_the_readme_request_and_workflow_examples_run_against_the_demo(demo_data, tmp_path):
    """The request example and the OSMO workflow example (docs/researcher/submit.md), posted as printed to the
    demo's data (the README's own setup block: migrate, config init, demo --no-serve), are accepted and admitted;
    the workflow from a project with no guarantee there is refused with the hint in the syntax of OSMO's path."""
    examples = {name: body for path in documents() for name, body in readme_examples(path.read_text()).items()}
    assert set(examples) == {"request", "osmo-workflow"}, examples.keys()
    env = copy_of(demo_data, tmp_path)
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
