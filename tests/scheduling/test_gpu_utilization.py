"""GPU utilization from the DCGM exporter through Prometheus (scheduling.usage.utilization, scheduling.run.utilization)
against tests/prometheus_standin.py, a real HTTP server that parses our PromQL strictly: the figures, the rounds,
idle detection on an injected clock, what happens when Prometheus is down, slow, answers garbage or too much, the
idle list's scoping in every door, and "not measured" without OSMO_PROMETHEUS_URL."""

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from pools.models import ManagedJob, Pool, Project
from scheduling.models import Status, UtilizationState, Workload, WorkloadUtilization
from scheduling.run import utilization
from scheduling.run.metrics import exposition
from scheduling.usage.utilization import NotMeasured, Prometheus, average_query, gpu_utilization, weighted
from tests.support.clock import Clock
from tests.support.ports import free_port

START = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)  # a whole hour, for the client tests that read no clock


@pytest.fixture
def prometheus(prometheus, settings):
    """The shared stand-in Prometheus, with this file's sampling and idle settings."""
    settings.OSMO_UTILIZATION_INTERVAL = 60
    settings.OSMO_UTILIZATION_WINDOW_MINUTES = 10
    settings.OSMO_IDLE_GPU_PERCENT = 5
    settings.OSMO_IDLE_GPU_MINUTES = 60
    return prometheus


def minutes(at: datetime, n: int, value: float, every: int = 60):
    """One sample every `every` seconds over the `n` minutes before `at`, all `value`."""
    end = at.timestamp()
    return [(end - s, value) for s in range(0, n * 60, every)]


def running(name: str, project: str, user, clock: Clock, *, replicas: int = 1, gpu: int = 8, ran_minutes: int = 120,
            namespace: str = "osmo-research") -> Workload:
    """A workload running for `ran_minutes` before the injected clock's moment, with its Job's record: by hand,
    since no door dates a run back (the sampling reads Prometheus, not the cluster)."""
    pool = Pool.objects.get(name="training")
    now = clock.now()
    workload = Workload.objects.create(
        # The fields a submission writes (the kept names, project_name and pool_name, only a deletion writes).
        name=name, project=Project.objects.get(name=project), submitter=user,
        submitter_name=user.username, request={}, gpu=gpu, replicas=replicas, pools=["training"], pool=pool,
        platform="h100", status=Status.RUNNING, job_name=f"{name}-a1", namespace=namespace,
        submitted_at=now - timedelta(minutes=ran_minutes + 1), admitted_at=now - timedelta(minutes=ran_minutes + 1),
        dispatched_at=now - timedelta(minutes=ran_minutes + 1), started_at=now - timedelta(minutes=ran_minutes))
    ManagedJob.objects.create(backend_id=pool.backend_id, namespace=namespace, name=workload.job_name,
                              workload=str(workload.id), attempt=1, updated_at=now,
                              pods={pod(workload, i): {"node": "training-h100-000", "phase": "Running"}
                                    for i in range(replicas)})
    return workload


def pod(workload: Workload, index: int) -> str:
    return f"{workload.job_name}-{index}-x9z"


def busy_and_idle(prometheus, world, clock):
    """`train` (vision, researcher's): 2 replicas of 2 GPUs at 40/60 and 80/100 %; `stuck` (nlp, other's): 1 % for
    2 hours, its series renamed as with honorLabels off."""
    train = running("train", "vision", world["researcher"], clock, replicas=2, gpu=2)
    stuck = running("stuck", "nlp", world["other"], clock)
    now = clock.now()
    for index, (a, b) in enumerate(((40, 60), (80, 100))):
        prometheus.gpu("osmo-research", pod(train, index), 0, minutes(now, 120, a))
        prometheus.gpu("osmo-research", pod(train, index), 1, minutes(now, 120, b))
    prometheus.gpu("osmo-research", pod(stuck, 0), 0, minutes(now, 120, 1), exported=True)
    return train, stuck


# ---- the client and its queries ----


def test_the_client_reads_both_label_shapes_and_only_our_pods(prometheus):
    at = START
    prometheus.gpu("team-a", "p1", 0, minutes(at, 20, 10))
    prometheus.gpu("team-a", "p1", 1, minutes(at, 20, 30))
    prometheus.gpu("team-b", "p2", 0, minutes(at, 20, 50), exported=True)
    prometheus.gpu("elsewhere", "p3", 0, minutes(at, 20, 99))
    prometheus.add({"namespace": "team-a", "gpu": "7"}, minutes(at, 20, 0))  # a GPU no pod holds
    client = Prometheus(prometheus.url)
    pods = [("team-a", "p1"), ("team-b", "p2")]
    assert client.averages(pods, 600, at) == {("team-a", "p1"): 20.0, ("team-b", "p2"): 50.0}
    assert client.peaks(pods, 600, at) == {("team-a", "p1"): 30.0, ("team-b", "p2"): 50.0}
    assert [q["path"] for q in prometheus.queries] == ["/api/v1/query", "/api/v1/query"]
    assert 'namespace=~"team-a|team-b"' in prometheus.queries[0]["query"]


def test_the_standin_refuses_a_query_it_does_not_understand(prometheus):
    client = Prometheus(prometheus.url)
    typo = average_query(["team-a"], 600).replace("avg_over_time", "avg_overtime")
    with pytest.raises(NotMeasured) as refused:
        client.instant(typo, START)
    assert refused.value.reason == "error" and "avg_overtime" in refused.value.message
    with pytest.raises(NotMeasured):
        client.instant('DCGM_FI_DEV_GPU_UTIL{pod="a"', START)


def test_gpu_utilization_for_the_usage_rows_is_one_query_over_the_period(prometheus, settings):
    end = START
    prometheus.gpu("team-a", "p1", 0, [*minutes(end, 60, 20), *minutes(end - timedelta(hours=1), 60, 90)])
    prometheus.gpu("team-a", "p2", 0, minutes(end, 30, 70))
    figures = gpu_utilization(Prometheus(prometheus.url), [("team-a", "p1"), ("team-a", "p2"), ("team-a", "none")],
                              end - timedelta(hours=1), end)
    assert figures == {("team-a", "p1"): 20.0, ("team-a", "p2"): 70.0}  # p1's earlier hour is outside
    assert len(prometheus.queries) == 1
    assert weighted(figures, {("team-a", "p1"): 3600 * 8, ("team-a", "p2"): 1800 * 8}) == pytest.approx(
        (20 * 3600 + 70 * 1800) / 5400)
    assert weighted({}, {("team-a", "p1"): 1}) is None
    # The Django-side door reads the settings, and says None ("not measured") when it cannot.
    assert utilization.gpu_utilization([("team-a", "p2")], end - timedelta(hours=1), end) == {("team-a", "p2"): 70.0}
    prometheus.fault = "error"
    assert utilization.gpu_utilization([("team-a", "p2")], end - timedelta(hours=1), end) is None
    settings.OSMO_PROMETHEUS_URL = ""
    assert utilization.gpu_utilization([("team-a", "p2")], end - timedelta(hours=1), end) is None


def test_hourly_figures_come_from_one_range_query(prometheus):
    end = START
    prometheus.gpu("team-a", "p1", 0, [*minutes(end, 60, 20), *minutes(end - timedelta(hours=1), 60, 90)])
    hours = Prometheus(prometheus.url).hourly([("team-a", "p1")], end - timedelta(hours=2, minutes=30), end)
    assert hours == {("team-a", "p1"): {(end - timedelta(hours=2)).timestamp(): 90.0,
                                        (end - timedelta(hours=1)).timestamp(): 20.0}}
    assert [q["path"] for q in prometheus.queries] == ["/api/v1/query_range"]


# ---- rounds ----


def test_a_round_stores_each_running_workloads_average_with_two_queries(prometheus, world, clock):
    train, stuck = busy_and_idle(prometheus, world, clock)
    done = utilization.sample(clock.now())
    assert (done.workloads, done.pods, done.measured, done.idle, done.error) == (2, 3, 2, 1, "")
    assert len(prometheus.queries) == 2
    row = WorkloadUtilization.objects.get(workload=train)
    assert row.pods == {pod(train, 0): 50.0, pod(train, 1): 90.0}
    assert (row.average, row.peak, row.idle_since) == (70.0, 100.0, None)
    assert WorkloadUtilization.objects.get(workload=stuck).average == 1.0
    assert UtilizationState.objects.get().failures == 0


def test_the_workload_page_and_api_show_the_figures(prometheus, world, clock, researcher_api):
    train, _ = busy_and_idle(prometheus, world, clock)
    utilization.sample(clock.now())
    utilization_body = utilization.body(train, clock.now())
    assert utilization_body["measured"] and utilization_body["average_percent"] == 70.0
    assert utilization_body["pods"] == [{"name": pod(train, 0), "average_percent": 50.0},
                                        {"name": pod(train, 1), "average_percent": 90.0}]
    browser = Client()
    browser.force_login(world["researcher"])
    # The pages read the real clock: the round above is hours away from it, so move the row to now.
    WorkloadUtilization.objects.update(measured_at=datetime.now(UTC))
    answer = researcher_api.get(f"/api/workloads/{train.id}/")
    assert answer.status_code == 200 and answer.json()["utilization"]["average_percent"] == 70.0
    page = browser.get(reverse("workloads:detail", args=[train.id]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "70.0 %" in text and pod(train, 1) in text


def test_idle_needs_every_gpu_under_the_threshold_for_the_whole_window(prometheus, world, clock):
    now = clock.now()
    researcher = world["researcher"]
    idle = running("idle", "vision", researcher, clock)
    young = running("young", "vision", researcher, clock, ran_minutes=30)
    spiky = running("spiky", "vision", researcher, clock)
    blind = running("blind", "vision", researcher, clock, replicas=2)
    prometheus.gpu("osmo-research", pod(idle, 0), 0, minutes(now, 180, 2))
    prometheus.gpu("osmo-research", pod(young, 0), 0, minutes(now, 30, 0))
    prometheus.gpu("osmo-research", pod(spiky, 0), 0, [*minutes(now, 180, 1), (now.timestamp() - 1800 + 5, 20)])
    prometheus.gpu("osmo-research", pod(blind, 0), 0, minutes(now, 180, 0))  # its second pod has no figures
    utilization.sample(now)
    since = dict(WorkloadUtilization.objects.values_list("workload__name", "idle_since"))
    assert since == {"idle": now - timedelta(minutes=60), "young": None, "spiky": None, "blind": None}
    # Ten minutes on, still idle: the stretch keeps its start.
    clock.advance(600)
    prometheus.gpu("osmo-research", pod(idle, 0), 1, minutes(clock.now(), 180, 3))
    utilization.sample(clock.now())
    assert WorkloadUtilization.objects.get(workload=idle).idle_since == now - timedelta(minutes=60)
    assert [w.name for w in utilization.idle(Workload.objects.all(), clock.now())] == ["idle"]
    # A burst of work ends the stretch.
    clock.advance(60)
    prometheus.gpu("osmo-research", pod(idle, 0), 2, [(clock.now().timestamp() - 10, 55)])
    utilization.sample(clock.now())
    assert WorkloadUtilization.objects.get(workload=idle).idle_since is None
    assert list(utilization.idle(Workload.objects.all(), clock.now())) == []


def test_stale_figures_leave_the_idle_list_and_say_not_measured(prometheus, world, clock):
    _, stuck = busy_and_idle(prometheus, world, clock)
    utilization.sample(clock.now())
    assert [w.name for w in utilization.idle(Workload.objects.all(), clock.now())] == ["stuck"]
    clock.advance(3 * 60 + 1)  # three rounds missed
    assert list(utilization.idle(Workload.objects.all(), clock.now())) == []
    shown = utilization.body(stuck, clock.now())
    assert not shown["measured"] and shown["note"].startswith("not measured since")


def test_a_finished_workload_keeps_its_last_figures(prometheus, world, clock):
    train, _ = busy_and_idle(prometheus, world, clock)
    utilization.sample(clock.now())
    # By hand, at the injected clock's moment: the follower writes its end at the time it runs.
    Workload.objects.filter(pk=train.pk).update(status=Status.COMPLETED, finished_at=clock.now())
    clock.advance(3600)
    train.refresh_from_db()
    shown = utilization.body(train, clock.now())
    assert shown["measured"] and shown["average_percent"] == 70.0 and not shown["idle"]
    assert "before it ended" in shown["note"]


# ---- degradation ----


@pytest.mark.parametrize("fault", ["down", "slow", "garbage", "huge", "error", "wrong_path"])
def test_a_failing_prometheus_is_not_measured_never_an_error(prometheus, world, clock, settings, fault,
                                                             researcher_api):
    train, _ = busy_and_idle(prometheus, world, clock)
    utilization.sample(clock.now())
    before = WorkloadUtilization.objects.get(workload=train).measured_at
    if fault == "down":
        settings.OSMO_PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"
    elif fault == "slow":
        settings.OSMO_PROMETHEUS_TIMEOUT = 0.2  # the stand-in holds the answer until the test ends: any budget runs out
        prometheus.fault = "slow"
    elif fault == "huge":
        settings.OSMO_PROMETHEUS_MAX_BYTES = 1024 * 1024
        prometheus.fault = "huge"
    elif fault == "wrong_path":
        settings.OSMO_PROMETHEUS_URL = prometheus.url + "/not-prometheus"
    else:
        prometheus.fault = fault
    clock.advance(60)
    done = utilization.sample(clock.now())
    assert done.error, fault
    expected = {"down": "unreachable", "slow": "timeout", "garbage": "bad_answer", "huge": "too_large",
                "error": "error", "wrong_path": "error"}[fault]
    assert done.error.startswith(expected)
    assert WorkloadUtilization.objects.get(workload=train).measured_at == before  # nothing overwritten
    state = UtilizationState.objects.get()
    assert state.failures == 1 and state.last_error == done.error
    metrics = exposition(clock.now()).decode()
    assert "osmo_gpu_utilization_failures 1.0" in metrics
    # The doors still answer: figures go stale, never a 500.
    assert researcher_api.get(f"/api/workloads/{train.id}/").status_code == 200
    assert researcher_api.get("/api/workloads/idle/").status_code == 200


def test_the_huge_answer_is_refused_by_its_announced_size_too(prometheus):
    prometheus.gpu("team-a", "p1", 0, minutes(START, 20, 10))
    client = Prometheus(prometheus.url, max_bytes=100)
    with pytest.raises(NotMeasured) as refused:
        client.averages([("team-a", "p1")], 600, START)
    assert refused.value.reason == "too_large" and "bytes" in refused.value.message


def test_too_many_series_is_refused(prometheus):
    for index in range(5):
        prometheus.gpu("team-a", f"p{index}", 0, minutes(START, 20, 10))
    with pytest.raises(NotMeasured) as refused:
        Prometheus(prometheus.url, max_series=4).averages([("team-a", "p0")], 600, START)
    assert refused.value.reason == "too_large"


# ---- the idle list: scoping in every door ----


def _idle_now(prometheus, world):
    """Both workloads idle, with figures from a round just now (the doors read the real clock)."""
    clock = Clock(start=datetime.now(UTC))
    train = running("train", "vision", world["researcher"], clock)
    stuck = running("stuck", "nlp", world["other"], clock)
    for workload in (train, stuck):
        prometheus.gpu("osmo-research", pod(workload, 0), 0, minutes(clock.now(), 120, 1))
    utilization.sample(clock.now())
    return train, stuck


def test_the_idle_list_is_scoped_on_the_page_csv_api_and_cli(prometheus, world, staff, capsys):
    ids = {w.name: str(w.id) for w in _idle_now(prometheus, world)}
    for user, expected in ((staff, {"train", "stuck"}), (world["researcher"], {"train", "stuck"}),
                           (world["other"], {"stuck"})):
        api = APIClient()
        api.force_authenticate(user)
        answer = api.get("/api/workloads/idle/")
        assert answer.status_code == 200
        assert answer.json()["measured"] is True
        assert {row["name"] for row in answer.json()["workloads"]} == expected, user.username
        browser = Client()
        browser.force_login(user)
        page = browser.get(reverse("workloads:idle"))
        assert page.status_code == 200
        shown = page.content.decode()
        assert {name for name, pk in ids.items() if pk in shown} == expected
        csv_text = browser.get(reverse("workloads:idle"), {"export": "csv"}).getvalue().decode()
        names = {line.split(",")[0] for line in csv_text.splitlines()[1:]}
        assert names == expected
        call_command("usage", "idle", "--as-user", user.username, "--format", "json")
        printed = json.loads(capsys.readouterr().out)
        assert {row["name"] for row in printed["workloads"]} == expected
    call_command("usage", "idle")
    table = capsys.readouterr().out
    assert "train" in table and "stuck" in table and "IDLE FOR" in table


def test_an_anonymous_caller_gets_no_idle_list(prometheus, world):
    _idle_now(prometheus, world)
    assert APIClient().get("/api/workloads/idle/").status_code in (401, 403)
    assert Client().get(reverse("workloads:idle")).status_code in (302, 401, 403)


# ---- without the setting ----


def test_without_the_setting_everything_says_not_measured(world, settings, capsys, researcher_api):
    settings.OSMO_PROMETHEUS_URL = ""
    clock = Clock(start=datetime.now(UTC))
    train = running("train", "vision", world["researcher"], clock)
    assert utilization.sample().skipped
    assert not WorkloadUtilization.objects.exists()
    detail = researcher_api.get(f"/api/workloads/{train.id}/").json()
    assert detail["utilization"] == {"measured": False, "note": "not measured: OSMO_PROMETHEUS_URL is not set"}
    idle = researcher_api.get("/api/workloads/idle/").json()
    assert idle["measured"] is False and idle["workloads"] == []
    browser = Client()
    browser.force_login(world["researcher"])
    assert "Not measured: OSMO_PROMETHEUS_URL is not set" in browser.get(
        reverse("workloads:detail", args=[train.id])).content.decode()
    assert "GPU utilization is not measured" in browser.get(reverse("workloads:idle")).content.decode()
    call_command("usage", "idle")
    assert "not measured" in capsys.readouterr().out
    assert "osmo_gpu_utilization" not in exposition().decode()


# ---- the demo's source ----


def test_the_demo_source_answers_through_the_same_round(world, settings, clock):
    settings.OSMO_PROMETHEUS_URL = "simulated://dcgm"
    settings.OSMO_IDLE_GPU_MINUTES = 3
    workloads = [running(f"demo-{i}", "vision", world["researcher"], clock, ran_minutes=10) for i in range(12)]
    done = utilization.sample(clock.now())
    assert (done.workloads, done.measured, done.error) == (12, 12, "")
    rows = {row.workload_id: row for row in WorkloadUtilization.objects.all()}
    idle = {w.name for w in workloads if rows[w.id].idle_since is not None}
    assert 0 < len(idle) < 12  # some idle, some busy: the demo's list has rows and the pages figures
    assert all(rows[w.id].average < 5 for w in workloads if w.name in idle)
    assert all(rows[w.id].average >= 35 for w in workloads if w.name not in idle)
    utilization.sample(clock.now())  # the same figures every round, in every process
    assert {r.workload_id: r.average for r in WorkloadUtilization.objects.all()} == {
        k: r.average for k, r in rows.items()}


def test_describe_prints_the_figures_as_the_api_answers_them(prometheus, world, clock, capsys, settings):
    clock = Clock(start=datetime.now(UTC))
    train, _ = busy_and_idle(prometheus, world, clock)
    utilization.sample(clock.now())
    call_command("workload", "describe", str(train.id))
    assert "GPU util:   70.0 % over the last 10 minutes" in capsys.readouterr().out
    call_command("workload", "describe", str(train.id), "--format", "json")
    assert json.loads(capsys.readouterr().out)["utilization"]["average_percent"] == 70.0
    settings.OSMO_PROMETHEUS_URL = ""
    call_command("workload", "describe", str(train.id))
    assert "GPU util:   not measured: OSMO_PROMETHEUS_URL is not set" in capsys.readouterr().out
