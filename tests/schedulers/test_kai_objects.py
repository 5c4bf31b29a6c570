"""KAI's Queue and Topology objects from our quotas and pools (pools/schedulers/kai.py, pure)."""

from decimal import Decimal

from pools.schedulers.kai import Department, Unit, queue_name, queues, topology

PREFIX = "runwhere.ai/"
GIB = 1024 ** 3


def test_a_department_is_a_parent_queue_its_projects_leaves_parents_first_limits_explicit():
    made = queues("training", [
        Department("research", Unit(deserved=(Decimal(16), 64_000, 512 * 10 ** 9), weight=(3, 2, 2)),
                   {"vision": Unit(deserved=(Decimal(4), None, None), limit=(Decimal(12), -1, -1)),
                    "nlp": Unit(deserved=(Decimal("0.5"), 8000, 64 * GIB), weight=(0, 1, None))}),
        Department("ads", None, {"ctr": Unit(deserved=(Decimal(2), 4000, None))}),
    ], prefix=PREFIX)
    names = [q["metadata"]["name"] for q in made]
    assert names == ["training.ads", "training.research", "training.ads.ctr", "training.research.nlp",
                     "training.research.vision"]
    by_name = {q["metadata"]["name"]: q for q in made}
    research = by_name["training.research"]["spec"]
    assert "parentQueue" not in research
    assert research["resources"] == {"gpu": {"quota": 16, "limit": -1, "overQuotaWeight": 3},
                                     "cpu": {"quota": 64_000, "limit": -1, "overQuotaWeight": 2},
                                     "memory": {"quota": 512_000, "limit": -1, "overQuotaWeight": 2}}
    vision = by_name["training.research.vision"]
    assert vision["spec"]["parentQueue"] == "training.research"
    assert vision["spec"]["resources"]["gpu"] == {"quota": 4, "limit": 12, "overQuotaWeight": 2}
    assert vision["spec"]["resources"]["cpu"] == {"quota": -1, "limit": -1, "overQuotaWeight": 2}  # not set
    nlp = by_name["training.research.nlp"]["spec"]["resources"]
    assert nlp["gpu"] == {"quota": 0.5, "limit": -1, "overQuotaWeight": 0}  # Lowest: borrows, no share
    # None: never above deserved, which KAI says with a limit at the quota (MB: 10^6 bytes).
    assert nlp["memory"] == {"quota": 68719.476736, "limit": 68719.476736, "overQuotaWeight": 0}
    assert vision["metadata"]["labels"] == {f"{PREFIX}managed-by": "osmo-pools", f"{PREFIX}pool": "training",
                                            f"{PREFIX}department": "research", f"{PREFIX}project": "vision"}
    # A department without a row deserves the sum of its projects'.
    assert by_name["training.ads"]["spec"]["resources"]["gpu"]["quota"] == 2
    assert by_name["training.ads"]["spec"]["resources"]["memory"]["quota"] == -1


def test_names_are_predictable_and_names_kai_would_refuse_are_made_safe_without_colliding():
    assert queue_name("training", "research", "vision") == "training.research.vision"
    a, b = queue_name("shared_pool", "r&d"), queue_name("shared-pool", "r-d")
    assert a != b and all(part.replace("-", "").isalnum() for part in a.split("."))
    assert b == "shared-pool.r-d"


def test_topology_keys_become_one_topology_coarsest_first():
    keys = [{"key": "zone", "label": "topology.kubernetes.io/zone"}, {"key": "rack", "label": "example.com/rack"},
            {"key": "host", "label": "kubernetes.io/hostname"}]
    made = topology("training", keys, prefix=PREFIX)
    assert made["apiVersion"] == "kai.scheduler/v1alpha1" and made["kind"] == "Topology"
    assert made["metadata"]["name"] == "training"
    assert made["spec"]["levels"] == [{"nodeLabel": "topology.kubernetes.io/zone"},
                                      {"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]
    assert topology("training", [], prefix=PREFIX) is None
