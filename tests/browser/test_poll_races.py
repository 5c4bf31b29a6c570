"""A poll does not replace what the user is working on (static/osmo/pages.js): a live region's poll that was already
on its way when the user started (so not paused by the focus) lands at the worst moment, made to happen by holding
its answer (tests/support/browser.py's Gate) until the user's action is under way.

- On /quotas/, a cell's save still on its way: the poll's table would replace the cell, and htmx would drop the
  save's answer (a refusal, or the fresh cell).
- On a workload's page, the cancel form's confirmation ticked: the poll's fragment would untick it."""

import pytest
from playwright.sync_api import expect

from pools.models import Quota
from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.submit.submission import submit
from tests.scheduling.conftest import body
from tests.support.browser import Gate, answers, count_answers, htmx_settled, is_poll_of, sign_in, wait_answers

pytestmark = pytest.mark.django_db(transaction=True)

CELL = "#qe-project-nlp-training-gpu-deserved"  # the world's project nlp deserves 0 GPUs in pool training


def is_save(request) -> bool:
    return request.method == "POST" and request.url.endswith("/quotas/edit/")


def a_save_under_way_while_a_poll_is(page, live_server, typed: str, *, polls_once: bool) -> tuple[Gate, Gate]:
    """Signs staff in to /quotas/, holds the table's next poll, types `typed` in nlp's cell and leaves it (the
    save goes, the focus is out of the cells), holds the save, then lets the poll's answer land."""
    sign_in(page, live_server, "/quotas/")
    htmx_settled(page)
    count_answers(page)
    paths = {"/quotas/", "/quotas/edit/"}
    poll = Gate(page, paths, is_poll_of("/quotas/"), once=polls_once)
    poll.wait_held()
    save = Gate(page, paths, is_save)
    page.fill(CELL, typed)
    page.click("h1")  # leaving the cell saves it
    save.wait_held()
    assert page.evaluate("() => !document.activeElement.closest('.quota-cell')")
    poll.release()
    wait_answers(page, 1)
    return poll, save


def test_a_quota_cells_refusal_survives_a_poll_that_lands_while_its_save_is_on_the_way(live_server, page, world,
                                                                                      staff):
    _, save = a_save_under_way_while_a_poll_is(page, live_server, "-3", polls_once=True)
    save.release()
    alert = page.locator(f"{CELL}-error")
    expect(alert).to_contain_text("is negative")
    # The refusal stays in its cell (not saved: what was typed is still there) through the polls that follow.
    seen = answers(page)
    wait_answers(page, seen + 2)
    expect(alert).to_contain_text("is negative")
    assert page.input_value(CELL) == "-3"
    assert Quota.objects.get(project__name="nlp", pool__name="training").gpu_deserved == 0

    page.fill(CELL, "2")
    page.click("h1")
    expect(page.locator("#quota-status")).to_contain_text("GPU deserved of project nlp in pool training: saved")
    expect(alert).to_have_count(0)
    assert Quota.objects.get(project__name="nlp", pool__name="training").gpu_deserved == 2


def test_a_quota_cells_save_shows_its_fresh_cell_when_a_poll_lands_while_it_is_on_the_way(live_server, page, world,
                                                                                        staff):
    # Every later poll is held as well: only the save's own answer can show the new figure.
    poll, save = a_save_under_way_while_a_poll_is(page, live_server, "3.0", polls_once=False)
    save.release()
    expect(page.locator("#quota-status")).to_contain_text("GPU deserved of project nlp in pool training: saved")
    expect(page.locator(CELL)).to_have_value("3")  # the stored figure, read back: the save's answer swapped in
    assert Quota.objects.get(project__name="nlp", pool__name="training").gpu_deserved == 3
    poll.release()


def test_a_ticked_cancel_confirmation_survives_a_poll_already_on_its_way(live_server, page, world):
    submit(world["researcher"], body(name="finetune", resources={"gpu": 2, "cpu": "2", "memory": "8Gi"}))
    run_cycle()
    workload = Workload.objects.get(name="finetune")
    assert workload.status == Status.ADMITTED  # dispatched work: its cancel asks for the confirmation
    path = f"/workloads/{workload.pk}/"
    sign_in(page, live_server, path, username="researcher", password="pw-res-123")
    htmx_settled(page)
    count_answers(page)
    poll = Gate(page, {path}, is_poll_of(path))
    poll.wait_held()
    page.check("#cancel-confirm")
    page.click("h1")  # the focus leaves the form: only the tick says the user is at work there
    poll.release()
    wait_answers(page, 1)
    assert page.is_checked("#cancel-confirm")
    wait_answers(page, answers(page) + 2)  # nor do the polls after it untick the box
    assert page.is_checked("#cancel-confirm")

    page.fill("#cancel-message", "not needed")
    page.click("#cancel-button")
    expect(page.locator("#workload-status")).to_have_text("FAILED_CANCELED")
    assert Workload.objects.get(pk=workload.pk).status == Status.FAILED_CANCELED


def test_a_quota_cells_save_survives_the_refresh_another_cells_save_sent(live_server, page, world, staff, settings):
    """A saved cell sends quotas-changed and the tables refresh themselves: that refresh, landing while another
    cell's save is on the way, is not swapped in either (the polls are out of the way here: an hour apart)."""
    settings.LIVE_POLL_MS = 3_600_000
    sign_in(page, live_server, "/quotas/")
    htmx_settled(page)
    count_answers(page)
    paths = {"/quotas/", "/quotas/edit/"}
    saves = Gate(page, paths, is_save, once=False)
    vision = "#qe-project-vision-training-gpu-deserved"
    page.fill(vision, "5")
    page.click("h1")
    saves.wait_held()
    page.fill(CELL, "1")
    page.click("h1")
    expect(page.locator("form.quota-cell.htmx-request")).to_have_count(2)
    refresh = Gate(page, paths, is_poll_of("/quotas/"))
    saves.release(1)  # vision's: saved, it sends quotas-changed
    refresh.wait_held()
    expect(page.locator(vision)).to_have_value("5")
    refresh.release()
    wait_answers(page, 1)
    saves.release()  # nlp's, after the refresh has landed
    expect(page.locator("#quota-status")).to_contain_text("GPU deserved of project nlp in pool training: saved")
    expect(page.locator(CELL)).to_have_value("1")
    assert Quota.objects.get(project__name="nlp", pool__name="training").gpu_deserved == 1
    assert Quota.objects.get(project__name="vision", pool__name="training").gpu_deserved == 5
