"""Settings from the environment and the Celery app (with a real worker over Redis)."""


import pytest
from django.core.exceptions import ImproperlyConfigured

from osmo_site.env import env_bool, env_int, env_list
from tests.celery_app import broker_at, every_queue
from tests.support.commands import run
from tests.waiting import until


def test_env_bool_refuses_values_that_are_not_booleans(monkeypatch):
    monkeypatch.setenv("FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="FLAG='maybe' is not a boolean"):
        env_bool("FLAG")
    for text, value in (("1", True), ("off", False), ("Yes", True), ("", False)):
        monkeypatch.setenv("FLAG", text)
        assert env_bool("FLAG") is value
    monkeypatch.delenv("FLAG")
    assert env_bool("FLAG", True) is True


def test_env_list_and_int(monkeypatch):
    monkeypatch.setenv("HOSTS", "a.example, b.example,,")
    assert env_list("HOSTS", []) == ["a.example", "b.example"]
    monkeypatch.setenv("N", "x")
    with pytest.raises(ImproperlyConfigured):
        env_int("N", 1)


def test_settings_refuse_to_start_without_a_secret_key_when_debug_is_off(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    unset = ("SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE")
    env = {key: value for key, value in os.environ.items() if key not in unset}
    env["OSMO_DATA_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "SECRET_KEY must be set when DEBUG is off" in done.stderr


def test_the_settings_file_fills_what_the_environment_leaves_unset(monkeypatch, tmp_path):
    from osmo_site import env

    path = tmp_path / "env"
    assert env.write_local_env_file(path) is True
    assert path.stat().st_mode & 0o777 == 0o600
    written = path.read_text()
    assert env.write_local_env_file(path) is False and path.read_text() == written  # written once
    path.write_text(written + "# a comment\n\nLOG_LEVEL = 'WARNING'\nALLOWED_HOSTS=\"a.example,b.example\"\n")
    monkeypatch.delenv("DEBUG", raising=False)
    monkeypatch.delenv("LOG_LEVEL", raising=False)
    monkeypatch.delenv("ALLOWED_HOSTS", raising=False)
    monkeypatch.setenv("SECRET_KEY", "from-the-environment")
    try:
        env.load_env_file(path)
        assert env.env_bool("DEBUG") is True
        assert env.env_str("LOG_LEVEL") == "WARNING"
        assert env.env_list("ALLOWED_HOSTS", []) == ["a.example", "b.example"]
        assert env.env_str("SECRET_KEY") == "from-the-environment"  # the environment wins
        monkeypatch.setenv("DEBUG", "0")
        assert env.env_bool("DEBUG") is False
    finally:
        env.load_env_file(None)
    assert env.env_str("LOG_LEVEL") is None


def test_the_settings_file_refuses_what_it_cannot_read(tmp_path):
    from osmo_site import env

    for text, message in (("DEBUG\n", "line 1: expected KEY=VALUE"), ("# ok\n1X=2\n", "line 2: expected KEY=VALUE"),
                          ("OSMO_DATA_DIR=/x\n", "OSMO_DATA_DIR can only be set in the environment")):
        with pytest.raises(ImproperlyConfigured, match=message):
            env.parse_env_file(text, tmp_path / "env")


def test_every_beat_entry_names_a_registered_task():
    from osmo_site.celery import app

    app.loader.import_default_modules()
    assert app.conf.beat_schedule
    for entry in app.conf.beat_schedule.values():
        assert entry["task"] in app.tasks


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_syncs_a_simulated_backend_through_redis(settings, tmp_path):
    """Checked by the task's effects in the database, so no result backend is involved."""
    from celery.contrib.testing.worker import start_worker

    from pools.models import Backend, Node
    from pools.tasks import sync_backend

    settings.OSMO_SIMULATED_STATE_DIR = tmp_path
    run("backend", "add", "sim", "--simulated")
    sim = Backend.objects.get(name="sim")
    # By hand: a Kubernetes backend with no connection at all, which `backend add` refuses to make.
    real = Backend.objects.create(name="real", kind=Backend.Kind.KUBERNETES)
    with broker_at(settings.TEST_REDIS_URL) as app, start_worker(app, pool="solo", perform_ping_check=False,
                                                                 queues=every_queue(), shutdown_timeout=10):
        sync_backend.delay(sim.pk, seconds=0)
        sync_backend.delay(real.pk, seconds=0)
        until(lambda: Backend.objects.filter(pk=sim.pk, last_sync_at__isnull=False).exists()
              and Backend.objects.filter(pk=real.pk).exclude(sync_error="").exists(),
              "the worker to sync both backends", every=0.2)
    assert Node.objects.filter(backend=sim).count() >= 200
    sim.refresh_from_db()
    real.refresh_from_db()
    assert sim.last_sync_at is not None and sim.sync_error == ""
    assert "not connected" in real.sync_error


def test_a_worker_loads_the_cluster_client_before_it_forks_its_pool():
    """Issue 43: a prefork child's first dispatch no longer imports the kubernetes package (about a second of CPU);
    the worker's main process has it loaded when `worker_init` has run, before the pool starts."""
    import os
    import subprocess
    import sys

    script = ("import sys, django; django.setup(); from osmo_site.celery import app; "
              "from celery.signals import worker_init; assert 'kubernetes' not in sys.modules; "
              "worker_init.send(sender=None); assert 'pools.cluster.kube' in sys.modules; print('loaded')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DJANGO_SETTINGS_MODULE": "osmo_site.settings_test"})
    assert done.stdout.strip() == "loaded", done.stderr[-2000:]
