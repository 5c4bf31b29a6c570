"""Every example of the researcher pages (docs/researcher/) runs as printed as a researcher onboarded through the
one-step door, not as staff (issue 44): staff add them to project perception (`POST /api/projects/perception/
members/`), and then every command of every block marked `<!-- not run: ... (tests/test_researcher_docs.py runs it
as a researcher) -->` (tests/test_readme_commands.py cannot: they need a running site and a token) runs, in the
pages' order (getting-started.md first), against the live site of the demo's configuration, each answered 2xx:
`curl` lines with bash (`curl` is called with `--fail-with-body`; `$OSMO`, `$TOKEN`, `$ID` and `$USER` set as the
pages say), `./manage.py ... --as-user` lines in the test's process (the site's database). The pages' own files stand
in for "a file of yours": `resnet-osmo.yaml` is submit.md's OSMO workflow, `job.yaml` its gpuctl job and
`request.yaml` its CLI request. The researcher is the one the pages call `alice` ("your account"): `-u alice`
is answered with their password as curl would prompt for it, `--as-user alice` names them. Every other block of the
pages is either run by tests/test_readme_commands.py (unmarked) or marked with why it cannot run here (the osmo
CLI, a browser, a server that serves until stopped, the demo's KAI pool): the test counts both kinds and asserts
how many it ran. The demo's workers run between each submission and its first log (the cycle, dispatch, the sync
of the simulated cluster)."""

import datetime as dt
import io
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from tests.support.simulated import SIMULATED_NOW
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)
PAGES = Path(__file__).resolve().parents[1] / "docs" / "researcher"
RUNS_HERE = "tests/test_researcher_docs.py runs it as a researcher"
MARK = re.compile(r"^\s*<!--\s*not run:\s*(\S.*?)\s*-->\s*$")
BLOCK = re.compile(r"^```console\n(.*?)^```", re.DOTALL | re.MULTILINE)
RESEARCHER = "newcomer@example.org"  # onboarded by e-mail: the e-mail notification example needs an address


def pages() -> list[Path]:
    """getting-started.md first (it makes the token and the workloads the others name), then by name."""
    return sorted(PAGES.glob("*.md"), key=lambda path: (path.name != "getting-started.md", path.name))


def blocks(text: str) -> list[tuple[str | None, list[str]]]:
    """(the block's `not run` reason or None, its commands) of each ```console block, in order. A command runs from
    its `$ ` to the next one (its JSON may go on over lines inside its quotes)."""
    found = []
    for block in BLOCK.finditer(text):
        before = text[:block.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.match(before)
        commands = [part.strip() for part in re.split(r"^\$ ", block.group(1), flags=re.MULTILINE)[1:]]
        found.append((mark.group(1) if mark else None, commands))
    return found


def fenced(text: str, first_line: str) -> str:
    """The body of the fenced block of `text` that starts with `first_line`."""
    return re.search(rf"^```\w*\n({re.escape(first_line)}\n.*?)^```", text, re.DOTALL | re.MULTILINE).group(1)


def write_the_pages_files(cwd: Path) -> None:
    submit = (PAGES / "submit.md").read_text()
    (cwd / "resnet-osmo.yaml").write_text(fenced(submit, "workflow:"))
    (cwd / "job.yaml").write_text(fenced(submit, "kind: training"))
    heredoc = re.search(r"<<'EOF'\n(.*?)^EOF$", submit, re.DOTALL | re.MULTILINE).group(1)
    (cwd / "request.yaml").write_text(heredoc)


def bash(command: str, env: dict, cwd: Path) -> str:
    done = subprocess.run(["bash", "-c", 'curl() { command curl --fail-with-body --max-time 30 "$@"; }\n' + command],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (command, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


class Reader(io.StringIO):
    """A terminal read by someone who stops a follow (`-f`) with Ctrl-C once the replica's first line is there."""

    def __init__(self, follows: bool):
        super().__init__()
        self.follows = follows

    def write(self, text: str) -> int:
        written = super().write(text)
        if self.follows and "starting on" in self.getvalue():
            raise KeyboardInterrupt
        return written


def manage(command: str, env: dict) -> str:
    """A `./manage.py` line as bash would split it (its variables from `env`), run in this process."""
    words = shlex.split(re.sub(r"\$(\w+)", lambda m: env[m.group(1)], command))
    assert words[0] == "./manage.py", command
    out = Reader(follows="-f" in words and "logs" in words)
    try:
        call_command(*words[1:], stdout=out, stderr=out)
    except CommandError as stopped:  # Ctrl-C: the command's own "interrupted" (130)
        assert out.follows and stopped.returncode == 130, (command, stopped)
    return out.getvalue()


def run_until_running(simulated, workload) -> None:
    """The demo's workers: the cycle admits, dispatch creates the Job, the sync sees it run."""
    assert workload.submitter_name == RESEARCHER and workload.project.name == "perception"

    def running() -> bool:
        run_cycle(SIMULATED_NOW)
        simulated.step(5, SIMULATED_NOW)
        workload.refresh_from_db()
        return workload.status == Status.RUNNING
    until(running, f"{workload.name} to run", seconds=60, detail=lambda: (workload.status, workload.reasons))


def test_every_researcher_example_runs_as_a_researcher_onboarded_in_one_step(live_server, simulated, staff, tmp_path,
                                                                             settings, monkeypatch):
    settings.OSMO_LOG_FOLLOW_SECONDS = 2  # the follow examples end on their own soon
    staff_api = APIClient()
    staff_api.force_authenticate(staff)
    onboarded = staff_api.post("/api/projects/perception/members/", {"user": RESEARCHER}, format="json").json()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OSMO": live_server.url, "USER": RESEARCHER}
    write_the_pages_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    expires = (dt.date.today() + dt.timedelta(days=30)).isoformat()

    ran, not_run, elsewhere = [], [], []
    for page in pages():
        for reason, commands in blocks(page.read_text()):
            if reason is None:
                elsewhere.append((page.name, commands))
                continue
            if RUNS_HERE not in reason:
                not_run.append((page.name, reason))
                continue
            for command in commands:
                if command.startswith("export TOKEN="):
                    continue  # the token the command before printed: set below
                command = (command.replace("-u alice", f"-u '{RESEARCHER}:{onboarded['password']}'")
                           .replace("--as-user alice", f"--as-user {RESEARCHER}")
                           .replace('"2027-01-31"', f'"{expires}"'))
                answer = manage(command, env) if command.startswith("./manage.py ") else bash(command, env, tmp_path)
                ran.append((page.name, command))
                if "/api/auth/access_token/" in command:
                    env["TOKEN"] = json.loads(answer)["token"]
                    profile = json.loads(bash('curl -s -H "Authorization: Bearer $TOKEN" $OSMO/api/profile/', env,
                                              tmp_path))
                    assert (profile["id"], profile["is_staff"], profile["default_project"]) == (
                        RESEARCHER, False, "perception")
                elif command.rstrip().endswith("$OSMO/api/workloads/") and "-X POST" in command:
                    env["ID"] = json.loads(answer)["id"]
                    run_until_running(simulated, Workload.objects.get(pk=env["ID"]))
    # 25 commands run here; 11 console blocks say why they cannot (the osmo CLI, a file or workload named by the reader,
    # the demo's KAI pool, staff's part, a server that serves on); 3 blocks run in
    # tests/test_readme_commands.py.
    assert (len(ran), len(not_run), len(elsewhere)) == (25, 11, 3), (ran, not_run, elsewhere)
    assert Workload.objects.get(pk=env["ID"]).stop_status == Status.FAILED_CANCELED  # the cancel examples ran
