"""Idle notebooks (issue 43 point 4): a notebook submitted through the API and running on the stand-in, its GPU
figures from the stand-in Prometheus, the sweep on an injected clock: warned at 80 % of its pool's rule, then
stopped FAILED_IDLE with the reason, the notification and the audit row; a notebook without figures is never
stopped for being idle and says so; the lifetime needs no figures; the rules refuse what they cannot mean."""

from datetime import timedelta

import pytest

from pools.cluster.kinds import STATEFULSET
from pools.models import AuditEvent
from scheduling.decisions.idle import NotebookRule, notebook_verdict, parse_rules
from scheduling.models import Notification, Status
from scheduling.run import idle_notebooks, stopping, utilization
from tests.scheduling.test_gpu_utilization import minutes
from tests.scheduling.test_kinds import controller_pod, dispatched
from tests.support.lifecycle import observe

pytestmark = pytest.mark.django_db
RULE = {"pool/training": {"under_percent": 10, "minutes": 120, "max_lifetime_hours": 24}}


@pytest.fixture
def notebook(standin, kube, researcher_api, world, clock, settings):
    settings.OSMO_NOTEBOOK_IDLE_RULES = RULE
    settings.OSMO_UTILIZATION_INTERVAL = 60
    settings.OSMO_IDLE_GPU_MINUTES = 60
    researcher = world["researcher"]  # the user the API client is signed in as
    researcher.email = "researcher@example.org"  # as an administrator sets it
    researcher.save()
    answer = researcher_api.put("/api/profile/notifications/", {"transitions": ["idle", "failed"], "email": True},
                                format="json")
    assert answer.status_code == 200, answer.json()
    workload = dispatched(researcher_api, kube, name="explore", kind="notebook")
    (statefulset,) = standin.objects(STATEFULSET)
    controller_pod(standin, workload, statefulset, 0, ready=True)
    workload = observe(kube, workload, now=clock.now())
    assert workload.status == Status.RUNNING and workload.started_at == clock.now()
    return workload


def idle_for(prometheus, workload, clock, value: float = 2) -> None:
    """The notebook's one GPU at `value` % since it started, then a sampler round."""
    ran = int((clock.now() - workload.started_at).total_seconds() // 60)
    prometheus.gpu(workload.namespace, f"{workload.job_name}-0", 0, minutes(clock.now(), ran, value))
    utilization.sample(clock.now())


def test_an_idle_notebook_is_warned_then_stopped_with_the_reason(prometheus, standin, kube, notebook, clock):
    clock.advance(90 * 60)
    idle_for(prometheus, notebook, clock)
    assert idle_notebooks.sweep(clock.now()) == {}  # under 10 % since 30 min (the 60-min window), limit 120
    clock.advance(40 * 60)  # 100 min under: past 80 % of the limit
    idle_for(prometheus, notebook, clock)
    assert idle_notebooks.sweep(clock.now()) == {"warned": 1}
    assert idle_notebooks.sweep(clock.now()) == {}  # told once
    warning = notebook.events.get(reason="IDLE_WARNING")
    assert "under 10 % for 1 h 40 min" in warning.message
    told = Notification.objects.get(transition="idle")
    assert told.target == "researcher@example.org" and "stopped after 2 h 0 min" in told.text
    clock.advance(25 * 60)  # 125 min under
    idle_for(prometheus, notebook, clock)
    assert idle_notebooks.sweep(clock.now()) == {"stopped": 1}
    assert stopping.stop(notebook.pk, clusters=lambda backend: kube, now=clock.now()) == "stopped"
    notebook.refresh_from_db()
    assert notebook.status == Status.FAILED_IDLE
    ended = notebook.events.get(status=Status.FAILED_IDLE)
    assert ended.reason == "IDLE" and "under 10 % for 2 h 5 min (the limit is 2 h 0 min)" in ended.message
    assert standin.objects(STATEFULSET) == []  # deleted, its Service with it (owner reference)
    assert Notification.objects.filter(transition="failed", workload=notebook).exists()
    audit = AuditEvent.objects.get(action="idle-stop")
    assert audit.object == f"workload/{notebook.pk}" and "pool training" in audit.summary


def test_a_busy_notebook_is_left_alone(prometheus, notebook, clock):
    clock.advance(300 * 60)
    idle_for(prometheus, notebook, clock, value=45)
    assert idle_notebooks.sweep(clock.now()) == {}
    notebook.refresh_from_db()
    assert notebook.status == Status.RUNNING and not notebook.stop_status


def test_without_figures_it_is_never_stopped_for_being_idle_and_says_so(notebook, clock, settings):
    settings.OSMO_PROMETHEUS_URL = ""
    clock.advance(10 * 3600)
    assert idle_notebooks.sweep(clock.now()) == {"not_measured": 1}
    assert idle_notebooks.sweep(clock.now()) == {}  # said once
    assert "cannot tell" in notebook.events.get(reason="IDLE_NOT_MEASURED").message
    notebook.refresh_from_db()
    assert notebook.status == Status.RUNNING and not notebook.stop_status
    clock.advance(14 * 3600)  # 24 h: the lifetime needs no figures
    assert idle_notebooks.sweep(clock.now()) == {"stopped": 1}
    notebook.refresh_from_db()
    assert (notebook.stop_status, notebook.stop_reason) == (Status.FAILED_IDLE, "MAX_LIFETIME")


def test_a_project_rule_wins_over_its_pool_rule(notebook, clock, settings):
    settings.OSMO_NOTEBOOK_IDLE_RULES = {**RULE, "project/vision": {"under_percent": 5, "minutes": 60}}
    settings.OSMO_PROMETHEUS_URL = ""
    clock.advance(30 * 3600)  # past the pool's lifetime; the project's rule has none
    assert idle_notebooks.sweep(clock.now()) == {"not_measured": 1}
    assert "project vision" in notebook.events.get(reason="IDLE_NOT_MEASURED").message


def test_the_verdict_warns_at_80_percent_and_stops_at_the_limit(clock):
    rule, start = NotebookRule(10, 100, 10), clock.now()
    at = lambda m: start + timedelta(minutes=m)  # noqa: E731
    kwargs = {"started_at": start, "warned_idle": False, "warned_lifetime": False}
    assert notebook_verdict(rule, now=at(79), under_since=start, **kwargs).action == ""
    assert notebook_verdict(rule, now=at(80), under_since=start, **kwargs).action == "warn"
    assert notebook_verdict(rule, now=at(99), under_since=start, **{**kwargs, "warned_idle": True}).action == ""
    assert notebook_verdict(rule, now=at(100), under_since=start, **kwargs).code == "IDLE"
    assert notebook_verdict(rule, now=at(100), under_since=None, **kwargs).action == ""
    assert notebook_verdict(rule, now=at(480), under_since=None, **kwargs).code == "LIFETIME"  # 8 h: 80 % of 10
    assert notebook_verdict(rule, now=at(600), under_since=None, **kwargs).action == "stop"


@pytest.mark.parametrize("rules, word", [
    ({"team/x": {"under_percent": 5, "minutes": 60}}, "team/x"),
    ({"pool/a": {"under_percent": 0, "minutes": 60}}, "under_percent"),
    ({"pool/a": {"under_percent": 5, "minutes": 0}}, "minutes"),
    ({"pool/a": {"under_percent": 5, "minutes": 60, "max_lifetime_hours": -1}}, "max_lifetime_hours"),
    ({"pool/a": {"under_percent": 5, "minutes": 60, "hours": 3}}, "pool/a")])
def test_rules_that_mean_nothing_are_refused_by_name(rules, word):
    with pytest.raises(ValueError, match=word):
        parse_rules(rules)
