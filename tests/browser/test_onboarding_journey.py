"""A new researcher's first hour (issue 44), in Chromium at 1440 and 390 px on the demo's simulated cluster, under
DEBUG=1 as `make demo` serves (django-htmx's debug script then replaced the whole page with any fragment's 400): staff
onboard them from the project's page in one form; they sign in with the password it showed, create a token, open the
new-workload form and change Project before filling Name (each change's dry run is refused inside its pane, the page
stays), fill the rest and read the dry run's verdict, submit a 2-replica workload into their one project, follow the
live log of each replica while it runs (the panel's poller appends the lines written since), reach the log from the
top of the page (first on a phone once it runs), cancel it, and read both replicas' logs afterwards from the archive.
After every step the page still has its navigation."""

import re

import pytest
from playwright.sync_api import expect

from pools.cluster import LogQuery
from pools.models import Backend
from pools.quotas.writes import ensure_defaults
from scheduling.models import LogArchive, Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.logs import replicas
from tests.support.browser import csp_refusals, fits_the_width, htmx_settled, sign_in
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


def navigable(page) -> None:
    """The page is still ours: its header and navigation are there (not a bare error document)."""
    expect(page.locator("header.osmo-header nav.osmo-nav")).to_be_visible()
    expect(page.locator("#nav-menu")).to_be_attached()


def is_dry_run(response) -> bool:
    return response.request.method == "POST" and response.url.endswith("/workloads/new/dry-run/")


def choose_project(page, project: str) -> None:
    """Changes Project (Name still empty) and waits for the dry run answering the change: refused in its pane."""
    with page.expect_response(is_dry_run) as answer:
        page.select_option("#id_project", project)
    assert answer.value.status == 400, answer.value.status
    expect(page.locator("#dry-run #dry-run-result")).to_have_attribute("data-status", "400")
    expect(page.locator("#dry-run #dry-run-errors")).to_contain_text("name")
    assert page.url.endswith("/workloads/new/"), page.url
    navigable(page)


def replica_pod_and_last_line(simulated, workload, replica: int) -> tuple[str, str]:
    """The replica's pod and its newest log line as the simulated cluster writes it now."""
    place = next(place for place in replicas(workload) if place.replica == replica and place.live)
    text = simulated.cluster(Backend.objects.get(pk=place.backend_id)).read_pod_log(
        place.namespace, place.pod, LogQuery(tail_lines=1))
    return place.pod, text.decode().strip()


def is_log_view(response) -> bool:
    return "/logs/?" in response.url and "part=view" in response.url


def follow_replica(page, simulated, workload, replica: int) -> None:
    """The live panel on this replica, followed: its pod's first line, then the lines it writes on, appended."""
    panel = page.locator("#log-panel")
    with page.expect_response(is_log_view) as answer:
        if page.is_checked("#log-follow"):
            page.select_option("#log-replica", str(replica))
        else:  # the first: Follow ticked on the replica shown
            expect(panel.locator("#log-replica")).to_have_value(str(replica))
            page.check("#log-follow")
    assert answer.value.status == 200, answer.value.status
    expect(panel.locator("#log-replica")).to_have_value(str(replica))
    expect(panel.locator("#log-meta")).to_contain_text("Live log")
    pod, _ = replica_pod_and_last_line(simulated, workload, replica)
    expect(panel.locator("#log-text")).to_contain_text(f"(pod {pod})")
    expect(panel.locator("#log-poller")).to_have_attribute("hx-trigger", re.compile(r"^every \d+m?s$"))
    # The container writes on: two more lines. (Not more: a simulated run lasts 60 to 600 s, drawn from its Job's
    # uid, so the steps to RUNNING and the moves here stay under the shortest run.)
    simulated.at += 10
    _, newest = replica_pod_and_last_line(simulated, workload, replica)
    assert newest.startswith("step"), newest
    expect(panel.locator("#log-text")).to_contain_text(newest)
    assert panel.locator("#log-text").inner_text().count("starting on") == 1  # appended, not shown twice
    navigable(page)


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)], ids=["laptop", "phone"])
def test_staff_onboard_a_researcher_who_runs_follows_cancels_and_reads_every_replicas_log(
        live_server, page, simulated, staff, settings, screenshot, width, height):
    settings.DEBUG = True  # as the demo serves
    ensure_defaults()  # the open `default` project beside llm-research: another project to choose first
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
    navigable(page)
    page.context.clear_cookies()

    # The researcher: signs in, may use the project's pools, makes a token.
    sign_in(page, live_server, "/profile/permissions/", username=newcomer, password=password)
    expect(page.locator("#permissions-grid")).to_contain_text("project member")
    page.goto(f"{live_server.url}/profile/")
    page.fill("#token-form input[name=name]", "laptop")
    page.click("#token-create")
    expect(page.locator("#new-token-secret")).to_have_text(re.compile(r"\S{20,}"))
    navigable(page)

    # The form: their one project preselected; Project changed away and back before Name is filled.
    page.goto(f"{live_server.url}/workloads/new/")
    expect(page.locator("#id_project")).to_have_value("llm-research")
    assert page.input_value("#id_name") == ""
    choose_project(page, "default")
    choose_project(page, "llm-research")
    name = f"pair-{width}"
    page.fill("#id_name", name)
    page.fill("#id_image", "nvcr.io/nvidia/pytorch:24.05-py3")
    page.fill("#id_command", "python train.py")
    page.fill("#id_replicas", "2")
    page.fill("#id_gpu", "1")
    page.fill("#id_cpu", "2")
    page.fill("#id_memory", "8Gi")
    page.press("#id_memory", "Tab")
    # The dry run: what each pool would do with these two replicas.
    expect(page.locator('#dry-run .dry-run-pool[data-pool="training"]')).to_have_attribute("data-accepted", "yes")
    expect(page.locator("#dry-run #dry-run-result")).not_to_have_attribute("data-status", "400")
    navigable(page)
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
    for replica in (0, 1):
        follow_replica(page, simulated, workload, replica)
    screenshot(page, f"onboarded-running-{'phone' if width < 600 else 'laptop'}", full_page=True)

    # Cancel it (it runs: the confirmation box first); the stop keeps both replicas' logs before the delete.
    # Polls pause while the focus is in the cancel form (static/osmo/pages.js); a poll already on its way is not
    # swapped in either while the focus or a tick is there (test_poll_races.py).
    page.focus("#cancel-message")
    htmx_settled(page)
    page.locator("#cancel-confirm").check()
    # The form's POST answered (its redirect back to the page loaded) before the workers run.
    with page.expect_navigation():
        page.click("#cancel-button")
    work(simulated, workload, Status.FAILED_CANCELED, f"{name} to be canceled")
    assert sorted(LogArchive.objects.filter(workload=workload).values_list("replica", "state")) == [
        (0, "KEPT"), (1, "KEPT")]
    page.reload()
    expect(page.locator("#workload-status")).to_have_text("FAILED_CANCELED")
    navigable(page)
    for replica in ("0", "1"):
        page.select_option("#log-replica", replica)
        expect(page.locator("#log-replica")).to_have_value(replica)
        expect(page.locator("#log-archived")).to_be_visible()
        expect(page.locator("#log-text")).to_contain_text("starting on")
        navigable(page)
    fits_the_width(page, width)
    screenshot(page, f"onboarded-canceled-{'phone' if width < 600 else 'laptop'}", full_page=True)
    assert not refused, refused
