"""The researcher pages' HTTP examples run as printed, as a researcher onboarded through the one-step door, not as
staff (issue 44): staff add them to project perception (`POST /api/projects/perception/members/`), they make their
token with the page's own `curl -u` command, and then every `curl` example of docs/researcher/getting-started.md and
docs/researcher/logs.md that needs only `$OSMO`, `$TOKEN` and `$ID` runs with bash against the live site of the
demo's configuration, in the pages' order, each answered 2xx (`curl` is called with `--fail-with-body`). The demo's
workers run between the submission and the first log (the cycle, dispatch, the sync of the simulated cluster)."""

import datetime as dt
import json
import re
import subprocess
from pathlib import Path

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from tests.support.simulated import SIMULATED_NOW
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)
PAGES = Path(__file__).resolve().parents[1] / "docs" / "researcher"
# What the examples may need besides themselves: a file of yours or a workflow submitted by another example.
NEEDS_MORE = ("resnet-osmo", "sim-train", "-u alice", "jq ")


def curl_examples(page: str) -> list[str]:
    text = (PAGES / page).read_text()
    blocks = re.findall(r"```console\n(.*?)```", text, re.DOTALL)
    # A command runs from its `$ ` to the next one (its JSON may go on over lines inside its quotes).
    commands = [part.strip() for block in blocks for part in re.split(r"^\$ ", block, flags=re.MULTILINE)[1:]]
    commands = [command for command in commands if command.startswith("curl ")]
    return [command for command in commands if not any(word in command for word in NEEDS_MORE)]


def bash(command: str, env: dict, cwd: Path) -> str:
    done = subprocess.run(["bash", "-c", 'curl() { command curl --fail-with-body --max-time 30 "$@"; }\n' + command],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, (command, done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


def run_until_running(simulated, workload) -> None:
    """The demo's workers: the cycle admits, dispatch creates the Job, the sync sees it run."""
    assert workload.submitter_name == "newcomer" and workload.project.name == "perception"

    def running() -> bool:
        run_cycle(SIMULATED_NOW)
        simulated.step(5, SIMULATED_NOW)
        workload.refresh_from_db()
        return workload.status == Status.RUNNING
    until(running, "the example's workload to run", seconds=60, detail=lambda: (workload.status, workload.reasons))


def test_the_researcher_examples_run_as_a_researcher_onboarded_in_one_step(live_server, simulated, staff, tmp_path,
                                                                          settings):
    settings.OSMO_LOG_FOLLOW_SECONDS = 2  # the follow example ends on its own soon
    staff_api = APIClient()
    staff_api.force_authenticate(staff)
    onboarded = staff_api.post("/api/projects/perception/members/", {"user": "newcomer"}, format="json").json()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OSMO": live_server.url}
    expires = (timezone.now() + dt.timedelta(days=30)).date().isoformat()
    made = json.loads(bash(f'curl -s -u "newcomer:{onboarded["password"]}" -X POST -H "Content-Type: application/json"'
                           f' -d \'{{"expires_at": "{expires}"}}\' "$OSMO/api/auth/access_token/laptop"', env,
                           tmp_path))
    env["TOKEN"] = made["token"]
    profile = json.loads(bash(curl_examples("getting-started.md")[0], env, tmp_path))
    assert (profile["id"], profile["is_staff"], profile["default_project"]) == ("newcomer", False, "perception")

    ran = 1
    for page in ("getting-started.md", "logs.md"):
        for command in curl_examples(page)[1 if page == "getting-started.md" else 0:]:
            if "$ID" in command and "ID" not in env:
                continue  # no workload yet
            answer = bash(command, env, tmp_path)
            ran += 1
            if command.rstrip().endswith("$OSMO/api/workloads/") and "-X POST" in command:
                env["ID"] = json.loads(answer)["id"]
                run_until_running(simulated, Workload.objects.get(pk=env["ID"]))
    assert ran >= 10, ran
    assert Workload.objects.get(pk=env["ID"]).stop_status == Status.FAILED_CANCELED  # the cancel example ran
