"""Queue positions (issue 24 point 4): one number for one workload and pool on every page, API answer and CLI
command
(scheduling.decisions.positions.positions_of), and a position that moves back says why in the workload's events."""

import io
import json
import re

import pytest
from django.core.management import call_command
from django.test import Client

from pools.models import Backend
from scheduling.decisions.positions import MoveBack, moves_back, positions_of
from scheduling.models import Workload, WorkloadEvent
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import body

pytestmark = pytest.mark.django_db


def submit(api, **fields) -> dict:
    response = api.post("/api/workloads/", body(**fields), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


@pytest.fixture
def offline(world):
    """training's cluster silent: nothing is admitted, and every pending workload keeps a place in its queue."""
    Backend.objects.filter(name="default").update(last_sync_at=None)  # by hand: no door un-syncs a backend


def test_a_higher_priority_arrival_moves_the_queue_back_and_each_moved_workload_says_why(researcher_api, offline):
    low = [submit(researcher_api, name=f"low-{i}", priority="low") for i in range(3)]
    run_cycle()
    assert [Workload.objects.get(pk=w["id"]).positions for w in low] == [{"training": n} for n in (1, 2, 3)]
    assert not WorkloadEvent.objects.filter(reason="QUEUE_MOVED").exists()

    urgent = submit(researcher_api, name="urgent", priority="high")
    run_cycle()
    assert Workload.objects.get(pk=urgent["id"]).positions == {"training": 1}
    for n, workload in enumerate(low, start=2):
        assert Workload.objects.get(pk=workload["id"]).positions == {"training": n}
        (event,) = WorkloadEvent.objects.filter(workload_id=workload["id"], reason="QUEUE_MOVED")
        assert event.status == "PENDING" and event.pools == ["training"]
        assert event.message == (f"Moved back in pool training's queue from #{n - 1} to #{n}: 1 workload of higher "
                                 "priority came ahead of it.")
    assert not WorkloadEvent.objects.filter(workload_id=urgent["id"], reason="QUEUE_MOVED").exists()
    # A queue that does not move says nothing more.
    run_cycle()
    assert WorkloadEvent.objects.filter(reason="QUEUE_MOVED").count() == 3
    # The event is on the workload's page and in `workload describe`.
    page = researcher_api.get(f"/api/workloads/{low[0]['id']}/").json()
    assert "from #1 to #2: 1 workload of higher priority came ahead of it." in page["events"][-1]["message"]


def test_work_within_its_deserved_quota_goes_ahead_of_borrowing_work_and_the_borrower_is_told(
        researcher_api, offline):
    borrower = submit(researcher_api, name="borrower", project="nlp", priority="low")  # nlp deserves nothing
    run_cycle()
    assert Workload.objects.get(pk=borrower["id"]).positions == {"training": 1}
    submit(researcher_api, name="guaranteed", priority="low")  # vision: 1 GPU of its 4 deserved
    run_cycle()
    (event,) = WorkloadEvent.objects.filter(workload_id=borrower["id"], reason="QUEUE_MOVED")
    assert event.message == ("Moved back in pool training's queue from #1 to #2: 1 workload within their project's "
                             "deserved quota (this one borrows, and borrowing work queues after it) came ahead of it.")


def test_moves_back_counts_only_those_that_came_ahead_by_their_rule():
    # c was #1; b (higher priority) and d (within deserved while c borrows) now sort before it; a stays first.
    order = ["a", "d", "b", "c"]
    classes = {"a": (False, 0), "d": (False, 0), "b": (True, 2), "c": (True, 0)}
    new = {"a": {"p": 1, "q": 1}, "d": {"p": 2}, "b": {"p": 3}, "c": {"p": 4, "q": 2}}
    old = {"a": {"p": 1, "q": 1}, "c": {"p": 2, "q": 2}, "b": {"p": 3}}
    assert moves_back(order, new, old, classes) == {"c": [MoveBack("p", 2, 4, within_deserved=1, higher_priority=1,
                                                                   earlier=0)]}
    # Moving forward, or standing still, is not news.
    assert moves_back(["a", "c", "b"], {"a": {"p": 1}, "c": {"p": 2}, "b": {"p": 3}},
                      {"a": {"p": 2}, "c": {"p": 3}, "b": {"p": 3}}, classes) == {}


def test_positions_are_read_in_the_workload_s_pool_order_and_only_where_the_viewer_may_look():
    stored = {"b": 4, "a": 2, "gone": 7}
    assert list(positions_of(stored, ["a", "b", "c"]).items()) == [("a", 2), ("b", 4)]
    assert positions_of(stored, ["a", "b"], keep=lambda pool: pool != "a") == {"b": 4}
    assert positions_of(None, ["a"]) == {}


def test_every_door_shows_the_same_position_for_the_same_workload_and_pool(world, researcher_api, offline):
    ahead = [submit(researcher_api, name=f"ahead-{i}", priority="low") for i in range(2)]
    # Submitted last, with the highest priority: #1 in training, though third in its project's submission order.
    target = submit(researcher_api, name="target", priority="high")
    run_cycle()
    position = Workload.objects.get(pk=target["id"]).positions["training"]
    assert position == 1
    submit(researcher_api, name="later", priority="low")
    run_cycle()
    for workload in ahead:
        assert Workload.objects.get(pk=workload["id"]).positions["training"] > position

    shown = {}
    listed = researcher_api.get("/api/workloads/?status=PENDING").json()
    shown["api list"] = next(row for row in listed if row["id"] == target["id"])["position"]
    shown["api detail"] = researcher_api.get(f"/api/workloads/{target['id']}/").json()["positions"]["training"]
    browser = Client()
    browser.force_login(world["researcher"])

    def cell(html: str) -> int:
        row = re.search(rf'<tr data-key="{target["id"]}">\s*<td class="num">(\d+)', html)
        return int(row.group(1))

    shown["project queue"] = cell(browser.get("/workloads/queue/?project=vision").content.decode())
    shown["pool queue"] = cell(browser.get("/workloads/queue/?pool=training").content.decode())
    detail = browser.get(f"/workloads/{target['id']}/").content.decode()
    shown["workload page"] = int(re.search(r'<td>training</td><td class="num">(\d+)</td>', detail).group(1))
    out = io.StringIO()
    call_command("workload", "describe", target["id"], "--as-user", "researcher", stdout=out)
    shown["cli describe"] = int(re.search(r"training \(#(\d+) in its queue\)", out.getvalue()).group(1))
    out = io.StringIO()
    call_command("workload", "list", "--status", "PENDING", "--as-user", "researcher", "--format", "json", stdout=out)
    shown["cli list"] = next(row for row in json.loads(out.getvalue()) if row["id"] == target["id"])["position"]
    assert shown == dict.fromkeys(shown, position)
    # The project's queue lists by submission and names the pool of the number it shows.
    project_queue = browser.get("/workloads/queue/?project=vision").content.decode()
    assert f'<td class="num">{position} <span class="muted">in training</span></td>' in project_queue
