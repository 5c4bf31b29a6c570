"""The engines' builders (pools/schedulers/kai.py and kueue.py) write nothing the engines' CRDs refuse: every object
they make for any configuration we accept is admitted by the published CRD's schema and CEL rules, as the stand-in
API server (tests/kube_rules.py) checks them. Issue 39: a Kueue backend with no pool wrote ClusterQueues with no
flavor, which a real server refused (`spec.resourceGroups[0].flavors ... should have at least 1 items`) on every
reconcile."""

from decimal import Decimal

from hypothesis import example, given, settings
from hypothesis import strategies as st

from pools.schedulers import kai, kueue
from tests.engine.test_kube_names import names
from tests.kube_rules import load_crds

PREFIX = "runwhere.ai/"
PLURALS = {"Queue": "queues", "Topology": "topologies", "ResourceFlavor": "resourceflavors", "Cohort": "cohorts",
           "ClusterQueue": "clusterqueues", "LocalQueue": "localqueues"}


def refusals(objects: list[dict]) -> list[str]:
    crds = load_crds()
    found = []
    for obj in objects:
        group, version = obj["apiVersion"].split("/")
        _, errors = crds[(group, PLURALS[obj["kind"]])].admit(version, obj)
        found += [f"{obj['kind']}/{obj['metadata']['name']}: {error}" for error in errors]
    return found


gpus = st.decimals(min_value=0, max_value=Decimal("9999999999.99"), places=2)
millicores = st.integers(min_value=0, max_value=2 ** 62)
weights = st.none() | st.integers(min_value=0, max_value=3)


@st.composite
def units(draw) -> kai.Unit:
    deserved = (draw(st.none() | gpus), draw(st.none() | millicores), draw(st.none() | millicores))
    limit = (draw(st.just(Decimal(-1)) | gpus), draw(st.just(-1) | millicores), draw(st.just(-1) | millicores))
    return kai.Unit(deserved=deserved, limit=limit, weight=(draw(weights), draw(weights), draw(weights)))


label_keys = st.sampled_from(["nvidia.com/gpu.product", "example.com/rack", "zone", "node-role.kubernetes.io/gpu",
                              "topology.kubernetes.io/zone"])
label_values = st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?)?", fullmatch=True)
tolerations = st.fixed_dictionaries({"key": label_keys, "operator": st.sampled_from(["Equal", "Exists"]),
                                     "value": label_values,
                                     "effect": st.sampled_from(["NoSchedule", "NoExecute", "PreferNoSchedule", ""])})
platforms = st.builds(kueue.Platform, pool=names, name=names,
                      node_selector=st.dictionaries(label_keys, label_values, max_size=8),
                      tolerations=st.lists(tolerations, max_size=8))
topology_keys = st.lists(st.fixed_dictionaries({"key": names, "label": label_keys}), max_size=5,
                         unique_by=lambda key: key["label"])


@settings(max_examples=60, deadline=None)
@given(pool=names, departments=st.dictionaries(names, st.tuples(st.none() | units(),
                                                                 st.dictionaries(names, units(), max_size=3)),
                                               max_size=3),
       keys=topology_keys)
def test_every_kai_queue_and_topology_is_admitted_by_kais_crds(pool, departments, keys):
    made = kai.queues(pool, [kai.Department(name, row, projects) for name, (row, projects) in departments.items()],
                      prefix=PREFIX)
    topology = kai.topology(pool, keys, prefix=PREFIX)
    assert refusals(made + ([topology] if topology else [])) == []


@st.composite
def kueue_worlds(draw):
    chosen = draw(st.lists(platforms, max_size=4, unique_by=lambda p: (p.pool, p.name)))
    pools = sorted({p.pool for p in chosen})
    rows = st.dictionaries(st.sampled_from(pools), units(), max_size=len(pools)) if pools else st.just({})
    departments = draw(st.lists(st.builds(kueue.Department, name=names, rows=rows), max_size=3,
                                unique_by=lambda d: d.name))
    projects = [kueue.Project(name, draw(st.sampled_from([d.name for d in departments])), f"proj-{index}",
                              draw(rows))
                for index, name in enumerate(draw(st.lists(names, max_size=4, unique=True)))] if departments else []
    return chosen, departments, projects


@settings(max_examples=60, deadline=None)
@given(kueue_worlds())
@example(([], [kueue.Department("research", {})], [kueue.Project("vision", "research", "proj-vision", {})]))
def test_every_kueue_object_is_admitted_by_kueues_crds_with_or_without_platforms(world):
    """No platform, no flavor: a ClusterQueue (or a Cohort's resource group) must list at least one, so none is
    written at all (the backend's page says why: test_engine_idle.py)."""
    flavors, cohorts, cluster_queues, local_queues = kueue.objects(*world, prefix=PREFIX)
    assert refusals(flavors + cohorts + cluster_queues + local_queues) == []
    if not world[0]:
        assert (flavors, cohorts, cluster_queues, local_queues) == ([], [], [], [])
