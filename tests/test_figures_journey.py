"""Journeys for the figures admins and researchers read (issue 45 point 2), beside the usage journey
(tests/usage/test_usage_journey.py): quotas and fair share, the pool and node tables, start estimates and the audit
log, each from a state built only through the product's doors (tests/support/journey.py: the CLI, the API, the
stand-in cluster and the sync, admission and dispatch as the workers run them) and compared with a computation of
the test's own: from the stand-in's pods and Jobs, from what the test did, and from the fair-share rules as
docs/concepts.md states them."""

from collections import defaultdict
from datetime import datetime, timedelta
from fractions import Fraction

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from scheduling.models import Workload
from scheduling.run import follow
from scheduling.run.cycle import run_cycle
from tests.support.commands import run
from tests.support.journey import POOL, admit_and_dispatch, config, kubelet_pods, run_pod, sync

pytestmark = pytest.mark.django_db(transaction=True)

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submit(api, name: str, project: str, gpus: int, replicas: int = 1, priority: str = "low") -> int:
    answer = api.post("/api/workloads/", {
        "name": name, "project": project, "pools": [POOL], "image": IMAGE, "command": ["python", "train.py"],
        "replicas": replicas, "resources": {"gpu": gpus, "cpu": "1", "memory": "4Gi"}, "priority": priority},
        format="json")
    assert answer.status_code == 201, answer.json()
    return answer.json()["id"]


def fair_shares(total: Fraction, units: dict[str, dict]) -> dict[str, Fraction]:
    """The fair-share rules of docs/concepts.md for siblings dividing `total` (whole GPUs): each first gets
    min(deserved, want); what is left is offered in rounds, left * weight / sum of the weights of those still
    wanting, taken whole when the unmet want fits, else rounded down to whole GPUs; rounds end when one gives
    nothing (the leftover units, one at a time, are not needed by the states below)."""
    got = {name: min(unit["deserved"], unit["want"]) for name, unit in units.items()}
    left = total - sum(got.values())
    while left > 0:
        wanting = {name: unit["weight"] for name, unit in units.items() if got[name] < unit["want"] and unit["weight"]}
        if not wanting:
            break
        given = Fraction(0)
        start = left
        for name, weight in wanting.items():
            offer = start * weight / sum(wanting.values())
            unmet = units[name]["want"] - got[name]
            take = unmet if unmet <= offer else Fraction(int(offer))
            got[name] += take
            given += take
        left -= given
        if not given:
            break
    return got


@pytest.fixture
def contended(doors):
    """vision (4 deserved, weight Medium) runs 2 GPUs at normal priority and waits for 2 x 6 more; nlp (none
    deserved, weight Low) runs 6 GPUs at low priority and waits for 4 more: 24 GPUs wanted of 16. The waiting
    work is as it is between its submission and the next admission cycle."""
    api, standin, kube = doors["api"], doors["standin"], doors["kube"]
    config("PROJECT", {"nlp": {"name": "nlp", "department": "research",
                               "members": {"users": ["researcher", "other"], "roles": []},
                               "default_node_pools": [POOL],
                               "resources": [{"node_pool": POOL, "gpu": {"deserved": 0, "limit": 16,
                                                                         "over_quota_weight": "Low"}}]}})
    submit(api["researcher"], "v-runs", "vision", 2, priority="normal")
    submit(api["other"], "n-runs", "nlp", 6)
    for workload in admit_and_dispatch(kube):
        for pod in kubelet_pods(standin, workload):
            run_pod(standin, pod, timezone.now(), None, add=True)
    sync(kube)
    waiting = [submit(api["researcher"], "v-waits", "vision", 6, replicas=2), submit(api["other"], "n-waits", "nlp", 4)]
    assert set(Workload.objects.filter(pk__in=waiting).values_list("status", flat=True)) == {"PENDING"}
    return doors


def running_gpus(standin) -> dict[str, dict[str, int]]:
    """{project: {node: GPUs}} of the stand-in's running pods of workloads, from their namespaces' workloads."""
    owners = {(w.namespace, w.job_name): w.project.name for w in Workload.objects.select_related("project")}
    found: dict = defaultdict(lambda: defaultdict(int))
    for pod in standin.pods():
        job = pod["metadata"]["labels"].get("batch.kubernetes.io/job-name")
        if job is None or pod["status"]["phase"] != "Running":
            continue
        gpus = int(pod["spec"]["containers"][0]["resources"]["limits"].get("nvidia.com/gpu", 0))
        found[owners[(pod["metadata"]["namespace"], job)]][pod["spec"]["nodeName"]] += gpus
    return found


def test_quota_figures_and_fair_shares_equal_the_pods_the_waiting_work_and_the_rules(contended):
    api, standin = contended["api"], contended["standin"]
    held = running_gpus(standin)
    allocated = {project: sum(nodes.values()) for project, nodes in held.items()}
    pending = {"vision": 2 * 6, "nlp": 4}
    assert allocated == {"vision": 2, "nlp": 6}
    rows = {row["project"]: row["gpu"] for row in api["researcher"].get("/api/quotas/", {"pool": POOL}).json()
            if row["project"] in ("vision", "nlp")}

    # One department: research has no quota row, so it deserves its projects' 4 and divides the pool's 16.
    want = {project: allocated[project] + pending[project] for project in pending}
    expected = fair_shares(Fraction(16), {
        "vision": {"deserved": 4, "weight": 2, "want": want["vision"]},
        "nlp": {"deserved": 0, "weight": 1, "want": want["nlp"]}})
    # 4, then 8 of the 12 left (weight 2 of 3); nlp 4 (1 of 3). Equal weights would make it 10 and 6.
    assert expected == {"vision": 12, "nlp": 4}
    for project in ("vision", "nlp"):
        gpu = rows[project]
        assert (gpu["allocated"], gpu["pending"]) == (allocated[project], pending[project]), project
        assert gpu["fair_share"] == expected[project], (project, gpu)
    assert (rows["vision"]["starved"], rows["nlp"]["starved"]) == (True, False)  # vision waits under its 4


def test_pool_and_node_tables_equal_the_stand_in_nodes_and_pods(contended):
    api, standin = contended["api"], contended["standin"]
    per_node: dict = defaultdict(int)
    for nodes in running_gpus(standin).values():
        for node, gpus in nodes.items():
            per_node[node] += gpus
    capacity = {name: int(standin.node(name)["status"]["allocatable"]["nvidia.com/gpu"])
                for name in standin.node_names()}
    assert sum(per_node.values()) == 8 and set(per_node) <= set(capacity)

    pool = api["researcher"].get(f"/api/pools/{POOL}/").json()
    assert (pool["node_count"], pool["gpu_total"], pool["gpu_used"], pool["gpu_free"]) == (
        len(capacity), sum(capacity.values()), sum(per_node.values()), sum(capacity.values()) - sum(per_node.values()))
    nodes = {row["node"]: row for row in pool["nodes"]}
    assert set(nodes) == set(capacity)
    for name, gpus in capacity.items():
        row = nodes[name]
        assert (row["gpu_total"], row["gpu_used"], row["gpu_free"]) == (gpus, per_node[name], gpus - per_node[name])
    printed = {line.split()[0]: line.split() for line in run("pool", "list").splitlines()[1:] if line.strip()}
    assert POOL in printed


def test_the_audit_log_lists_every_action_taken_through_the_doors_and_each_reader_sees_their_own(contended):
    api = contended["api"]
    cancel = submit(api["researcher"], "to-cancel", "vision", 1)
    assert api["researcher"].post(f"/api/workloads/{cancel}/cancel/").status_code in (200, 202)
    staff = APIClient()
    staff.force_authenticate(type(Workload.objects.first().submitter).objects.create_superuser("boss", "", "pw"))
    node = contended["standin"].node_names()[0]
    assert staff.post(f"/api/nodes/{node}/cordon", {}, format="json").status_code == 200

    ids = dict(Workload.objects.values_list("name", "pk"))
    done = {("researcher", "workload", f"workload/{ids[name]}", "submit")
            for name in ("v-runs", "v-waits", "to-cancel")}
    done |= {("other", "workload", f"workload/{ids[name]}", "submit") for name in ("n-runs", "n-waits")}
    done |= {("researcher", "workload", f"workload/{cancel}", "cancel"), ("boss", "node", f"node/{node}", "cordon")}
    page = staff.get("/api/audit/", {"limit": 1000}).json()
    rows = page["results"]
    listed = {(row["actor"], row["kind"], row["object"], row["action"]) for row in rows
              if row["kind"] in ("workload", "node")}
    assert listed == done
    own = api["researcher"].get("/api/audit/", {"limit": 1000}).json()["results"]
    assert own and {row["actor"] for row in own} == {"researcher"}
    assert {(row["kind"], row["object"], row["action"]) for row in own if row["kind"] == "workload"} == {
        entry[1:] for entry in done if entry[0] == "researcher"}
    verified = run("audit", "verify")
    assert f"{page['count']} audit rows verified" in verified and "the chain is intact" in verified


def test_a_start_estimate_is_when_the_first_running_job_reaches_its_deadline(doors):
    """Two 8-GPU workloads fill training with exec timeouts of 2 h and 3 h; a 4-GPU workload then waits. Its
    estimate is the first moment 4 GPUs free up: when the first Job reaches its deadline, Kubernetes' rule: the
    activeDeadlineSeconds of the stand-in's Job, counted from the Job's start, a moment between its dispatch and
    the sync that saw its pods run."""
    api, standin, kube = doors["api"], doors["standin"], doors["kube"]
    for name, timeout in (("first", "2h"), ("second", "3h")):
        answer = api["researcher"].post("/api/workloads/", {
            "name": name, "project": "vision", "pools": [POOL], "image": IMAGE, "command": ["python", "train.py"],
            "resources": {"gpu": 8, "cpu": "1", "memory": "4Gi"}, "priority": "low", "exec_timeout": timeout},
            format="json")
        assert answer.status_code == 201, answer.json()
    before = timezone.now().replace(microsecond=0)
    for workload in admit_and_dispatch(kube):
        for pod in kubelet_pods(standin, workload):
            run_pod(standin, pod, timezone.now(), None, add=True)
    sync(kube)
    follow.observe()
    after = timezone.now().replace(microsecond=0) + timedelta(seconds=1)  # the API answers in whole seconds
    waiting = submit(api["researcher"], "waits", "vision", 4)
    run_cycle()

    deadlines = sorted(timedelta(seconds=job["spec"]["activeDeadlineSeconds"]) for job in standin.jobs())
    assert deadlines == [timedelta(hours=2), timedelta(hours=3)]
    detail = api["researcher"].get(f"/api/workloads/{waiting}/").json()
    assert detail["status"] == "PENDING", detail
    estimate = datetime.fromisoformat(detail["estimated_start"])
    assert before + deadlines[0] <= estimate <= after + deadlines[0], (before, after, detail["estimate_basis"])
