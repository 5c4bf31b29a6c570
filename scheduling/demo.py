"""The demo's trickle (`make demo`, beat every OSMO_DEMO_TRICKLE seconds when it is above 0): a few
submissions from the demo projects each round, so the workload pages show pending, borrowing and reclaimed
work, and a stand-in for dispatch until it exists: an ADMITTED workload "runs" for one to five minutes and
completes; a PREEMPTING one is stopped at once (FAILED_PREEMPTED). Both say in their event that the demo
did it. Never enabled outside the demo."""

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from pools.engine import ConfigError
from pools.models import Project

from . import submission
from .models import Source, Status, Workload, WorkloadEvent

MAX_PENDING = 40  # submit nothing while this many wait
NAMES = ("pretrain", "finetune", "eval", "sweep", "distill", "sim-rollout", "embed", "rl-policy")


@dataclass
class Round:
    submitted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    finished: int = 0
    stopped: int = 0

    def summary(self) -> dict:
        return {"submitted": len(self.submitted), "refused": len(self.refused), "finished": self.finished,
                "stopped": self.stopped}


def run_seconds(workload_id) -> int:
    """How long a demo workload "runs": one to five minutes, fixed by its id."""
    return 60 + workload_id.int % 240


def finish(now: datetime, result: Round) -> None:
    for workload in Workload.objects.filter(status=Status.ADMITTED, admitted_at__isnull=False).only(
            "id", "admitted_at"):
        if workload.admitted_at + timedelta(seconds=run_seconds(workload.id)) <= now:
            result.finished += _end(workload.pk, Status.ADMITTED, Status.COMPLETED, "DEMO_FINISHED", now,
                                    "The demo's stand-in for dispatch ran it and it completed.")
    for workload in Workload.objects.filter(status=Status.PREEMPTING).only("id"):
        result.stopped += _end(workload.pk, Status.PREEMPTING, Status.FAILED_PREEMPTED, "DEMO_PREEMPTED", now,
                               "The demo's stand-in for dispatch stopped it to return borrowed capacity.")


def _end(pk, before: str, status: str, reason: str, now: datetime, message: str) -> int:
    with transaction.atomic():
        changed = Workload.objects.filter(pk=pk, status=before).update(status=status, finished_at=now,
                                                                       updated_at=now)
        if changed:
            WorkloadEvent.objects.create(workload_id=pk, at=now, status=status, reason=reason, message=message)
            transaction.on_commit(submission.request_cycle)
    return changed


def submit_some(rng: random.Random, result: Round, count: int) -> None:
    if Workload.objects.filter(status=Status.PENDING).count() >= MAX_PENDING:
        return
    admin = get_user_model().objects.filter(is_superuser=True, is_active=True).order_by("pk").first()
    projects = list(Project.objects.exclude(name=Project.DEFAULT_NAME).order_by("name").values_list("name",
                                                                                                    flat=True))
    if admin is None or not projects:
        return
    for _ in range(count):
        priority = rng.choices(["low", "normal", "high"], weights=[5, 4, 1])[0]
        gpus = rng.choice([1, 2, 4, 8, 8, 16]) if priority == "low" else rng.choice([1, 2, 4, 8])
        replicas = 2 if gpus == 16 else 1
        data = {"name": f"{rng.choice(NAMES)}-{rng.randrange(1000):03d}", "project": rng.choice(projects),
                "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ["python", "train.py"],
                "priority": priority, "replicas": replicas,
                "resources": {"gpu": min(gpus, 8), "cpu": str(4 * min(gpus, 8)), "memory": f"{32 * min(gpus, 8)}Gi"}}
        try:
            submitted = submission.submit(admin, data, source=Source.API)
        except (ConfigError, submission.SubmissionRefused) as exc:
            result.refused.append(f"{data['name']}: {exc}")
            continue
        result.submitted.append(str(submitted.workload.id))


def trickle(rng: random.Random | None = None, now: datetime | None = None, count: int | None = None) -> Round:
    rng = rng or random.Random()
    result = Round()
    finish(now or timezone.now(), result)
    submit_some(rng, result, rng.randint(1, 3) if count is None else count)
    return result
