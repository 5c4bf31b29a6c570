"""A pool, platform, department and project with the longest and oddest names the configuration accepts (upper case,
dots and underscores, 122 to 128 characters), for the tests that send them to the stand-in API server: the `long_names`
fixture (a plugin of the whole suite, tests/conftest.py's pytest_plugins, so that no test module imports it from
another)."""

import pytest

PREFIX = "runwhere.ai/"
POOL = "training_" + "X" * 110 + ".v2"  # begins with `training`: the researcher's role grants it
PLATFORM = "h100_" + "P" * 120 + "9"
DEPARTMENT = "Research." + "R" * 115 + "_1"
PROJECT = "Vision_" + "Y" * 119 + "-7"
# The project's label value, written out: its first 52 characters, "-", and the first 10 hex digits of the SHA-256 of
# the full name (63 characters, Kubernetes' limit for a label value).
PROJECT_LABEL = "Vision_" + "Y" * 45 + "-1a95ae2c05"


@pytest.fixture
def long_names(world):
    """The pool (with a topology key, and one node of 8 H100s on the platform) and the project (the researcher's, in
    the department, 4 GPUs deserved in the pool), written through the configuration's own import."""
    from pools.config import writes
    from pools.models import ConfigKind, Pool
    from tests.scheduling.conftest import add_nodes, project, seed_pool

    pool = {**seed_pool(), "name": POOL, "default_platform": PLATFORM, "common_pod_template": ["default_user"],
            "platforms": {PLATFORM: {"override_pod_template": ["h100"]}}}
    writes.import_document(ConfigKind.POOL, {"pools": {POOL: pool}}, author="tests")
    # By hand: the configuration's door refuses topology keys while the backend is not KAI's, and the tests switch the
    # scheduler (KAI or Kueue) only after, with the longest key names already stored.
    Pool.objects.filter(name=POOL).update(topology_keys=[{"key": "zone", "label": "topology.kubernetes.io/zone"}])
    writes.import_document(ConfigKind.DEPARTMENT, {DEPARTMENT: {"name": DEPARTMENT}}, author="tests")
    project(PROJECT, department=DEPARTMENT, pools={POOL: {"deserved": 4}}, users=["researcher"], default_pools=[POOL])
    add_nodes(POOL, PLATFORM, 1, gpus=8, prefix="long")
