import json
import os
from pathlib import Path

import pytest
from django.conf import settings
from django.core.servers.basehttp import ThreadedWSGIServer

from tests.support.clock import EPOCH, T0, Clock

ROOT = Path(__file__).resolve().parents[1]
# Fixtures that modules in several folders use, so that no test module imports one from another.
pytest_plugins = ["tests.support.workloads", "tests.support.inventory", "tests.support.fleet",
                  "tests.support.fleet_with_history", "tests.support.clients", "tests.support.simulated",
                  "tests.support.usage", "tests.support.long_names", "tests.support.journey"]
SEED_EXAMPLES = Path(__file__).resolve().parent / "fixtures" / "seed_examples"
# tests/real/ runs against a real control plane (`make test-real`, outside CI): collected only when REAL_KUBECONFIG
# names one, so that the suite neither skips it nor fails for want of a cluster.
collect_ignore = [] if os.environ.get("REAL_KUBECONFIG") else ["real"]

# pytest-django's live server (one per test process) listens with socketserver's backlog of 5: the race test's 24
# clients connecting at once overflowed it, and on a loaded machine a connection was reset before Django saw it.
# A backlog of 128 (Linux's default somaxconn), as a production server has.
ThreadedWSGIServer.request_queue_size = 128


def pytest_collection_modifyitems(config, items):
    on_postgres = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    for item in items:
        missing = [name for marker, name, there in (("postgres", "PostgreSQL", on_postgres),
                                                     ("redis", "Redis", settings.REDIS_AVAILABLE))
                   if item.get_closest_marker(marker) and not there]
        if not missing:
            continue
        if settings.REQUIRE_SERVICES:  # e.g. DATABASE_URL=sqlite:// in CI: each such test fails, none is skipped
            item.stash[MISSING] = missing
        else:
            item.add_marker(pytest.mark.skip(reason=f"needs {missing[0]} (REQUIRE_SERVICES=1 makes this a failure)"))


MISSING = pytest.StashKey[list]()


def pytest_runtest_setup(item):
    if missing := item.stash.get(MISSING, None):
        pytest.fail(f"needs {' and '.join(missing)}, which REQUIRE_SERVICES=1 requires", pytrace=False)


@pytest.fixture
def clock():
    """The tests' one injected clock, at T0 (tests/support/clock.py) until the test moves it: `clock()` reads the
    seconds since the Unix epoch, `clock.now()` the same instant as an aware datetime. A test hands it to the code
    it tests (a `clock=` argument, or the module's `clock` replaced with `clock.now`)."""
    return Clock(T0, start=EPOCH)


@pytest.fixture
def defaults(db):
    from pools.config.defaults import init_defaults

    init_defaults(author="tests")


@pytest.fixture
def demo_fleet(db, tmp_path):
    """The demo's configuration and its simulated default cluster, synced at a pinned moment (the simulated
    fleet moves with the clock)."""
    from pools.cluster.simulated import SimulatedCluster
    from pools.config.defaults import init_demo
    from pools.fleet.sync import BackendSync
    from pools.models import Backend

    init_demo(author="tests")
    backend = Backend.objects.get(name="default")
    BackendSync(backend, SimulatedCluster("default", tmp_path, clock=lambda: 1_760_000_000.0,
                                          sleep=lambda seconds: None)).run(seconds=0)


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("ops", password="pw-ops-123", is_staff=True, is_superuser=True)


@pytest.fixture
def member(django_user_model):
    return django_user_model.objects.create_user("researcher", password="pw-res-123")


@pytest.fixture
def api(client, staff):
    from rest_framework.test import APIClient

    api_client = APIClient()
    api_client.force_authenticate(staff)
    return api_client


def seed_json_blocks(seed: str) -> list[str]:
    """The JSON documents printed in a seed page, as printed, in page order."""
    files = sorted(SEED_EXAMPLES.glob(f"{seed}-*.json"), key=lambda path: int(path.stem.split("-")[1]))
    return [path.read_text().removesuffix("\n") for path in files]


def reference_defaults() -> dict:
    """The defaults OSMO ships, as the project ships them (the same content as OSMO's published defaults)."""
    return json.loads((ROOT / "pools" / "config" / "defaults" / "osmo-defaults.json").read_text())


@pytest.fixture
def backend(standin, tmp_path, defaults):
    """Backend `prod`, added on the stand-in API server (`backend add`), not yet synced."""
    from django.core.management import call_command

    from pools.models import Backend

    call_command("backend", "add", "prod", "--kubeconfig", standin.kubeconfig(tmp_path / "kubeconfig"))
    return Backend.objects.get(name="prod")


@pytest.fixture
def kube(standin, tmp_path):
    """The real client, on the stand-in API server (tests/cluster/ shortens its timeouts)."""
    from pools.cluster.kube import KubeCluster

    cluster = KubeCluster.from_kubeconfig(standin.kubeconfig(tmp_path / "client-kubeconfig"))
    yield cluster
    cluster.close()


@pytest.fixture
def prometheus(settings):
    """The stand-in Prometheus, set as OSMO_PROMETHEUS_URL. Its 60-s budget is not what a test measures (the slow
    fault sets its own): it is there so that a loaded machine, which took 1.5 s for the huge answer, cannot turn
    another fault into a timeout."""
    from tests.prometheus_standin import PrometheusStandin

    standin = PrometheusStandin().start()
    settings.OSMO_PROMETHEUS_URL = standin.url
    settings.OSMO_PROMETHEUS_TIMEOUT = 60
    yield standin
    standin.stop()


@pytest.fixture
def standin():
    """The stand-in Kubernetes API server (real HTTP) for the real client."""
    from tests.kube_standin import KubeStandin

    server = KubeStandin()
    yield server
    server.close()
    assert not server.server_errors, server.server_errors[0]


@pytest.fixture
def shared_clients():
    """The per-process clients of `shared_cluster_for` (`backend reconcile`, the engine pages), closed after the test
    (their servers go with it)."""
    from pools.fleet import sync

    yield
    for key in list(sync._SHARED):
        close = getattr(sync._SHARED.pop(key), "close", None)
        if close is not None:
            close()
