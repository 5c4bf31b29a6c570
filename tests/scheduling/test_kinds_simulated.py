"""A notebook on the demo's simulated cluster (issue 43's done-when): submitted through the API, dispatched as a
StatefulSet whose pod the simulated controller and kubelet run and report Ready, RUNNING with its link; its GPU,
idle by the simulated DCGM figures, past the pool's rule: stopped FAILED_IDLE with the reason and the owner's
notifications. Steps are beat's (tests/support/simulated.py) on a clock the test moves."""

from datetime import timedelta

import pytest
from rest_framework.test import APIClient

from pools.models import Project
from scheduling.models import Notification, Status, Workload
from scheduling.run import utilization
from scheduling.run.cycle import run_cycle
from scheduling.specs.jobs import job_name
from scheduling.usage import simulated as dcgm
from tests.support.simulated import SIMULATED_NOW

pytestmark = pytest.mark.django_db
PROJECT = "llm-research"


def idle_pod(workload_id: str, namespace: str) -> bool:
    """Whether the simulated DCGM makes the notebook's one pod (`<job>-0`) idle under 5 %."""
    pod = f"{job_name(workload_id, 1)}-0"
    return dcgm.base(namespace, pod) + dcgm.swing(namespace, pod) < 5


def test_an_idle_notebook_runs_gets_its_link_and_is_stopped_on_the_simulated_cluster(simulated, settings):
    settings.OSMO_PROMETHEUS_URL = "simulated://dcgm"
    settings.OSMO_IDLE_GPU_MINUTES = 5
    settings.OSMO_UTILIZATION_INTERVAL = 60
    settings.OSMO_NOTEBOOK_IDLE_RULES = {"pool/training": {"under_percent": 5, "minutes": 10}}
    settings.OSMO_LINK_TEMPLATES = {"pool/training": {"host": "{name}-{id}.nb.example.org"}}
    alice = Workload._meta.get_field("submitter").related_model.objects.get(username="alice")
    alice.email = "alice@example.org"  # as an administrator sets it in the admin
    alice.save()
    api = APIClient()
    api.force_authenticate(alice)
    assert api.put("/api/profile/notifications/", {"transitions": ["idle", "failed"], "email": True},
                   format="json").status_code == 200
    namespace = Project.objects.get(name=PROJECT).namespace
    # The simulated DCGM idles one pod in four, by its name: notebooks until one is (at most 40: 1e-5 to miss).
    for attempt in range(40):
        answer = api.post("/api/workloads/", {"name": f"explore-{attempt}", "kind": "notebook", "project": PROJECT,
                                              "pools": ["training"], "image": "jupyter/base-notebook:latest",
                                              "resources": {"gpu": 1, "cpu": "2", "memory": "8Gi"}}, format="json")
        assert answer.status_code == 201, answer.json()
        if idle_pod(answer.json()["id"], namespace):
            break
        Workload.objects.filter(pk=answer.json()["id"]).delete()  # busy by its name: not this test's notebook
    notebook = Workload.objects.get(pk=answer.json()["id"])
    now, seen, link = SIMULATED_NOW, [], None
    for _ in range(30):
        run_cycle(now)
        simulated.step(60, now)
        utilization.sample(now)  # beat's utilization round
        now += timedelta(seconds=60)
        notebook.refresh_from_db()
        if not seen or seen[-1] != notebook.status:
            seen.append(notebook.status)
        if notebook.status == Status.RUNNING and link is None:
            shown = api.get(f"/api/workloads/{notebook.pk}/").json()
            assert shown["ready"] == "1/1" and shown["status_word"] == "RUNNING"
            link = shown["link"]
    assert seen[0] == Status.PENDING and Status.RUNNING in seen, seen
    assert seen[-1] == Status.FAILED_IDLE, seen
    assert link["url"] == f"http://explore-{attempt}-{notebook.short_id}.nb.example.org/"
    assert link["port_forward"].endswith(f"service/{notebook.job_name} 8888:8888")
    ended = notebook.events.get(status=Status.FAILED_IDLE)
    assert ended.reason == "IDLE" and "under 5 %" in ended.message
    assert notebook.events.filter(reason="IDLE_WARNING").exists()
    assert set(Notification.objects.filter(workload=notebook).values_list("transition", flat=True)) == \
        {"idle", "failed"}
