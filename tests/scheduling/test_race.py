"""The race: rounds of concurrent submissions through the HTTP API while two other processes run admission
cycles against the same PostgreSQL database. Whatever interleaving happens, no moment and no round ever
holds more than a project's limit, more non-preemptible work than a project's or a department's deserved
quota, or more GPUs on a node than it has free.

Between rounds a random half of the admitted work completes, preempted work stops and what still waits is
canceled, as dispatch and users would, so every round starts with capacity to fight over."""

import os
import random
import subprocess
import sys
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from django.conf import settings
from django.db import connection
from django.utils import timezone

from pools.access.tokens import create_token
from pools.config import writes
from pools.models import ConfigKind, Node, Project, Quota
from scheduling.models import RESERVING, AdmissionState, Status, Workload
from tests.scheduling.conftest import SHARED, add_nodes
from tests.support.commands import run
from tests.waiting import until

# Four rounds: the first on an empty cluster, three on one that half the work has left (completed, preempted,
# canceled), which is every kind of state the later rounds start from; rounds 5 to 10 repeated those states with
# other random draws: six rounds of ten. OSMO_RACE_ROUNDS=20 runs the long race.
ROUNDS = int(os.environ.get("OSMO_RACE_ROUNDS", 4))
# A round's size is what it must prove, not more: every limit over-asked many times over while the cycles run. A
# submission asks 3.75 GPUs on average (1, 1, 2, 2, 4 or 8 GPUs; two replicas one time in four), so 100 of them ask
# about 375 GPUs of the 48 there are (training's 32, the shared pool's 16), about 25 per user and project: some 94
# GPUs against vision's limit of 12, ads' 10 and each department's 6 deserved, 8 to 16 times over. The 24 clients
# still submit for longer than the two processes' 50-ms cycles take, so cycles admit, preempt and leave work
# waiting between submissions, as before. 300 a round (the size before issue 45) asked 23 times the cluster and
# showed nothing more, for three times the seconds; OSMO_RACE_SUBMISSIONS=300 runs those larger rounds.
PER_ROUND = int(os.environ.get("OSMO_RACE_SUBMISSIONS", 100))
CLIENTS = 24  # concurrent HTTP clients (each request is one server thread and one database connection)
HOLDING = RESERVING  # admitted, preempting, dispatched (SCHEDULING) or running: each holds its reservation

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def contest(world, django_user_model):
    """training: 4 nodes of 8 H100s. Department research (vision: 4 deserved, limit 12; nlp: 0 deserved)
    deserves 6 in training; department product (ads: 6 deserved, limit 10) deserves 6."""
    add_nodes("training", "h100", 2, gpus=8, prefix="extra")
    writes.import_document(ConfigKind.DEPARTMENT, {
        "research": {"name": "research", "resources": [{"node_pool": "training", "gpu": {"deserved": 6}}]},
        "product": {"name": "product", "resources": [{"node_pool": "training", "gpu": {"deserved": 6}}]}},
        author="tests")
    writes.import_document(ConfigKind.PROJECT, {"ads": {
        "name": "ads", "department": "product", "members": {"users": ["marketer"]}, "default_node_pools": ["training"],
        "resources": [{"node_pool": "training", "gpu": {"deserved": 6, "limit": 10}}]}}, author="tests")
    marketer = django_user_model.objects.create_user("marketer")
    run("user", "add-role", "marketer", "osmo-training")
    expires = timezone.now() + timezone.timedelta(days=1)
    return {name: create_token(user, "race", expires)[1]
            for name, user in (("researcher", world["researcher"]), ("other", world["other"]),
                               ("marketer", marketer))}


def request_body(rng: random.Random) -> tuple[str, dict]:
    user, project = rng.choice([("researcher", "vision"), ("researcher", "nlp"), ("other", "nlp"),
                                ("marketer", "ads")])
    body = {"name": f"race-{rng.randrange(10 ** 6)}", "project": project, "image": "busybox",
            "priority": rng.choice(["high", "normal", "normal", "low", "low"]),
            "replicas": rng.choice([1, 1, 1, 2]),
            "resources": {"gpu": rng.choice([1, 1, 2, 2, 4, 8]), "cpu": "1", "memory": "1Gi"}}
    if project == "vision" and rng.random() < 0.3:
        body["pools"] = ["training", SHARED]
    return user, body


def workers(count: int, data_dir) -> list[subprocess.Popen]:
    """`schedule` processes: cycles, then dispatch of what they admitted to the default backend's simulated
    cluster (its state under `data_dir`)."""
    db = connection.settings_dict
    url = f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "DEBUG": "1",
           "OSMO_ENV_FILE": "", "OSMO_ADMISSION_ON_COMMIT": "0", "OSMO_DATA_DIR": str(data_dir)}
    return [subprocess.Popen([sys.executable, "manage.py", "schedule", "--interval", "0.05"], cwd=settings.BASE_DIR,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            for _ in range(count)]


def violations() -> list[str]:
    """Every broken invariant in one consistent read of the holders."""
    from django.db import transaction

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        holders = list(Workload.objects.filter(status__in=HOLDING).values(
            "project__name", "project__department__name", "pool__name", "priority", "gpu", "replicas", "placement"))
    quotas = {(q["project__name"] or q["department__name"], q["pool__name"]): q for q in Quota.objects.values(
        "project__name", "department__name", "pool__name", "gpu_deserved", "gpu_limit")}
    free = dict(Node.objects.values_list("name", "gpu_free"))
    used, guaranteed, on_node = defaultdict(int), defaultdict(int), defaultdict(int)
    for w in holders:
        gpus = w["gpu"] * w["replicas"]
        used[(w["project__name"], w["pool__name"])] += gpus
        if w["priority"] != "low":
            guaranteed[(w["project__name"], w["pool__name"])] += gpus
            guaranteed[(w["project__department__name"], w["pool__name"])] += gpus
        for node, replicas in (w["placement"] or {}).items():
            on_node[node] += replicas * w["gpu"]
    found = []
    for key, gpus in used.items():
        limit = quotas.get(key, {}).get("gpu_limit", -1)
        if limit is not None and limit != -1 and gpus > limit:
            found.append(f"project {key[0]} holds {gpus} GPUs in {key[1]}, limit {limit}")
    for key, gpus in guaranteed.items():
        quota = quotas.get(key)
        if quota is not None and gpus > quota["gpu_deserved"]:
            found.append(f"{key[0]} holds {gpus} non-preemptible GPUs in {key[1]}, deserved {quota['gpu_deserved']}")
    found += [f"node {node} holds {gpus} GPUs, {free[node]} free" for node, gpus in on_node.items()
              if gpus > free[node]]
    return found


def settle(after) -> None:
    """Until two cycles have started after `after` (so one ran wholly after the last submission)."""
    started = []

    def second_cycle() -> bool:
        state = AdmissionState.objects.filter(pk=1).values_list("last_cycle_at", flat=True).first()
        if state and state > (started[-1] if started else after):
            started.append(state)
        return len(started) >= 2

    until(second_cycle, "two admission cycles after the round's last submission (are the worker processes alive?)",
          every=0.05)


def gone() -> None:
    """Until PostgreSQL has closed the worker processes' sessions, so the test database can be dropped."""
    with connection.cursor() as cursor:
        def closed() -> bool:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND application_name NOT LIKE 'pytest%%' AND pid <> pg_backend_pid() "
                           "AND backend_type = 'client backend'")
            return cursor.fetchone()[0] == 0

        until(closed, "the worker processes' database sessions to close")


def end_round(rng: random.Random) -> None:
    # By hand: the follower's ends of a random half, rounds in milliseconds; the race is between the cycle and the
    # writes, not the follower (whose ends through the stand-in are the journeys').
    now = timezone.now()
    admitted = list(Workload.objects.filter(status__in=[Status.ADMITTED, Status.SCHEDULING, Status.RUNNING])
                    .values_list("pk", flat=True))
    Workload.objects.filter(pk__in=rng.sample(admitted, len(admitted) // 2)).update(
        status=Status.COMPLETED, finished_at=now)
    Workload.objects.filter(status=Status.PREEMPTING).update(status=Status.FAILED_PREEMPTED, finished_at=now)
    Workload.objects.filter(status=Status.PENDING).update(status=Status.FAILED_CANCELED, finished_at=now)


def test_concurrent_submissions_and_two_cycling_processes_never_break_a_quota_or_a_node(contest, live_server,
                                                                                       tmp_path, settings):
    # Thousands of submissions a minute from a few users: the submission limits (scheduling.submit.limits) are not what
    # this measures.
    settings.OSMO_SUBMISSIONS_PER_MINUTE = 0
    settings.OSMO_MAX_LIVE_WORKLOADS_PER_USER = settings.OSMO_MAX_LIVE_WORKLOADS_PER_PROJECT = 10 ** 6
    rng = random.Random(2026)
    url = f"{live_server.url}/api/workloads/"
    sessions = threading.local()

    def post(item):
        user, body = item
        if not hasattr(sessions, "http"):
            sessions.http = requests.Session()
        response = sessions.http.post(url, json=body, headers={"Authorization": f"Bearer {contest[user]}"},
                                      timeout=120)
        return response.status_code, body, response.text[:300]

    processes = workers(2, tmp_path)
    seen, admitted, statuses = [], [], defaultdict(int)
    watching = threading.Event()
    died = []  # what killed a watcher: re-raised here, since a thread's exception alone is only a warning

    def watch():
        try:
            while not watching.is_set():
                seen.extend(violations())
                watching.wait(0.1)  # the next read, or at once when the round is over
        except BaseException as exc:
            died.append(exc)
        finally:
            connection.close()  # this thread's own connection

    try:
        with ThreadPoolExecutor(CLIENTS) as pool:
            for _ in range(ROUNDS):
                started = timezone.now()
                watcher = threading.Thread(target=watch)
                watcher.start()
                try:
                    answers = list(pool.map(post, [request_body(rng) for _ in range(PER_ROUND)]))
                    settle(timezone.now())
                finally:
                    watching.set()
                    watcher.join()
                    watching.clear()
                if died:
                    raise AssertionError("the watcher of invariants died") from died[0]
                for code, body, text in answers:
                    statuses[code] += 1
                    assert code in (201, 400), (code, body, text)  # 400: never fits its deserved quota
                dead = [p for p in processes if p.poll() is not None]
                assert not dead, f"a cycling process died: {dead[0].communicate()[1][-3000:]}"
                assert not seen, seen[:5]
                assert not violations()
                admitted.append(Workload.objects.filter(admitted_at__gte=started).count())
                end_round(rng)
    finally:
        for process in processes:
            process.terminate()
        errors = [process.communicate(timeout=30)[1] for process in processes]
        gone()
    assert all("Traceback" not in text for text in errors), errors
    # The race was a race: work was queued in every round and admitted while it was. How much is admitted in a
    # round depends on how many cycles ran during its submissions (a loaded machine runs fewer) and on what the
    # simulated cluster still holds from earlier rounds, so a later round can admit nothing (CI saw 9 of 20
    # rounds admit work, this machine 19 of 20). Only the first round is certain: it starts on an empty
    # cluster, and `settle` waits for a cycle that ran wholly after its last submission.
    assert statuses[201] >= ROUNDS * PER_ROUND // 2, dict(statuses)
    assert admitted[0] > 0, admitted
    assert Project.objects.filter(name="ads").exists()
