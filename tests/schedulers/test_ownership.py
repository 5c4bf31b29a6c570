"""The pure parts of issue 23's reconcile: a backend's name as the value of its ownership label, and which changes
the engines' CRDs declare immutable (pools/schedulers/ownership.py, immutable.py)."""

import re

import pytest

from pools.schedulers import immutable, ownership

LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


@pytest.mark.parametrize("name", ["default", "gpu-cluster.eu_1", "A" * 63])
def test_a_name_that_is_a_label_value_is_kept(name):
    assert ownership.label_value(name) == name


@pytest.mark.parametrize("name", ["x" * 128, "_private", "cluster-", "a" * 60 + "_-_" + "b" * 60, "--", "é"])
def test_any_other_name_becomes_a_valid_value_that_keeps_a_hash_of_the_whole(name):
    value = ownership.label_value(name)
    assert LABEL_VALUE.fullmatch(value) and value and len(value) <= 63
    assert ownership.label_value(name + "2") != value


def test_owned_objects_are_told_from_older_ones_and_from_somebody_elses():
    prefix = "runwhere.ai/"
    assert ownership.owned_by(prefix, "b" * 70).startswith("runwhere.ai/managed-by=osmo-pools,runwhere.ai/backend=")
    assert ownership.unowned(prefix) == "runwhere.ai/managed-by=osmo-pools,!runwhere.ai/backend"
    mine = {"metadata": {"labels": ownership.owner_labels(prefix, "east")}}
    older = {"metadata": {"labels": {"runwhere.ai/managed-by": "osmo-pools"}}}
    assert [ownership.owner_of(obj, prefix) for obj in (mine, older, {"metadata": {}})] == ["east", "", None]


def test_a_topology_is_re_created_when_its_node_labels_change_but_not_for_aliases():
    zone, rack = {"nodeLabel": "zone"}, {"nodeLabel": "rack"}
    assert immutable.changed("kai.scheduler", "Topology", {"levels": [zone, rack]}, {"levels": [zone]}) \
        == "spec.levels[*].nodeLabel"
    assert immutable.changed("kai.scheduler", "Topology", {"levels": [zone]},
                             {"levels": [{"nodeLabel": "zone", "alias": "z"}]}) is None
    assert immutable.changed("scheduling.run.ai", "Queue", {"parentQueue": "a"}, {"parentQueue": "b"}) is None


def test_kueue_fields_immutable_once_set():
    assert immutable.changed("kueue.x-k8s.io", "LocalQueue", {"clusterQueue": "a"}, {"clusterQueue": "b"}) \
        == "spec.clusterQueue"
    assert immutable.changed("kueue.x-k8s.io", "ResourceFlavor", {"topologyName": "t"}, {}) == "spec.topologyName"
    assert immutable.changed("kueue.x-k8s.io", "ResourceFlavor", {}, {"nodeLabels": {"a": "b"}}) is None
