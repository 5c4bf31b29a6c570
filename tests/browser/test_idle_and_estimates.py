"""GPU utilization, the idle list and start estimates in Chromium, on a laptop (1440 px) and a phone (390 px), as the
demo shows them: workloads run on the simulated cluster and their figures come from the demo's simulated DCGM
(OSMO_PROMETHEUS_URL=simulated://dcgm). Every pod counts as idle here (OSMO_IDLE_GPU_PERCENT=101: no peak
reaches it) so the list has rows whatever the pods' names. Under the site's Content-Security-Policy; nothing
sticks out of a phone's width."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import expect

from pools.models import Backend
from scheduling.models import Source, Status
from scheduling.run import utilization
from scheduling.run.cycle import run_cycle
from scheduling.submit import submission
from tests.support.browser import csp_refusals, fits_the_width, sign_in
from tests.support.simulated import PASSWORD, SIMULATED_NOW
from tests.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


def request(name: str, gpu: int, replicas: int = 1) -> dict:
    return {"name": name, "project": "llm-research", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "command": ["python", "train.py"], "priority": "low", "replicas": replicas,
            "resources": {"gpu": gpu, "cpu": "2", "memory": "8Gi"}}


@pytest.fixture
def measured(simulated, settings):
    """alice's `busy-one` RUNNING on the simulated cluster with its figures sampled, and `waits` PENDING."""
    settings.OSMO_PROMETHEUS_URL = "simulated://dcgm"
    settings.OSMO_IDLE_GPU_PERCENT = 101
    settings.OSMO_IDLE_GPU_MINUTES = 1
    alice = get_user_model().objects.get(username="alice")
    running = submission.submit(alice, request("busy-one", 1), source=Source.API).workload

    def runs() -> bool:
        run_cycle(SIMULATED_NOW)
        simulated.step(5, SIMULATED_NOW)
        running.refresh_from_db()
        return running.status == Status.RUNNING
    until(runs, "busy-one to run on the simulated cluster", seconds=60, detail=lambda: running.reasons)
    # Its pods must have run the whole idle window (its start is the web's clock): sampled two minutes on.
    done = utilization.sample(timezone.now() + timedelta(minutes=2))
    assert done.measured == 1, done.summary()
    waits = submission.submit(alice, request("waits", 8, replicas=64), source=Source.API).workload
    run_cycle(SIMULATED_NOW)
    waits.refresh_from_db()
    assert waits.status == Status.PENDING, waits.status
    Backend.objects.update(last_sync_at=timezone.now())  # synced now, as the demo's workers keep it: pools online
    return running, waits


@pytest.mark.parametrize("width, height", [(1440, 900), (390, 844)], ids=["laptop", "phone"])
def test_the_idle_list_utilization_and_estimates_fit_and_read(live_server, page, measured, screenshot, width, height):
    running, waits = measured
    refused = csp_refusals(page)
    page.set_viewport_size({"width": width, "height": height})
    size = "phone" if width < 600 else "laptop"
    sign_in(page, live_server, "/workloads/idle/", username="alice", password=PASSWORD)
    expect(page.locator("main")).to_contain_text("busy-one")
    expect(page.locator("main")).to_contain_text("under 101 % utilization for 1 minute or more")
    fits_the_width(page, width)
    screenshot(page, f"idle-list-{size}", full_page=True)

    page.goto(f"{live_server.url}/workloads/{running.pk}/")
    expect(page.locator("#utilization-heading")).to_be_visible()
    expect(page.locator("#workload-utilization")).to_contain_text("Average")
    expect(page.locator("#workload-idle")).to_contain_text("Idle since")
    expect(page.locator("#workload-utilization-pods")).to_contain_text(running.job_name or "")
    fits_the_width(page, width)
    screenshot(page, f"workload-utilization-{size}", full_page=True)

    page.goto(f"{live_server.url}/workloads/{waits.pk}/")
    expect(page.locator("#estimate-heading")).to_have_text("When it may start")
    expect(page.locator("#workload-estimate")).to_contain_text(
        re.compile(r"Expected to start around|Start time unknown: it needs 512 GPUs in pool training"))
    fits_the_width(page, width)
    screenshot(page, f"workload-estimate-{size}", full_page=True)
    assert not refused, refused
