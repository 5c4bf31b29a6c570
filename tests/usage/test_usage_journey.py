"""Issue 38's journey: usage figures from a state built only through the product's doors. Configuration through
the CLI, nodes and pods through the stand-in API server and the sync, workloads through the API, OSMO's workflow
path and the form, admission and dispatch as the workers run them, the observation and rollup as beat runs them.
Every usage row is then compared, to the second, with a computation of its own from the stand-in's pod objects
(their containers' start and finish times, their GPU limits) and from the workloads' events as the API lists them.

Users are made with Django's own `create_user` (the admin's door; no CLI makes accounts)."""

import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.models import ProjectPoolHour, Status, UsageHour, Workload
from scheduling.run import follow
from scheduling.run.cycle import run_cycle
from scheduling.tasks import usage_rollup
from tests.support.commands import run
from tests.support.journey import (
    FORM,
    POOL,
    admit_and_dispatch,
    complete_job,
    kubelet_pods,
    osmo_file,
    run_pod,
    sync,
)

pytestmark = pytest.mark.django_db(transaction=True)


def expected_use(standin, workloads: list[Workload]) -> dict:
    """{(hour, pool, project, department, user): GPU-seconds}, from the stand-in's pods alone: each container's
    start to finish, times its GPU limit, split at the hours."""
    found: dict = defaultdict(float)
    charged = {(w.namespace, w.job_name): (w.project.name, w.project.department.name, w.submitter.username)
               for w in workloads}
    for pod in standin.pods():
        labels = pod["metadata"]["labels"]
        if "batch.kubernetes.io/job-name" not in labels:
            continue  # the GPU operator's own pods
        owner = charged[(pod["metadata"]["namespace"], labels["batch.kubernetes.io/job-name"])]
        terminated = pod["status"]["containerStatuses"][0]["state"]["terminated"]
        start = datetime.fromisoformat(terminated["startedAt"]).timestamp()
        end = datetime.fromisoformat(terminated["finishedAt"]).timestamp()
        gpus = int(pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        hour = start // 3600 * 3600
        while hour < end:
            piece = min(end, hour + 3600) - max(start, hour)
            found[(datetime.fromtimestamp(hour, tz=UTC), POOL, *owner)] += piece * gpus
            hour += 3600
    return {key: round(value) for key, value in found.items()}


def test_usage_rows_equal_the_pods_times_and_the_waiting_equals_the_events(doors):
    api, browser, standin, kube = doors["api"], doors["browser"], doors["standin"], doors["kube"]
    # Three doors: the API (vision, 2 x 4 GPUs), OSMO's path (nlp, 2 GPUs), the form (nlp, 4 GPUs, as `other`).
    by_api = api["researcher"].post("/api/workloads/", {
        "name": "by-api", "project": "vision", "pools": [POOL], "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"], "replicas": 2, "resources": {"gpu": 4, "cpu": "4", "memory": "16Gi"},
        "priority": "low"},
        format="json")
    assert by_api.status_code == 201, by_api.json()
    by_osmo = api["researcher"].post(f"/api/pool/{POOL}/workflow?project=nlp&priority=LOW",
                                     {"file": osmo_file("by-osmo", 2)}, format="json")
    assert by_osmo.status_code == 200, by_osmo.json()
    by_form = browser.post("/workloads/new/", {**FORM, "name": "by-form", "project": "nlp", "gpu": "4"})
    assert by_form.status_code == 302, by_form.content.decode()[:2000]
    workloads = admit_and_dispatch(kube)
    assert sorted(w.source for w in workloads) == ["api", "osmo", "web"]
    # A fourth waits: vision asks for 16 GPUs in a pool where the others hold 14 of 16.
    waiting = api["researcher"].post("/api/workloads/", {
        "name": "waits", "project": "vision", "pools": [POOL], "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"], "replicas": 2, "resources": {"gpu": 8, "cpu": "4", "memory": "16Gi"},
        "priority": "low"},
        format="json")
    assert waiting.status_code == 201, waiting.json()
    run_cycle()
    assert Workload.objects.get(pk=waiting.json()["id"]).status == Status.PENDING
    sync(kube)
    usage_rollup()

    # The pods' times, as a kubelet reports them: in the recent past, across an hour boundary.
    base = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    plan = {"api": (base + timedelta(minutes=50), base + timedelta(minutes=50, seconds=3725)),
            "osmo": (base + timedelta(minutes=55), base + timedelta(minutes=56)),  # a 60-second job
            "web": (base + timedelta(minutes=58), base + timedelta(minutes=59, seconds=5))}  # 65 seconds
    pods = {w.source: (w, kubelet_pods(standin, w)) for w in workloads}
    # The long one is seen running by the sync and then finished; the short ones start and end between looks.
    for pod in pods["api"][1]:
        run_pod(standin, pod, plan["api"][0], None, add=True)
    sync(kube)
    usage_rollup()
    for name, (_, objects) in pods.items():
        for pod in objects:
            run_pod(standin, pod, *plan[name], add=name != "api")
    for workload, objects in pods.values():  # the Job controller: every pod succeeded
        complete_job(standin, workload, len(objects))
    sync(kube)
    follow.observe()
    run_cycle()
    usage_rollup()
    assert sorted(Workload.objects.values_list("source", "status")) == [
        ("api", Status.ADMITTED), ("api", Status.COMPLETED), ("osmo", Status.COMPLETED), ("web", Status.COMPLETED)]

    expected = expected_use(standin, workloads)
    stored = {(row.hour, row.pool, row.project, row.department, row.user): row.gpu_seconds
              for row in UsageHour.objects.filter(grain="h", gpu_seconds__gt=0)}
    assert stored == expected
    assert {key[2] for key in stored} == {"vision", "nlp"}
    assert {key[4] for key in stored} == {"researcher", "other"}

    # Per project, department, user and pool through the API, as staff reads them.
    staff = APIClient()
    staff.force_authenticate(type(Workload.objects.first().submitter).objects.create_superuser("boss", "", "pw"))
    window = {"from": (base - timedelta(hours=1)).date().isoformat(),
              "to": (timezone.now() + timedelta(days=1)).date().isoformat()}
    for group, position in (("project", 2), ("department", 3), ("user", 4), ("pool", 1)):
        answer = staff.get("/api/usage/", {"group_by": group, **window})
        assert answer.status_code == 200, answer.json()
        totals: dict = defaultdict(int)
        for key, seconds in expected.items():
            totals[key[position]] += seconds
        # (the GPU operator's pods, in a namespace of no project, hold no GPU: "unattributed", 0 GPU-hours)
        assert {row["group"]: row["gpu_hours"] for row in answer.json()["rows"] if row["gpu_hours"]} == {
            name: float(f"{seconds / 3600:.2f}") for name, seconds in totals.items()}

    # Waiting, per project: the union of its workloads' PENDING spans (each from its PENDING event to its next
    # event, as the API lists them). Vision held nothing in training at those moments (its pods ran earlier), under
    # its 4 deserved GPUs: every pending second of vision was starved; nlp deserves none: never starved.
    spans = defaultdict(list)
    for workload in Workload.objects.all():
        events = api["researcher"].get(f"/api/workloads/{workload.pk}/").json()["events"]
        moments = [(datetime.fromisoformat(e["at"]), e["status"]) for e in events]
        for (at, status), (following, _) in pairwise(moments):
            if status == "PENDING":
                spans[workload.project.name].append((at.timestamp(), following.timestamp()))
    for project, deserved in (("vision", 4), ("nlp", 0)):
        union, last = 0.0, None
        for low, high in sorted(spans[project]):
            low = max(low, last or low)
            union += max(0.0, high - low)
            last = max(last or high, high)
        rows = ProjectPoolHour.objects.filter(grain="h", project=project, pool=POOL)
        assert sum(row.pending_seconds for row in rows) == pytest.approx(union, abs=rows.count())
        assert sum(row.starved_seconds for row in rows) == pytest.approx(union if deserved else 0, abs=rows.count())
    assert spans["vision"] and spans["nlp"]
    assert not ProjectPoolHour.objects.filter(project="").exists()


def test_a_project_waiting_on_quota_under_its_deserved_share_shows_pending_fair_share_and_starved(doors):
    """vision (4 deserved) runs 2 GPUs and asks for 4 more at normal priority: admission holds the second on QUOTA
    (non-preemptible work within the guarantee), so vision waits while under its deserved quota: starved."""
    api, standin, kube = doors["api"], doors["standin"], doors["kube"]
    first = api["researcher"].post("/api/workloads/", {
        "name": "runs", "project": "vision", "pools": [POOL], "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"], "resources": {"gpu": 2, "cpu": "4", "memory": "16Gi"}}, format="json")
    assert first.status_code == 201, first.json()
    [running] = admit_and_dispatch(kube)
    for pod in kubelet_pods(standin, running):
        run_pod(standin, pod, timezone.now() - timedelta(minutes=5), None, add=True)
    second = api["researcher"].post("/api/workloads/", {
        "name": "waits", "project": "vision", "pools": [POOL], "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"], "resources": {"gpu": 4, "cpu": "4", "memory": "16Gi"}}, format="json")
    assert second.status_code == 201, second.json()
    sync(kube)
    run_cycle()
    waiting = api["researcher"].get(f"/api/workloads/{second.json()['id']}/").json()
    assert (waiting["status"], waiting["reason"]["code"]) == ("PENDING", "QUOTA"), waiting

    [row] = [r for r in api["researcher"].get("/api/quotas/", {"pool": POOL}).json() if r["project"] == "vision"]
    gpu = row["gpu"]
    assert (gpu["deserved"], gpu["allocated"], gpu["pending"], gpu["starved"]) == (4, 2, 4, True)
    assert gpu["fair_share"] > gpu["allocated"]
    [nlp] = [r for r in api["researcher"].get("/api/quotas/", {"pool": POOL}).json() if r["project"] == "nlp"]
    assert (nlp["gpu"]["pending"], nlp["gpu"]["starved"]) == (0, False)

    printed = {line.split()[2]: line.split() for line in run("quota", "list", "--pool", POOL).splitlines()[1:]
               if len(line.split()) > 3}
    assert printed["vision"][6:] == ["2", "4", str(gpu["fair_share"]), "0", "yes"]
    assert printed["nlp"][-1] == "-"

    users = type(running.submitter).objects
    member, staff = Client(), Client()
    member.force_login(users.get(username="researcher"))
    staff.force_login(users.create_superuser("boss", "", "pw"))
    for client, page in ((staff, f"/quotas/?pool={POOL}"), (member, "/projects/vision/"), (member, f"/pools/{POOL}/")):
        answer = client.get(page)
        assert answer.status_code == 200, page
        text = answer.content.decode()
        assert 'data-col="gpu_pending"' in text, page
        vision = re.search(r'<tr data-key="training/research/vision".*?</tr>', text, re.S)
        assert vision, page
        assert 'class="badge badge-starved"' in vision.group(0), page
        assert re.search(r'data-col="gpu_pending" class="num">4<', vision.group(0)), page
        nlp = re.search(r'<tr data-key="training/research/nlp".*?</tr>', text, re.S)
        assert nlp is None or "badge-starved" not in nlp.group(0), page
