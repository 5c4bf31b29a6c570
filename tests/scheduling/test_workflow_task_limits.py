"""The tasks of one OSMO workflow file are counted before any group is read or checked (issue 42): 5,500 tasks in
100 groups of 55 passed the group limit (100) and cost seconds of CPU per dry run. Over OSMO_MAX_WORKFLOW_TASKS (all
groups together) or OSMO_MAX_TASKS_PER_GROUP it is a 400 naming the limit, through the OSMO path and the form."""

import re
import time

import pytest

from scheduling.models import Workload
from tests.scheduling.test_osmo import submit_workflow
from tests.scheduling.test_submit_form import error_of, form

pytestmark = pytest.mark.django_db


def workflow(groups: int, tasks: int) -> str:
    body = "".join(f"  - name: g{g}\n    tasks:\n" + "".join(
        f"    - {{name: t{t}, image: busybox}}\n" for t in range(tasks)) for g in range(groups))
    return f"workflow:\n  name: big\n  resources:\n    default: {{cpu: 1, gpu: 0, memory: 1Gi}}\n  groups:\n{body}"


def test_5500_tasks_in_100_groups_are_refused_naming_the_limit_before_any_group_is_checked(researcher_api):
    text = workflow(100, 55)
    started = time.process_time()
    answer = submit_workflow(researcher_api, text=text, query="?dry_run=true", variables=())
    print(f"\n5,500 tasks, {len(text):,} bytes: refused in {time.process_time() - started:.2f} CPU s")
    assert answer.status_code == 400, answer.json()
    body = answer.json()
    assert body["field"] == "workflow.tasks" and body["limit"] == "OSMO_MAX_WORKFLOW_TASKS"
    assert "5500 tasks are over the limit of 1000 tasks" in body["detail"]
    assert not Workload.objects.exists()


def test_one_group_over_its_task_limit_is_refused_naming_the_group(researcher_api, settings):
    settings.OSMO_MAX_TASKS_PER_GROUP = 8
    answer = submit_workflow(researcher_api, text=workflow(2, 9), query="?dry_run=true", variables=())
    assert answer.status_code == 400, answer.json()
    body = answer.json()
    assert body["field"] == "workflow.groups[0].tasks" and body["limit"] == "OSMO_MAX_TASKS_PER_GROUP"


def test_a_workflow_within_both_limits_goes_on(researcher_api, settings):
    settings.OSMO_MAX_WORKFLOW_TASKS, settings.OSMO_MAX_TASKS_PER_GROUP = 6, 3
    answer = submit_workflow(researcher_api, text=workflow(2, 3), query="?dry_run=true", variables=())
    assert answer.status_code == 200, answer.json()


def test_the_form_refuses_a_pasted_workflow_over_the_task_limit(world, researcher_client, settings):
    settings.OSMO_MAX_WORKFLOW_TASKS = 10
    answer = researcher_client.post("/workloads/new/", form(mode="osmo", file=workflow(3, 4)))
    assert answer.status_code == 400
    shown = error_of(answer.content.decode(), "file")
    assert re.search(r"12 tasks are over the limit of 10 tasks .*OSMO_MAX_WORKFLOW_TASKS", shown), shown
    assert not Workload.objects.exists()
