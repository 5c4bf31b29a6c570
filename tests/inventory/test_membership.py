import random

import pytest

from pools.inventory import (
    Membership,
    PlatformSelector,
    PoolSelector,
    compile_selectors,
    node_facts,
    node_membership,
    repelling_taints,
    tolerates,
)

from .builders import node, taint

POOL_KEY = "osmo.nvidia.com/pool"
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
L40S = {"nvidia.com/gpu.product": "NVIDIA-L40S"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def platform(pool, name, selector=None, tolerations=None):
    return PlatformSelector(pool, name, selector or {}, tolerations or [])


def pool(name, selector=None, *platforms):
    return PoolSelector(name, selector or {}, list(platforms))


def member(labels, pools, taints=(), **kwargs):
    return node_membership(labels, taints, pools, **kwargs)


# Tolerations


@pytest.mark.parametrize(
    ("toleration", "node_taint", "expected"),
    [
        ({"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}, taint("team", "a"), True),
        ({"key": "team", "operator": "Equal", "value": "b", "effect": "NoSchedule"}, taint("team", "a"), False),
        ({"key": "team", "value": "a", "effect": "NoSchedule"}, taint("team", "a"), True),
        ({"key": "team", "value": "b"}, taint("team", "a"), False),
        ({"key": "team", "operator": "Equal", "effect": "NoSchedule"}, taint("team"), True),
        ({"key": "team", "operator": "Equal", "value": "", "effect": "NoSchedule"}, taint("team", "a"), False),
        ({"key": "team", "operator": "Exists", "effect": "NoSchedule"}, taint("team", "anything"), True),
        ({"key": "team", "operator": "Exists"}, taint("team", "a", "NoExecute"), True),
        ({"key": "other", "operator": "Exists"}, taint("team", "a"), False),
        ({"operator": "Exists"}, taint("team", "a", "NoExecute"), True),
        ({"key": "", "operator": "Exists"}, taint("anything", None, "NoSchedule"), True),
        ({"operator": "Exists", "effect": "NoSchedule"}, taint("team", "a", "NoExecute"), False),
        ({"key": "team", "operator": "Equal", "value": "a"}, taint("team", "a", "NoExecute"), True),
        ({"key": "team", "value": "a", "effect": ""}, taint("team", "a", "PreferNoSchedule"), True),
        ({"key": "team", "operator": "Equal", "value": "a", "effect": "NoExecute"}, taint("team", "a"), False),
        (
            {"key": "team", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            taint("team", None, "NoExecute"),
            True,
        ),
        ({"key": "team", "operator": "Gt", "value": "1"}, taint("team", "2"), False),
    ],
)
def test_it_tolerates_taints_with_kubernetes_semantics(toleration, node_taint, expected):
    assert tolerates([toleration], node_taint) is expected


def test_it_tolerates_when_any_toleration_does():
    tolerations = [{"key": "a", "operator": "Exists"}, {"key": "team", "value": "x"}]
    assert tolerates(tolerations, taint("team", "x"))
    assert not tolerates(tolerations, taint("team", "y"))


def test_it_tolerates_nothing_without_tolerations():
    assert not tolerates([], taint("team", "a"))


def test_it_keeps_only_the_taints_a_platform_must_tolerate():
    taints = [
        taint("nvidia.com/gpu", "present", "NoSchedule"),
        taint("team", "a", "NoExecute", time_added="2025-06-10T14:03:12Z"),
        taint("spot", "true", "PreferNoSchedule"),
        taint("node.kubernetes.io/unschedulable", None, "NoSchedule"),
        taint("node.kubernetes.io/not-ready", None, "NoExecute"),
    ]
    assert repelling_taints(taints) == (("nvidia.com/gpu", "present", "NoSchedule"), ("team", "a", "NoExecute"))


# Platforms and pools


def test_it_puts_a_node_in_a_platform_whose_selector_is_a_subset_of_its_labels():
    pools = [pool("training", None, platform("training", "h100", H100))]
    labels = {**H100, "kubernetes.io/hostname": "gpu-1", "topology.kubernetes.io/zone": "us-east-1a"}
    assert member(labels, pools) == Membership(("training",), ("training/h100",), "RESERVED")


def test_it_needs_every_selector_label_with_the_same_value():
    selector = {**H100, "topology.kubernetes.io/zone": "us-east-1a"}
    pools = [pool("training", None, platform("training", "h100-a", selector))]
    assert member({**H100, "topology.kubernetes.io/zone": "us-east-1a"}, pools).pools == ("training",)
    assert member({**H100, "topology.kubernetes.io/zone": "us-east-1b"}, pools).pools == ("default",)
    assert member(H100, pools).pools == ("default",)
    assert member({"topology.kubernetes.io/zone": "us-east-1a"}, pools).pools == ("default",)


def test_it_does_not_match_a_label_value_by_prefix_or_case():
    pools = [pool("training", None, platform("training", "h100", H100))]
    assert member({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG"}, pools).pools == ("default",)
    assert member({"nvidia.com/gpu.product": "nvidia-h100-80gb-hbm3"}, pools).pools == ("default",)


def test_it_matches_every_node_with_an_empty_platform_selector():
    pools = [pool("dev", None, platform("dev", "any"))]
    assert member({}, pools) == Membership(("dev",), ("dev/any",), "RESERVED")


def test_it_keeps_a_platform_out_when_a_taint_is_not_tolerated():
    pools = [pool("training", None, platform("training", "h100", H100))]
    assert member(H100, pools, [taint("nvidia.com/gpu", "present")]).pools == ("default",)


def test_it_lets_a_platform_in_when_it_tolerates_the_taint():
    pools = [pool("training", None, platform("training", "h100", H100, [GPU_TOLERATION]))]
    assert member(H100, pools, [taint("nvidia.com/gpu", "present")]).platforms == ("training/h100",)


def test_it_needs_every_repelling_taint_tolerated():
    pools = [pool("training", None, platform("training", "h100", H100, [GPU_TOLERATION]))]
    taints = [taint("nvidia.com/gpu", "present"), taint("team", "vision", "NoExecute")]
    assert member(H100, pools, taints).pools == ("default",)
    tolerations = [GPU_TOLERATION, {"key": "team", "operator": "Equal", "value": "vision", "effect": "NoExecute"}]
    pools = [pool("training", None, platform("training", "h100", H100, tolerations))]
    assert member(H100, pools, taints).pools == ("training",)


def test_it_ignores_prefer_no_schedule_taints():
    pools = [pool("training", None, platform("training", "h100", H100))]
    assert member(H100, pools, [taint("spot", "true", "PreferNoSchedule")]).pools == ("training",)


@pytest.mark.parametrize(
    "condition_taint",
    [
        taint("node.kubernetes.io/unschedulable", None, "NoSchedule"),
        taint("node.kubernetes.io/not-ready", None, "NoExecute", time_added="2025-06-10T14:03:12Z"),
        taint("node.kubernetes.io/unreachable", None, "NoExecute"),
        taint("node.kubernetes.io/disk-pressure", None, "NoSchedule"),
        taint("node.kubernetes.io/memory-pressure", None, "NoSchedule"),
        taint("node.kubernetes.io/network-unavailable", None, "NoSchedule"),
    ],
)
def test_it_keeps_a_cordoned_or_pressured_node_in_its_pool(condition_taint):
    pools = [pool("training", None, platform("training", "h100", H100))]
    assert member(H100, pools, [condition_taint]) == Membership(("training",), ("training/h100",), "RESERVED")


def test_it_requires_a_pool_selector_to_match():
    pools = [pool("training", {POOL_KEY: "training"}, platform("training", "h100", H100))]
    assert member(H100, pools).pools == ("default",)
    assert member({**H100, POOL_KEY: "inference"}, pools).pools == ("default",)
    assert member({**H100, POOL_KEY: "training"}, pools) == Membership(("training",), ("training/h100",), "RESERVED")


def test_it_keeps_a_node_in_a_selected_pool_even_when_no_platform_matches():
    pools = [pool("training", {POOL_KEY: "training"}, platform("training", "h100", H100))]
    assert member({**L40S, POOL_KEY: "training"}, pools) == Membership(("training",), (), "RESERVED")


def test_it_keeps_a_node_in_a_selected_pool_whose_platforms_do_not_tolerate_its_taints():
    pools = [pool("training", {POOL_KEY: "training"}, platform("training", "h100", H100))]
    labels = {**H100, POOL_KEY: "training"}
    assert member(labels, pools, [taint("nvidia.com/gpu", "present")]) == Membership(("training",), (), "RESERVED")


def test_it_keeps_a_selected_pool_with_no_platforms():
    pools = [pool("training", {POOL_KEY: "training"})]
    assert member({POOL_KEY: "training"}, pools) == Membership(("training",), (), "RESERVED")


def test_it_leaves_a_pool_without_selector_or_platforms_empty():
    assert member(H100, [pool("empty")]) == Membership(("default",), (), "UNUSED")


def test_it_puts_a_node_in_no_other_pool_into_default_as_unused():
    pools = [pool("training", None, platform("training", "h100", H100))]
    assert member(L40S, pools) == Membership(("default",), (), "UNUSED")
    assert member({}, []) == Membership(("default",), (), "UNUSED")


def test_it_calls_a_node_in_several_pools_shared():
    pools = [
        pool("training", None, platform("training", "h100", H100)),
        pool("inference", None, platform("inference", "l40s", L40S)),
        pool("sim", None, platform("sim", "any")),
    ]
    assert member(H100, pools) == Membership(("training", "sim"), ("training/h100", "sim/any"), "SHARED")


def test_it_mixes_selected_pools_and_platform_pools():
    pools = [
        pool("training", {POOL_KEY: "training"}, platform("training", "l40s", L40S)),
        pool("burst", None, platform("burst", "h100", H100)),
    ]
    found = member({**H100, POOL_KEY: "training"}, pools)
    assert found == Membership(("training", "burst"), ("burst/h100",), "SHARED")


def test_it_keeps_the_order_pools_and_platforms_were_given_in():
    pools = [
        pool("zeta", None, platform("zeta", "b", H100), platform("zeta", "a")),
        pool("alpha", None, platform("alpha", "z"), platform("alpha", "y", H100)),
    ]
    assert member(H100, pools) == Membership(("zeta", "alpha"), ("zeta/b", "zeta/a", "alpha/z", "alpha/y"), "SHARED")


def test_it_never_matches_the_default_pool_by_its_selectors():
    pools = [
        pool("default", {POOL_KEY: "default"}, platform("default", "any")),
        pool("training", None, platform("training", "h100", H100)),
    ]
    assert member({**H100, POOL_KEY: "default"}, pools) == Membership(("training",), ("training/h100",), "RESERVED")


def test_it_lists_the_default_pools_platforms_for_nodes_that_fall_into_it():
    pools = [
        pool("default", None, platform("default", "l40s", L40S), platform("default", "any")),
        pool("training", None, platform("training", "h100", H100)),
    ]
    assert member(L40S, pools) == Membership(("default",), ("default/l40s", "default/any"), "UNUSED")
    untolerated = [taint("nvidia.com/gpu", "present")]
    assert member(L40S, pools, untolerated) == Membership(("default",), (), "UNUSED")


def test_it_names_the_default_pool_as_told():
    pools = [pool("training", None, platform("training", "h100", H100))]
    assert member(L40S, pools, default_pool="unassigned") == Membership(("unassigned",), (), "UNUSED")


def test_it_refuses_compiled_selectors_made_for_another_default_pool():
    with pytest.raises(ValueError, match="default pool"):
        member(H100, compile_selectors([]), default_pool="unassigned")


def test_it_accepts_missing_labels_and_taints():
    pools = [pool("dev", None, platform("dev", "any"))]
    assert node_membership(None, None, pools).pools == ("dev",)


def test_it_ignores_a_repeated_pool_name():
    pools = [pool("training", None, platform("training", "h100", H100)), pool("training", None, platform("x", "y"))]
    assert member(L40S, pools).pools == ("default",)


def test_it_works_from_a_real_node():
    facts = node_facts(node("gpu-1", labels={POOL_KEY: "training"}, taints=[taint("nvidia.com/gpu", "present")]))
    pools = [
        pool("training", {POOL_KEY: "training"}, platform("training", "h100", H100, [GPU_TOLERATION])),
        pool("inference", None, platform("inference", "h100", H100)),
    ]
    assert node_membership(facts.labels, facts.taints, pools) == Membership(
        ("training",), ("training/h100",), "RESERVED"
    )


# Compiled selectors


def test_it_gives_the_same_answer_twice_from_compiled_selectors():
    compiled = compile_selectors([pool("training", None, platform("training", "h100", H100))])
    labels = {**H100, "kubernetes.io/hostname": "gpu-1"}
    first = compiled.membership(labels, [])
    assert compiled.membership({**labels, "kubernetes.io/hostname": "gpu-2"}, []) is first


def test_it_does_not_share_an_answer_between_nodes_with_different_taints():
    compiled = compile_selectors([pool("training", None, platform("training", "h100", H100))])
    assert compiled.membership(H100, []).pools == ("training",)
    assert compiled.membership(H100, [taint("team", "a")]).pools == ("default",)
    assert compiled.membership(H100, [taint("team", "a", "PreferNoSchedule")]).pools == ("training",)


def reference_membership(labels, taints, pools, default_pool="default"):
    """The rule of docs/concepts.md written as plainly as possible, to check the indexed version against."""
    repelling = [
        t
        for t in taints
        if t["effect"] in ("NoSchedule", "NoExecute") and not t["key"].startswith("node.kubernetes.io/")
    ]

    def fits(p):
        return all(labels.get(k) == v for k, v in p.node_selector.items()) and all(
            tolerates(p.tolerations, t) for t in repelling
        )

    names, platforms = [], []
    for p in pools:
        if p.name == default_pool:
            continue
        if p.node_selector and not all(labels.get(k) == v for k, v in p.node_selector.items()):
            continue
        matched = [f"{p.name}/{x.platform}" for x in p.platforms if fits(x)]
        if p.node_selector or matched:
            names.append(p.name)
            platforms.extend(matched)
    if not names:
        default = [p for p in pools if p.name == default_pool]
        matched = [f"{p.name}/{x.platform}" for p in default for x in p.platforms if fits(x)]
        return Membership((default_pool,), tuple(matched), "UNUSED")
    return Membership(tuple(names), tuple(platforms), "RESERVED" if len(names) == 1 else "SHARED")


def test_it_agrees_with_a_plain_reading_of_the_rules_on_random_clusters():
    rng = random.Random(20250610)
    keys = {"gpu": ["h100", "a100", "l40s"], "zone": ["a", "b", "c"], POOL_KEY: ["p0", "p1", "p2", "p3"], "rack": ["1"]}
    taint_choices = [
        taint("nvidia.com/gpu", "present"),
        taint("team", "a", "NoExecute"),
        taint("team", "b"),
        taint("spot", "true", "PreferNoSchedule"),
        taint("node.kubernetes.io/unschedulable"),
    ]
    toleration_choices = [
        GPU_TOLERATION,
        {"key": "team", "operator": "Equal", "value": "a"},
        {"key": "team", "operator": "Exists", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ]

    def selector(size):
        chosen = rng.sample(sorted(keys), size)
        return {key: rng.choice(keys[key]) for key in chosen}

    for _cluster in range(30):
        pools = []
        for index in range(rng.randint(0, 8)):
            name = "default" if index == 0 and rng.random() < 0.3 else f"pool{index}"
            pool_selector = {POOL_KEY: f"p{index % 4}"} if rng.random() < 0.4 else {}
            platforms = [
                platform(name, f"p{j}", selector(rng.randint(0, 2)), rng.sample(toleration_choices, rng.randint(0, 2)))
                for j in range(rng.randint(0, 4))
            ]
            pools.append(pool(name, pool_selector, *platforms))
        compiled = compile_selectors(pools)
        for node_index in range(40):
            labels = {key: rng.choice(values) for key, values in keys.items() if rng.random() < 0.8}
            labels["kubernetes.io/hostname"] = f"n{node_index}"
            taints = rng.sample(taint_choices, rng.randint(0, 3))
            expected = reference_membership(labels, taints, pools)
            assert compiled.membership(labels, taints) == expected, (labels, taints, pools)
            assert node_membership(labels, taints, pools) == expected
