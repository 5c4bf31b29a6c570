"""Start estimates where people read them: the API (list and detail), `workload list|describe`, `get jobs`, the
workloads table, the workload page and the queue fragment; scoped to the pools the viewer may see; read in a
bounded number of queries whatever the number of pending workloads."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from pools.models import Backend, Node
from scheduling.models import Status, Workload
from scheduling.run import estimates
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import SHARED, post_workload
from tests.support.commands import run

pytestmark = pytest.mark.django_db
BIG = {"gpu": 8, "cpu": "4", "memory": "16Gi"}


@pytest.fixture
def waiting(researcher_api):
    """Training's 16 GPUs held by two 8-GPU workloads of nlp running for an hour (exec timeouts 2 h and 3 h); `wait`
    (4 GPUs, candidates training then the seed pool, whose GPUs are all taken by work of others) waits in both."""
    return wait_behind(researcher_api, timeouts=True)


@pytest.fixture
def waiting_untimed(researcher_api):
    """As `waiting`, the two running workloads submitted with no exec timeout (training has no default one)."""
    return wait_behind(researcher_api, timeouts=False)


def wait_behind(researcher_api, *, timeouts: bool) -> dict:
    running = [post_workload(researcher_api, name=f"run-{i}", project="nlp", priority="low", pools=["training"],
                             resources=BIG, **({"exec_timeout": f"{i + 2}h"} if timeouts else {}))
               for i in range(2)]
    run_cycle()
    started = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    # Running for an hour: no door makes an hour pass, so the follower's fields are written as it would have written
    # them an hour ago (the estimate from the doors and the stand-in's Jobs: tests/test_figures_journey.py).
    Workload.objects.filter(pk__in=[w["id"] for w in running]).update(status=Status.RUNNING, started_at=started)
    Node.objects.update(gpu_free=0)  # as the sync reports them once the pods are bound
    wait = post_workload(researcher_api, name="wait", project="nlp", priority="low", pools=["training", SHARED],
                         resources={"gpu": 4, "cpu": "4", "memory": "16Gi"})
    run_cycle()
    assert Workload.objects.get(pk=wait["id"]).positions == {"training": 1, SHARED: 1}, wait.get("refused_candidates")
    return {"id": wait["id"], "at": started + timedelta(hours=2)}


BASIS = "about 1 h: 8 GPUs free up in pool training when 1 running workload reaches its exec timeout"


def test_the_api_answers_the_estimate_and_its_basis_per_pool(researcher_api, waiting):
    body = researcher_api.get(f"/api/workloads/{waiting['id']}/").json()
    assert body["estimate_basis"] == BASIS
    assert body["estimated_start"] == waiting["at"].isoformat().replace("+00:00", "Z")
    by_pool = {e["pool"]: e for e in body["estimates"]}
    assert by_pool["training"]["basis"] == BASIS and by_pool["training"]["position"] == 1
    assert by_pool[SHARED]["estimated_start"] is None and by_pool[SHARED]["basis"].startswith("unknown: ")
    listed = {w["name"]: w for w in researcher_api.get("/api/workloads/").json()}
    assert listed["wait"]["estimate_basis"] == BASIS and listed["wait"]["estimated_start"] == body["estimated_start"]
    assert listed["run-0"]["estimated_start"] is None and listed["run-0"]["estimate_basis"] == ""


def test_a_viewer_sees_only_the_estimates_of_pools_they_may_see(waiting, world):
    other = APIClient()
    other.force_authenticate(world["other"])  # a member of nlp, allowed training only
    body = other.get(f"/api/workloads/{waiting['id']}/").json()
    assert [e["pool"] for e in body["estimates"]] == ["training"]
    assert SHARED not in body["estimate_basis"]


def test_with_no_basis_the_answer_is_unknown(researcher_api, waiting_untimed):
    waiting = waiting_untimed
    body = researcher_api.get(f"/api/workloads/{waiting['id']}/").json()
    assert body["estimated_start"] is None
    assert body["estimate_basis"].startswith("unknown: it needs 4 GPUs in pool training (0 free now)")


def test_recent_run_times_of_the_pool_are_a_basis(researcher_api, waiting_untimed):
    waiting = waiting_untimed
    now = timezone.now()
    done = Workload.objects.filter(name="run-0").first()
    # By hand: finished a day ago, which no door dates back (the run times from the doors: the journey's estimate).
    for i in range(4):  # four 8-GPU runs of 90 minutes finished in training
        done.pk, done.name, done.status = None, f"done-{i}", Status.COMPLETED
        done.started_at, done.finished_at = now - timedelta(days=1, minutes=90), now - timedelta(days=1)
        done.save(force_insert=True)
    body = researcher_api.get(f"/api/workloads/{waiting['id']}/").json()
    assert body["estimate_basis"] == (
        "about 30 min: 16 GPUs free up in pool training when 2 running workloads end (as expected from the median "
        "run time of the last 4 finished workloads of 5-8 GPUs in pool training)")  # both started together


def test_with_no_foreseeable_end_the_pools_recent_waits_are_the_basis(researcher_api, waiting_untimed):
    waiting = waiting_untimed
    now = timezone.now()
    done = Workload.objects.filter(name="run-0").first()
    # By hand: started three hours ago after a 20-minute wait, which no door dates back.
    for i in range(3):  # three workloads of 4 GPUs that waited 20 minutes before starting in training
        done.pk, done.name, done.status, done.gpu = None, f"waited-{i}", Status.COMPLETED, 4
        done.queued_at, done.started_at = now - timedelta(hours=3, minutes=20), now - timedelta(hours=3)
        done.finished_at = None
        done.save(force_insert=True)
    body = researcher_api.get(f"/api/workloads/{waiting['id']}/").json()
    assert body["estimate_basis"].startswith("about 20 min: the median wait of the last 3 workloads of 3-4 GPUs that "
                                             "started in pool training")


def test_the_loader_takes_the_clock_it_is_given(waiting):
    workload = Workload.objects.get(pk=waiting["id"])
    later = waiting["at"] - timedelta(minutes=10)
    Backend.objects.update(last_sync_at=later)  # synced at that moment too, or the pool would be offline then
    forecast = estimates.forecasts([workload], later)[waiting["id"]]
    assert forecast.basis.startswith("about 10 min: ")
    assert estimates.shown(forecast)["estimated_start"] == waiting["at"]


def test_the_cli_shows_it_in_describe_list_and_get_jobs(waiting):
    described = run("workload", "describe", waiting["id"])
    assert f"Start:      {waiting['at']:%Y-%m-%d %H:%M} UTC, {BASIS} (an estimate)" in described
    assert f"training (#1): {waiting['at']:%Y-%m-%d %H:%M} UTC, {BASIS}" in described
    listed = run("workload", "list")
    assert "START (EST.)" in listed and "about 1 h" in listed
    jobs = run("get", "jobs")
    line = next(line for line in jobs.splitlines() if " wait " in line)
    assert line.rstrip().endswith("about 1 h")
    assert next(r for r in __import__("json").loads(run("get", "jobs", "--format", "json"))
                if r["name"] == "wait")["estimate_basis"] == BASIS


def test_the_pages_show_it(researcher_client, waiting):
    table = researcher_client.get("/workloads/").content.decode()
    assert "Expected start" in table and f'title="{BASIS}"' in table
    page = researcher_client.get(f"/workloads/{waiting['id']}/").content.decode()
    assert 'id="workload-estimate"' in page and BASIS in page and 'id="workload-estimates"' in page
    queue = researcher_client.get("/workloads/queue/?pool=training").content.decode()
    assert "Expected start" in queue and BASIS in queue
    shared = researcher_client.get(f"/workloads/queue/?pool={SHARED}").content.decode()
    assert "unknown: " in shared  # this pool's estimate, not the workload's best


def test_the_csv_carries_the_estimate(researcher_client, waiting):
    text = b"".join(researcher_client.get("/workloads/?export=csv").streaming_content).decode()
    assert "Expected start" in text and "about 1 h" in text


def _pending(api, count: int) -> None:
    for i in range(count):
        post_workload(api, name=f"more-{i}", project="nlp", priority="low", pools=["training"], resources=BIG)
    run_cycle()


@pytest.mark.parametrize("more", [1, 20])
def test_the_estimates_cost_a_bounded_number_of_queries(researcher_api, waiting, more,
                                                        django_assert_max_num_queries):
    _pending(researcher_api, more)
    assert Workload.objects.filter(status=Status.PENDING).exclude(positions={}).count() == more + 1
    with django_assert_max_num_queries(11):
        rows = researcher_api.get("/api/workloads/").json()
    assert sum(1 for r in rows if r["estimate_basis"]) == more + 1
    workloads = list(Workload.objects.light())
    with django_assert_max_num_queries(3):
        assert len(estimates.forecasts(workloads)) == more + 1
