"""Submitting from the browser, in Chromium, on a laptop (1440 px) and on a phone (390 px): a researcher of a demo
project opens the form from the workloads page, reads what each candidate pool would do, submits, follows the
workload to RUNNING on the demo's simulated cluster, and uses "Run again". Under the site's Content-Security-Policy
(no script or style in the page: a refusal shows in the console, and fails the test)."""

import re

import pytest
from playwright.sync_api import expect

from pools.cluster import LogQuery
from pools.models import Backend, ManagedJob
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from tests.support.browser import csp_refusals, fits_the_width, sign_in
from tests.support.simulated import PASSWORD, SIMULATED_NOW
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


def last_log_line(simulated, workload) -> str:
    """The pod's newest log line as the simulated cluster writes it now (what the panel must come to show)."""
    row = ManagedJob.objects.get(workload=str(workload.pk))
    pod = sorted(row.pods)[0]
    text = simulated.cluster(Backend.objects.get(pk=row.backend_id)).read_pod_log(
        row.namespace, pod, LogQuery(tail_lines=1))
    return text.decode().strip()


def read_the_log_panel(page, simulated, workload) -> None:
    """The panel shows the pod's log as the cluster writes it, with the pickers and the download link; followed,
    the poller appends the lines written since, with no reload."""
    panel = page.locator("#log-panel")
    panel.scroll_into_view_if_needed()
    expect(panel.locator("#log-attempt")).to_have_value(str(workload.attempt))
    expect(panel.locator("#log-replica")).to_have_value("0")
    page.check("#log-follow")  # the pickers' change: the view again, now followed
    expect(panel.locator("#log-meta")).to_contain_text("Live log")
    expect(panel.locator("#log-text")).to_contain_text(last_log_line(simulated, workload))
    expect(panel.locator("#log-text")).to_contain_text("starting on")
    download = panel.locator("#log-download")
    expect(download).to_have_attribute("href", re.compile(rf"/api/workloads/{workload.pk}/logs/?\?.*download=1"))
    expect(panel.locator("#log-poller")).to_have_attribute("hx-trigger", re.compile(r"^every \d+m?s$"))
    # The container writes on: two more lines. (Not more: a simulated run lasts 60 to 600 s, drawn from its Job's
    # uid, so the steps to RUNNING and the moves here stay under the shortest run.)
    simulated.at += 10
    newest = last_log_line(simulated, workload)
    assert newest.startswith("step"), newest
    expect(panel.locator("#log-text")).to_contain_text(newest)
    assert panel.locator("#log-text").inner_text().count("starting on") == 1  # appended, not shown twice


def read_the_dry_run(page, pool: str) -> None:
    """Waits until the panel beside the form says `pool` accepts, and opens its pod template."""
    verdict = page.locator(f'#dry-run .dry-run-pool[data-pool="{pool}"]')
    expect(verdict).to_have_attribute("data-accepted", "yes")
    verdict.locator("summary").click()
    expect(verdict.locator("pre")).to_contain_text("nvcr.io/nvidia/pytorch:24.05-py3")
    expect(verdict.locator("pre")).to_contain_text('"python"')


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)], ids=["laptop", "phone"])
def test_a_researcher_submits_from_the_form_follows_it_to_running_and_runs_it_again(live_server, page, simulated,
                                                                                    screenshot, width, height):
    refused = csp_refusals(page)
    page.set_viewport_size({"width": width, "height": height})
    sign_in(page, live_server, "/workloads/", username="alice", password=PASSWORD)
    page.click("#new-workload")
    page.wait_for_url(f"{live_server.url}/workloads/new/")
    expect(page.locator("#dry-run-empty")).to_be_visible()

    page.select_option("#id_project", "llm-research")
    # The project's default pools come first and are chosen, in order.
    expect(page.locator("#id_pool_1")).to_have_value("training")
    expect(page.locator("#id_pool_2")).to_have_value("dev")
    name = f"form-{width}"
    page.fill("#id_name", name)
    page.fill("#id_image", "nvcr.io/nvidia/pytorch:24.05-py3")
    page.fill("#id_command", "python train.py")
    page.fill("#id_args", "--epochs 3")
    page.fill("#id_gpu", "1")
    page.fill("#id_cpu", "2")
    page.fill("#id_memory", "8Gi")
    page.press("#id_memory", "Tab")  # the last change: the dry run follows it
    read_the_dry_run(page, "training")
    expect(page.locator('#dry-run .dry-run-pool[data-pool="dev"]')).to_be_visible()
    expect(page.locator("#dry-run-admission")).to_contain_text("admit")
    fits_the_width(page, width)
    screenshot(page, f"submit-form-{'phone' if width < 600 else 'laptop'}", full_page=True)
    assert not Workload.objects.exists()  # the dry run saved nothing

    page.click("#submit-button")
    page.wait_for_url(re.compile(r"/workloads/[0-9a-f-]{36}/$"))
    workload = Workload.objects.get(name=name)
    assert (workload.source, workload.project.name, workload.pools) == ("web", "llm-research", ["training", "dev"])
    assert workload.request["args"] == ["--epochs", "3"]

    # The workers' part, on the simulated cluster: the cycle admits, dispatch creates the Job, the sync sees it run.
    now = SIMULATED_NOW

    def running() -> bool:
        run_cycle(now)
        simulated.step(5, now)
        workload.refresh_from_db()
        return workload.status == Status.RUNNING
    until(running, f"{name} to run on the simulated cluster", seconds=60,
          detail=lambda: (workload.status, workload.reasons))
    # No reload: the page's live region picks it up.
    expect(page.locator("#workload-status")).to_have_text("RUNNING")
    read_the_log_panel(page, simulated, workload)
    fits_the_width(page, width)
    screenshot(page, f"workload-log-{'phone' if width < 600 else 'laptop'}", full_page=True)

    page.click("#run-again")
    page.wait_for_url(re.compile(rf"/workloads/new/\?from={workload.pk}$"))
    expect(page.locator("#submit-notice")).to_contain_text(f"Filled from workload {name}")
    for box, value in (("name", name), ("image", "nvcr.io/nvidia/pytorch:24.05-py3"), ("command", "python train.py"),
                       ("args", "--epochs 3"), ("gpu", "1"), ("cpu", "2"), ("memory", "8Gi"),
                       ("project", "llm-research"), ("pool_1", "training"), ("pool_2", "dev")):
        expect(page.locator(f"#id_{box}")).to_have_value(value)
    read_the_dry_run(page, "training")  # checked as the filled form shows, before any change
    page.fill("#id_name", f"{name}-again")
    page.press("#id_name", "Tab")
    read_the_dry_run(page, "training")
    page.click("#submit-button")
    page.wait_for_url(re.compile(r"/workloads/[0-9a-f-]{36}/$"))
    expect(page.locator("#workload-status")).to_have_text("PENDING")
    again = Workload.objects.get(name=f"{name}-again")
    assert {k: v for k, v in again.request.items() if k != "name"} == \
        {k: v for k, v in workload.request.items() if k != "name"}
    assert not refused, refused
