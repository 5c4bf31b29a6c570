"""OSMO's CLI against the site as `make demo` serves it: SQLite, DEBUG=1, `manage.py runserver` in its own process
(the rest of tests/osmo_cli/ runs on the suite's PostgreSQL). Found running the real CLI by hand against the demo:
`osmo pool list` (and `quota list`, /quotas/) answered 500 "malformed JSON" on SQLite as soon as one workload was
pending, from the pending-demand query."""

import subprocess
import sys

import requests

from tests.osmo_cli.client import PLAIN, OsmoClient
from tests.sqlite_driver import ADMIN
from tests.support.ports import free_port
from tests.test_sqlite_writes import ROOT, driver, manage, site_env
from tests.waiting import until

USAGE_FIELDS = {"quota_used", "quota_free", "quota_limit", "total_usage", "total_capacity", "total_free"}


def _answers(url: str) -> bool:
    try:
        return requests.get(f"{url}/api/version", timeout=5).status_code == 200
    except requests.ConnectionError:
        return False


def test_pool_list_with_a_workflow_pending_on_the_demos_sqlite(tmp_path):
    driver("setup", tmp_path)
    created = manage(tmp_path, "token", "create", ADMIN, "laptop")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.strip().splitlines()[-1]
    url = f"http://127.0.0.1:{free_port()}"
    server = subprocess.Popen([sys.executable, "manage.py", "runserver", url.removeprefix("http://"), "--noreload"],
                              cwd=ROOT, env=site_env(tmp_path), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        until(lambda: _answers(url), "runserver answers", seconds=60)
        osmo = OsmoClient(url)
        osmo.login(secret)
        osmo.request("PATCH", "api/profile/", payload={"default_project": "perception"})
        # No admission cycle runs here: the workflow stays PENDING, counted as the project's pending demand.
        assert osmo.submit(PLAIN, pool="training")["name"] == "plain-train-1"
        assert osmo.query("plain-train-1")["status"] == "PENDING"

        pools = osmo.pool_list()

        listed = {p["name"]: p for s in pools["node_sets"] for p in s["pools"]}
        assert "training" in listed and set(pools["resource_sum"]) == USAGE_FIELDS
        assert set(listed["training"]["resource_usage"]) == USAGE_FIELDS
        quota = manage(tmp_path, "quota", "list", "--pool", "training")
        assert quota.returncode == 0, quota.stderr
        rows = [line.split() for line in quota.stdout.splitlines() if " perception " in line]
        assert [(row[2], row[7]) for row in rows] == [("perception", "1")]  # PROJECT, PENDING
    finally:
        server.terminate()
        server.wait(timeout=30)
