"""KAI's Queues follow our quotas without anyone asking: a project write sends `reconcile_engines` once it
commits (a real worker through Redis applies it to the stand-in API server through the real client), and the
periodic run repairs drift and records its outcome, or its error, on the backend."""


import pytest
from celery.contrib.testing.worker import start_worker

from pools.cluster.kinds import KAI_QUEUE
from pools.models import Backend
from pools.schedulers.kai import queue_name
from pools.tasks import reconcile_engines
from tests.celery_app import broker_at, every_queue
from tests.scheduling.conftest import project
from tests.support.commands import run
from tests.waiting import until

VISION = queue_name("training", "research", "vision")


@pytest.fixture
def kai_on_standin(world, standin, tmp_path):
    """The world's default backend on KAI, its cluster the stand-in API server."""
    path = standin.kubeconfig(tmp_path / "kubeconfig")
    run("backend", "add", "default", "--kubeconfig", str(path), "--scheduler", "kai")
    return Backend.objects.get(name="default")


def gpu_quota(standin, name: str):
    for queue in standin.objects(KAI_QUEUE):
        if queue["metadata"]["name"] == name:
            return queue["spec"]["resources"]["gpu"]["quota"]
    return None


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_quota_write_reconciles_the_queues_through_a_real_worker_once_it_commits(kai_on_standin, standin, settings):
    settings.OSMO_ENGINE_RECONCILE_ON_COMMIT = True
    with broker_at(settings.TEST_REDIS_URL) as app, start_worker(app, pool="solo", perform_ping_check=False,
                                                                 queues=every_queue(), shutdown_timeout=10):
        project("vision", pools={"training": {"deserved": 6, "limit": 12}}, users=["researcher"],
                default_pools=["training"])
        until(lambda: gpu_quota(standin, VISION) == 6, "the worker to write vision's quota into its KAI queue")
    assert gpu_quota(standin, VISION) == 6
    kai_on_standin.refresh_from_db()
    assert kai_on_standin.engine_reconciled_at is not None and kai_on_standin.engine_error == ""
    assert kai_on_standin.engine_objects["objects"]["Queue"] == len(standin.objects(KAI_QUEUE))


@pytest.mark.django_db
def test_the_periodic_run_repairs_drift_and_keeps_an_error_on_the_backend(kai_on_standin, standin, tmp_path):
    reconcile_engines()
    standin.delete_object(KAI_QUEUE, VISION)  # somebody deleted ours
    standin.modify_object(KAI_QUEUE, queue_name("training", "research"), {"spec": {"resources": {"gpu": {
        "quota": 1000}}}})
    assert reconcile_engines()["default"]["created"] == 1
    assert gpu_quota(standin, VISION) == 4
    assert gpu_quota(standin, queue_name("training", "research")) != 1000
    run("backend", "add", "default", "--kubeconfig", str(tmp_path / "gone"))
    outcome = reconcile_engines()
    assert "does not exist" in outcome["default"]["error"]
    kai_on_standin.refresh_from_db()
    # the last good run stays
    assert "does not exist" in kai_on_standin.engine_error and kai_on_standin.engine_reconciled_at is not None


@pytest.mark.django_db
def test_a_backend_that_left_its_engine_loses_our_objects_and_then_is_left_alone(kai_on_standin, standin):
    reconcile_engines()
    assert standin.objects(KAI_QUEUE)
    run("backend", "add", "default", "--kubeconfig", kai_on_standin.kubeconfig_path, "--scheduler", "default")
    assert reconcile_engines()["default"]["deleted"] > 0
    assert standin.objects(KAI_QUEUE) == []
    assert reconcile_engines() == {}  # nothing of ours left there: not even listed
