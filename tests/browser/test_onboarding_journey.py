"""A new researcher's first hour (issue 44), in Chromium at 1440 and 390 px on the demo's simulated cluster: staff
onboard them from the project's page in one form; they sign in with the password it showed, create a token, submit a
2-replica workload into their one project (preselected), reach its log from the top of the page (first on a phone
once it runs), cancel it, and read both replicas' logs afterwards from the archive."""

import re

import pytest
from playwright.sync_api import expect

from scheduling.models import LogArchive, Status, Workload
from scheduling.run.cycle import run_cycle
from tests.support.browser import csp_refusals, fits_the_width, sign_in
from tests.support.simulated import SIMULATED_NOW
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


def work(simulated, workload, status: str, what: str) -> None:
    """The workers' part: the cycle, dispatch and stops (the sweep), the sync, until `workload` has `status`."""
    def reached() -> bool:
        run_cycle(SIMULATED_NOW)
        simulated.step(5, SIMULATED_NOW)
        workload.refresh_from_db()
        return workload.status == status
    until(reached, what, seconds=60, detail=lambda: (workload.status, workload.reasons))


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)], ids=["laptop", "phone"])
def test_staff_onboard_a_researcher_who_runs_cancels_and_reads_every_replicas_log(live_server, page, simulated, staff,
                                                                                  screenshot, width, height):
    refused = csp_refusals(page)
    page.set_viewport_size({"width": width, "height": height})
    newcomer = f"newbie{width}@example.org"

    # Staff: one form on the project's page.
    sign_in(page, live_server, "/projects/llm-research/")
    page.fill("#add-member-user", newcomer)
    page.click("#add-member-submit")
    expect(page.locator("#onboarded")).to_contain_text(f"Account {newcomer} created and added to project llm-research")
    expect(page.locator("#onboarded")).to_contain_text("training")
    expect(page.locator("#members-region")).to_contain_text(f"user {newcomer}, by name")
    password = page.locator("#onboarded-password").inner_text()
    fits_the_width(page, width)
    page.context.clear_cookies()

    # The researcher: signs in, may use the project's pools, makes a token.
    sign_in(page, live_server, "/profile/permissions/", username=newcomer, password=password)
    expect(page.locator("#permissions-grid")).to_contain_text("project member")
    page.goto(f"{live_server.url}/profile/")
    page.fill("#token-form input[name=name]", "laptop")
    page.click("#token-create")
    expect(page.locator("#new-token-secret")).to_have_text(re.compile(r"\S{20,}"))

    # The form: their one project is preselected.
    page.goto(f"{live_server.url}/workloads/new/")
    expect(page.locator("#id_project")).to_have_value("llm-research")
    name = f"pair-{width}"
    page.fill("#id_name", name)
    page.fill("#id_image", "nvcr.io/nvidia/pytorch:24.05-py3")
    page.fill("#id_command", "python train.py")
    page.fill("#id_replicas", "2")
    page.fill("#id_gpu", "1")
    page.fill("#id_cpu", "2")
    page.fill("#id_memory", "8Gi")
    page.press("#id_memory", "Tab")
    expect(page.locator('#dry-run .dry-run-pool[data-pool="training"]')).to_have_attribute("data-accepted", "yes")
    page.click("#submit-button")
    page.wait_for_url(re.compile(r"/workloads/[0-9a-f-]{36}/$"))
    workload = Workload.objects.get(name=name)
    assert (workload.project.name, workload.replicas, workload.submitter_name) == ("llm-research", 2, newcomer)

    work(simulated, workload, Status.RUNNING, f"{name} to run")
    expect(page.locator("#workload-status")).to_have_text("RUNNING")
    expect(page.locator("#workload-live")).to_have_attribute("data-started", "")
    panel_top = page.locator("#log-panel").bounding_box()["y"]
    live_top = page.locator("#workload-live").bounding_box()["y"]
    assert (panel_top < live_top) == (width < 600), (panel_top, live_top)  # first on a phone once it runs
    page.click("#jump-to-logs")
    expect(page).to_have_url(re.compile(r"#log-panel$"))
    expect(page.locator("#log-meta")).to_contain_text("Live log")
    screenshot(page, f"onboarded-running-{'phone' if width < 600 else 'laptop'}", full_page=True)

    # Cancel it (it runs: the confirmation box first); the stop keeps both replicas' logs before the delete.
    page.locator("#cancel-confirm").check()
    page.click("#cancel-button")
    work(simulated, workload, Status.FAILED_CANCELED, f"{name} to be canceled")
    assert sorted(LogArchive.objects.filter(workload=workload).values_list("replica", "state")) == [
        (0, "KEPT"), (1, "KEPT")]
    page.reload()
    expect(page.locator("#workload-status")).to_have_text("FAILED_CANCELED")
    for replica in ("0", "1"):
        page.select_option("#log-replica", replica)
        expect(page.locator("#log-replica")).to_have_value(replica)
        expect(page.locator("#log-archived")).to_be_visible()
        expect(page.locator("#log-text")).to_contain_text("starting on")
    fits_the_width(page, width)
    screenshot(page, f"onboarded-canceled-{'phone' if width < 600 else 'laptop'}", full_page=True)
    assert not refused, refused
