"""Fair share (docs/concepts.md, "Departments, projects and quotas"): pure, no database.

GPU amounts are hundredths of a GPU (G = one GPU), CPU millicores, memory bytes.
"""

import random
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pools.quotas.fairshare import (
    GPU_WHOLE_UNIT,
    UNLIMITED,
    Department,
    DepartmentShare,
    PoolQuotas,
    Project,
    Resource,
    ResourceShares,
    UseSplit,
    Weight,
    fair_shares,
    fair_shares_by_pool,
    gpu_hundredths,
    gpus,
    over_subscribed_by,
    pool_fair_shares,
    project_shares,
    split_use,
)

G = GPU_WHOLE_UNIT
PLENTY = 1000 * G


def gpu_shares(capacity_gpus, *projects, **department):
    """Fair shares in GPUs of projects in one department (no quota row unless given) dividing a pool."""
    result = fair_shares(capacity_gpus * G, [Department("d", list(projects), **department)], G)
    return {name: share.fair_share / G for name, share in result["d"].projects.items()}


def wanting(name, deserved_gpus=0, weight=Weight.MEDIUM, created_order=0, **fields):
    """A project in GPUs that wants plenty more than it deserves."""
    return Project(name, int(deserved_gpus * G), weight=weight, pending=PLENTY, created_order=created_order, **fields)


# ---- Run:ai's example ---------------------------------------------------------------------------------


def test_it_gives_the_weight_3_project_of_runais_example_6_deserved_plus_10_of_20_idle_gpus():
    # Weights 2:3:1 (Medium, High, Low); 12 GPUs deserved in all, 20 idle: offers 6.67, 10, 3.33 -> 6, 10, 3;
    # the 20th GPU is worth 0.33, 0.5, 0.17 in the next round (nothing whole), so it goes to the largest sum
    # of dropped fractions: a (0.67 + 0.33) before b (0 + 0.5) and c (0.33 + 0.17).
    shares = gpu_shares(
        32,
        wanting("a", 4, Weight.MEDIUM, created_order=1),
        wanting("b", 6, Weight.HIGH, created_order=2),
        wanting("c", 2, Weight.LOW, created_order=3),
    )
    assert shares == {"a": 11, "b": 16, "c": 5}


def test_it_gives_16_to_the_weight_3_unit_of_runais_example_when_the_three_are_departments():
    departments = [
        Department("a", [wanting("pa")], deserved=4 * G, weight=Weight.MEDIUM, created_order=1),
        Department("b", [wanting("pb")], deserved=6 * G, weight=Weight.HIGH, created_order=2),
        Department("c", [wanting("pc")], deserved=2 * G, weight=Weight.LOW, created_order=3),
    ]
    result = fair_shares(32 * G, departments, G)
    assert {name: share.fair_share for name, share in result.items()} == {"a": 11 * G, "b": 16 * G, "c": 5 * G}
    assert result["b"].projects["pb"].fair_share == 16 * G


def test_it_divides_idle_gpus_by_over_quota_weight_not_by_deserved():
    # Run:ai's scheduler page: a deserves 3 with weight Low, b deserves 1 with weight High; the 8 idle GPUs
    # go 1:3.
    shares = gpu_shares(12, wanting("a", 3, Weight.LOW), wanting("b", 1, Weight.HIGH))
    assert shares == {"a": 5, "b": 7}


# ---- deserved, demand, limit --------------------------------------------------------------------------


def test_it_gives_each_project_what_it_deserves_when_it_wants_it():
    shares = gpu_shares(10, Project("a", 4 * G, pending=4 * G), Project("b", 6 * G, allocated=6 * G))
    assert shares == {"a": 4, "b": 6}


def test_it_gives_no_more_than_the_demand_even_to_a_project_that_deserves_more():
    shares = gpu_shares(10, Project("idle", 8 * G), Project("busy", 2 * G, pending=10 * G))
    assert shares == {"idle": 0, "busy": 10}


def test_it_counts_allocated_and_pending_as_demand():
    share = fair_shares(10 * G, [Department("d", [Project("p", allocated=2 * G, pending=3 * G)])], G)["d"]
    assert (share.projects["p"].demand, share.projects["p"].want, share.projects["p"].fair_share) == (
        5 * G,
        5 * G,
        5 * G,
    )


def test_it_reports_allocated_above_deserved_as_over_quota():
    department = Department("d", [Project("over", 3 * G, allocated=5 * G), Project("under", 3 * G, allocated=2 * G)])
    share = fair_shares(20 * G, [department], G)["d"]
    assert share.projects["over"].over_quota == 2 * G
    assert share.projects["under"].over_quota == 0
    assert (share.allocated, share.deserved, share.over_quota) == (7 * G, 6 * G, 1 * G)


def test_it_stops_a_project_at_its_limit_and_gives_the_rest_to_its_siblings():
    shares = gpu_shares(20, wanting("capped", 2, limit=5 * G), wanting("free", 2))
    assert shares == {"capped": 5, "free": 15}


def test_it_stops_a_project_at_a_limit_below_what_it_deserves():
    department = Department("d", [Project("p", 6 * G, limit=4 * G, pending=10 * G)])
    share = fair_shares(10 * G, [department], G)["d"].projects["p"]
    assert (share.want, share.fair_share) == (4 * G, 4 * G)


def test_it_treats_a_limit_of_minus_one_as_no_limit():
    shares = gpu_shares(50, Project("p", 1 * G, limit=UNLIMITED, pending=40 * G))
    assert shares == {"p": 40}


def test_it_stops_a_department_at_its_limit():
    departments = [Department("capped", [wanting("p")], limit=3 * G), Department("free", [wanting("q")])]
    result = fair_shares(10 * G, departments, G)
    assert (result["capped"].fair_share, result["free"].fair_share) == (3 * G, 7 * G)


def test_it_offers_what_a_satisfied_sibling_leaves_to_the_others_in_the_next_round():
    # Round 1 offers 4 each of 12; small takes 1, the others 4; round 2 offers the 3 left: 1.5 each -> 1 each;
    # the last GPU goes by dropped fractions (0.5 each), then to the older.
    shares = gpu_shares(
        12,
        Project("small", pending=1 * G, created_order=0),
        wanting("x", created_order=1),
        wanting("y", created_order=2),
    )
    assert shares == {"small": 1, "x": 6, "y": 5}


# ---- weights ------------------------------------------------------------------------------------------


def test_it_never_gives_weight_none_more_than_it_deserves_even_with_idle_capacity():
    shares = gpu_shares(100, wanting("none", 2, weight=None), wanting("other", 1, limit=3 * G))
    assert shares == {"none": 2, "other": 3}


def test_it_blocks_the_pool_for_a_project_with_quota_0_and_weight_none():
    assert gpu_shares(8, wanting("blocked", 0, weight=None)) == {"blocked": 0}


def test_it_gives_weight_lowest_no_over_quota_share():
    shares = gpu_shares(20, wanting("lowest", 2, weight=Weight.LOWEST), wanting("low", 2, weight=Weight.LOW))
    assert shares == {"lowest": 2, "low": 18}


def test_it_leaves_capacity_unassigned_when_no_sibling_has_an_over_quota_weight():
    shares = gpu_shares(20, wanting("lowest", 2, weight=Weight.LOWEST), wanting("none", 3, weight=None))
    assert shares == {"lowest": 2, "none": 3}


def test_it_uses_department_weights_between_departments():
    departments = [
        Department("low", [wanting("p")], deserved=0, weight=Weight.LOW),
        Department("high", [wanting("q")], deserved=0, weight=Weight.HIGH),
    ]
    result = fair_shares(8 * G, departments, G)
    assert (result["low"].fair_share, result["high"].fair_share) == (2 * G, 6 * G)


def test_it_never_gives_a_department_with_weight_none_more_than_it_deserves():
    departments = [Department("none", [wanting("p", 1)], deserved=2 * G, weight=None)]
    share = fair_shares(30 * G, departments, G)["none"]
    assert share.fair_share == 2 * G
    assert share.projects["p"].fair_share == 2 * G


# ---- departments --------------------------------------------------------------------------------------


def test_it_divides_a_departments_fair_share_among_its_projects():
    department = Department("d", [wanting("a", 1), wanting("b", 1, weight=Weight.HIGH)], deserved=8 * G)
    share = fair_shares(10 * G, [department, Department("e", [Project("c", 2 * G, pending=2 * G)])], G)["d"]
    assert share.fair_share == 8 * G
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 3 * G, "b": 5 * G}


def test_it_counts_a_department_without_a_row_as_deserving_the_sum_of_its_projects():
    departments = [
        Department("no-row", [wanting("a", 2), wanting("b", 3)]),
        Department("row", [wanting("c")], deserved=1 * G),
    ]
    result = fair_shares(8 * G, departments, G)
    assert result["no-row"].deserved == 5 * G
    # 5 + 1 deserved, the 2 idle GPUs split evenly.
    assert (result["no-row"].fair_share, result["row"].fair_share) == (6 * G, 2 * G)


def test_it_uses_the_departments_row_when_there_is_one():
    department = Department("d", [wanting("a", 1), wanting("b", 1)], deserved=8 * G)
    share = fair_shares(10 * G, [department, Department("e", [wanting("c")], deserved=2 * G)], G)["d"]
    assert (share.deserved, share.fair_share, share.over_subscribed_by) == (8 * G, 8 * G, 0)
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 4 * G, "b": 4 * G}


def test_it_gives_projects_their_deserved_even_when_they_over_subscribe_their_department():
    department = Department("d", [Project("a", 3 * G, pending=3 * G), wanting("b", 3)], deserved=4 * G)
    share = fair_shares(4 * G, [department], G)["d"]
    assert share.fair_share == 4 * G
    # Remaining for the projects is 4 - 6 < 0: each keeps its deserved part, nothing over quota.
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 3 * G, "b": 3 * G}
    assert share.over_subscribed_by == 2 * G


def test_it_sums_a_departments_demand_over_its_projects_not_capped_by_their_limits():
    # KAI's arithmetic: the parent queue requests what its children request.
    department = Department("d", [Project("p", limit=1 * G, pending=5 * G)])
    share = fair_shares(10 * G, [department], G)["d"]
    assert (share.demand, share.want, share.fair_share) == (5 * G, 5 * G, 5 * G)
    assert share.projects["p"].fair_share == 1 * G


def test_it_gives_a_department_without_projects_nothing():
    share = fair_shares(10 * G, [Department("empty", [], deserved=5 * G)], G)["empty"]
    assert (share.deserved, share.want, share.fair_share, share.projects) == (5 * G, 0, 0, {})


def test_it_lists_every_project_across_departments():
    departments = [Department("d", [wanting("a")]), Department("e", [wanting("b"), wanting("c")])]
    shares = project_shares(fair_shares(9 * G, departments, G))
    assert sorted(shares) == ["a", "b", "c"]
    assert sum(share.fair_share for share in shares.values()) == 9 * G


# ---- over-subscription --------------------------------------------------------------------------------


def test_it_gives_everyone_its_deserved_part_in_an_empty_pool():
    departments = [Department("d", [wanting("a", 2)], deserved=2 * G), Department("e", [wanting("b", 1)])]
    result = fair_shares(0, departments, G)
    assert (result["d"].fair_share, result["e"].fair_share) == (2 * G, 1 * G)
    assert over_subscribed_by(0, departments) == 3 * G


def test_it_gives_no_over_quota_share_when_the_pool_is_over_subscribed():
    shares = gpu_shares(5, wanting("a", 4), wanting("b", 3, weight=Weight.HIGH))
    assert shares == {"a": 4, "b": 3}


def test_it_gives_over_quota_only_out_of_what_deserved_parts_leave():
    # 4 + 3 deserved of 9, but a wants only 1: 9 - (1 + 3) = 5 idle for b.
    shares = gpu_shares(9, Project("a", 4 * G, pending=1 * G), wanting("b", 3))
    assert shares == {"a": 1, "b": 8}


def test_it_reports_a_pool_over_subscribed_by_the_deserved_above_its_capacity():
    departments = [Department("d", [], deserved=6 * G), Department("no-row", [wanting("a", 4), wanting("b", 2)])]
    assert over_subscribed_by(10 * G, departments) == 2 * G
    assert over_subscribed_by(12 * G, departments) == 0
    assert over_subscribed_by(20 * G, departments) == 0


# ---- units --------------------------------------------------------------------------------------------


def test_it_converts_gpus_to_hundredths_and_back():
    assert gpu_hundredths(Decimal("1.25")) == 125
    assert gpu_hundredths("0.5") == 50
    assert gpu_hundredths(3) == 300
    assert gpus(125) == Decimal("1.25")
    assert gpus(1600) == 16


@pytest.mark.parametrize("amount", ["0.125", "1e-3", "NaN", "Infinity", "two"])
def test_it_refuses_gpu_amounts_that_are_not_hundredths(amount):
    with pytest.raises(ValueError, match="GPU"):
        gpu_hundredths(amount)


def test_it_divides_fractional_gpu_quotas_exactly():
    department = Department("d", [Project("a", 150, pending=225), Project("b", 75, pending=50)])
    share = fair_shares(400, [department], G)["d"]
    # 1.5 + 0.5 first; a's missing 0.75 fits in the 2 GPUs offered.
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 225, "b": 50}


def test_it_rounds_gpu_offers_down_to_whole_gpus():
    # 0.5 + 0.25 deserved, 3 idle: offers 1.5 -> 1 each, then the last GPU to the older of an even tie.
    department = Department(
        "d", [Project("a", 50, pending=PLENTY, created_order=0), Project("b", 25, pending=PLENTY, created_order=1)]
    )
    share = fair_shares(375, [department], G)["d"]
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 250, "b": 125}


def test_it_gives_a_fractional_unmet_want_that_fits_in_the_offer():
    department = Department("d", [Project("a", pending=30), Project("b", pending=PLENTY)])
    share = fair_shares(200, [department], G)["d"]
    # Offers of 1 GPU each: a takes its 0.3, b its whole GPU; b is offered 0.7 next, no whole GPU, and
    # keeps wanting it.
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 30, "b": 100}


def test_it_leaves_less_than_a_whole_gpu_unassigned():
    department = Department("d", [wanting("a", created_order=0), wanting("b", created_order=1)])
    pool = PoolQuotas("p", {Resource.GPU: 350}, {Resource.GPU: [department]})
    gpu = pool_fair_shares(pool)[Resource.GPU]
    # The department is offered 3.5 GPUs and takes 3; its projects get 1.5 each -> 1, then the last to a.
    assert gpu.departments["d"].fair_share == 300
    assert gpu.unassigned == 50
    assert {name: project.fair_share for name, project in gpu.departments["d"].projects.items()} == {
        "a": 200,
        "b": 100,
    }


def test_it_rounds_cpu_offers_to_whole_millicores_and_gives_the_last_to_the_oldest():
    projects = [Project(name, pending=10_000, created_order=age) for name, age in (("a", 2), ("b", 0), ("c", 1))]
    share = fair_shares(1000, [Department("d", projects)], Resource.CPU.whole_unit)["d"]
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 333, "b": 334, "c": 333}


def test_it_divides_memory_in_bytes():
    gib = 2**30
    projects = [Project("a", pending=100 * gib, weight=Weight.LOW), Project("b", pending=100 * gib, weight=2)]
    share = fair_shares(10 * gib, [Department("d", projects)], Resource.MEMORY.whole_unit)["d"]
    # 10 GiB / 3 = 3579139413.33 and 7158278826.67: b's dropped fractions (0.67 + 0.67) win the last byte.
    assert {name: project.fair_share for name, project in share.projects.items()} == {
        "a": 3_579_139_413,
        "b": 7_158_278_827,
    }


# ---- the last whole units -----------------------------------------------------------------------------


def test_it_gives_the_last_units_to_the_oldest_when_dropped_fractions_tie():
    shares = gpu_shares(4, wanting("a", created_order=1), wanting("b", created_order=2), wanting("c", created_order=0))
    assert shares == {"a": 1, "b": 1, "c": 2}


def test_it_gives_the_last_units_by_name_when_fractions_and_age_tie():
    assert gpu_shares(4, wanting("b"), wanting("c"), wanting("a")) == {"a": 2, "b": 1, "c": 1}


def test_it_sums_the_fractions_dropped_over_all_rounds():
    # 15 idle at weights 2:3:3: 3.75, 5.625, 5.625 -> 3, 5, 5 (a dropped most: 0.75); then 2 left: 0.5, 0.75,
    # 0.75 -> nothing. Over both rounds b and c dropped 1.375, a 1.25: the last 2 go to b and c although a
    # is older.
    shares = gpu_shares(
        15,
        wanting("a", weight=Weight.MEDIUM, created_order=0),
        wanting("b", weight=Weight.HIGH, created_order=1),
        wanting("c", weight=Weight.HIGH, created_order=2),
    )
    assert shares == {"a": 3, "b": 6, "c": 6}


def test_it_never_gives_a_last_unit_beyond_what_a_project_wants():
    # 5 GPUs at weights 1:3:3: offers 0.71, 2.14, 2.14 -> 0, 2, 2; then 0.14, 0.43, 0.43 -> nothing. a dropped
    # the most (0.86) and gets the last GPU, of which it wants only 0.9.
    department = Department(
        "d",
        [
            Project("a", pending=90, weight=Weight.LOW),
            Project("b", pending=PLENTY, weight=Weight.HIGH),
            Project("c", pending=PLENTY, weight=Weight.HIGH),
        ],
    )
    share = fair_shares(500, [department], G)["d"]
    assert {name: project.fair_share for name, project in share.projects.items()} == {"a": 90, "b": 200, "c": 200}


def test_it_may_give_a_project_one_gpu_less_when_the_pool_grows():
    # A consequence of the specified rule, kept visible: the last units follow the fractions dropped, which
    # move with T. With 26 GPUs (14 idle), a (weight 2) drops 0.5 + 0.25 against 0.625 for b and c and wins
    # the last GPU; with 27 (15 idle), b and c drop 1.375 over both rounds against a's 1.25 and take the
    # last two.
    def shares(capacity):
        return gpu_shares(
            capacity,
            wanting("a", 9, weight=Weight.MEDIUM, created_order=0),
            wanting("b", created_order=1, weight=Weight.HIGH),
            wanting("c", 3, created_order=2, weight=Weight.HIGH),
        )

    assert shares(26)["a"] == 13
    assert shares(27)["a"] == 12


# ---- pools --------------------------------------------------------------------------------------------


def three_equal(capacity_by_resource):
    return PoolQuotas(
        "pool",
        capacity_by_resource,
        {
            resource: [Department("d", [Project(name, pending=10**12) for name in "abc"])]
            for resource in capacity_by_resource
        },
    )


def test_it_computes_each_resource_of_a_pool_on_its_own_with_its_own_whole_unit():
    result = pool_fair_shares(three_equal({Resource.GPU: 400, Resource.CPU: 400, Resource.MEMORY: 400}))
    assert set(result) == {Resource.GPU, Resource.CPU, Resource.MEMORY}
    by_resource = {
        resource: {name: share.fair_share for name, share in shares.departments["d"].projects.items()}
        for resource, shares in result.items()
    }
    assert by_resource[Resource.GPU] == {"a": 200, "b": 100, "c": 100}  # whole GPUs
    assert by_resource[Resource.CPU] == {"a": 134, "b": 133, "c": 133}  # whole millicores
    assert by_resource[Resource.MEMORY] == {"a": 134, "b": 133, "c": 133}
    assert isinstance(result[Resource.GPU], ResourceShares)
    assert isinstance(result[Resource.GPU].departments["d"], DepartmentShare)


def test_it_treats_a_resource_missing_from_a_pool_as_no_capacity_and_no_departments():
    result = pool_fair_shares(PoolQuotas("pool", {Resource.GPU: 800}, {}))
    assert result[Resource.CPU] == ResourceShares(Resource.CPU, 0, 0, {})
    assert (result[Resource.GPU].capacity, result[Resource.GPU].unassigned) == (800, 800)


def test_it_reports_a_pools_over_subscription_per_resource():
    departments = {Resource.GPU: [Department("d", [wanting("a", 6)], deserved=10 * G)]}
    result = pool_fair_shares(PoolQuotas("pool", {Resource.GPU: 8 * G}, departments))
    assert result[Resource.GPU].over_subscribed_by == 2 * G
    assert result[Resource.GPU].unassigned == 0


def test_it_computes_many_pools_by_name():
    pools = [three_equal({Resource.GPU: 300}), PoolQuotas("other", {Resource.GPU: 100}, {})]
    pools[0] = PoolQuotas("first", pools[0].capacity, pools[0].departments)
    result = fair_shares_by_pool(pools)
    assert list(result) == ["first", "other"]
    assert result["first"][Resource.GPU].departments["d"].projects["a"].fair_share == 100
    assert result["other"][Resource.GPU].unassigned == 100


# ---- refused input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"deserved": -1}, "deserved"),
        ({"limit": -2}, "limit"),
        ({"weight": -1}, "weight"),
        ({"allocated": -1}, "allocated"),
        ({"pending": -1}, "pending"),
    ],
)
def test_it_refuses_a_project_with_negative_amounts(fields, message):
    with pytest.raises(ValueError, match=message):
        Project("p", **fields)


@pytest.mark.parametrize("fields", [{"deserved": -1}, {"limit": -5}, {"weight": -3}])
def test_it_refuses_a_department_with_negative_amounts(fields):
    with pytest.raises(ValueError, match="department 'd'"):
        Department("d", [], **fields)


def test_it_refuses_two_projects_of_the_same_name_in_a_department():
    with pytest.raises(ValueError, match="same name"):
        fair_shares(G, [Department("d", [Project("p"), Project("p")])], G)


def test_it_refuses_two_departments_of_the_same_name():
    with pytest.raises(ValueError, match="same name"):
        fair_shares(G, [Department("d"), Department("d")], G)


def test_it_refuses_a_whole_unit_below_one():
    with pytest.raises(ValueError, match="whole unit"):
        fair_shares(G, [], 0)


def test_it_refuses_the_same_pool_twice():
    with pytest.raises(ValueError, match="twice"):
        fair_shares_by_pool([PoolQuotas("p", {}, {}), PoolQuotas("p", {}, {})])


# ---- invariants (hypothesis) --------------------------------------------------------------------------

INVARIANTS = settings(max_examples=200, deadline=None, derandomize=True, database=None)
WEIGHTS = st.sampled_from([None, *Weight])


@st.composite
def pools(draw, fractional_gpus=True):
    """(capacity, departments, whole_unit) with small amounts, so that rounding and ties are frequent."""
    whole_unit = draw(st.sampled_from([1, G]))
    fractional = whole_unit > 1 and fractional_gpus and draw(st.booleans())

    def amount(max_units):
        if fractional:
            return st.integers(0, max_units * whole_unit)
        return st.integers(0, max_units).map(lambda units: units * whole_unit)

    limits = st.one_of(st.just(UNLIMITED), amount(40))
    departments = []
    for d in range(draw(st.integers(0, 4))):
        projects = [
            Project(
                f"p{d}.{j}",
                draw(amount(15)),
                draw(limits),
                draw(WEIGHTS),
                draw(amount(25)),
                draw(amount(25)),
                draw(st.integers(0, 3)),
            )
            for j in range(draw(st.integers(0, 5)))
        ]
        departments.append(
            Department(
                f"d{d}", projects, draw(st.none() | amount(40)), draw(limits), draw(WEIGHTS), draw(st.integers(0, 3))
            )
        )
    return draw(amount(150)), departments, whole_unit


def capped_by_limit(demand, limit):
    return demand if limit == UNLIMITED else min(demand, limit)


def sibling_groups(capacity, departments, result):
    """Each set of siblings with the capacity it divided: the departments, then each one's projects, as
    (capacity, [(deserved, want, over-quota weight, fair share)]), deserved and want worked out here from
    the input."""
    yield (
        capacity,
        [
            (
                sum(p.deserved for p in d.projects) if d.deserved is None else d.deserved,
                capped_by_limit(sum(p.allocated + p.pending for p in d.projects), d.limit),
                d.weight or 0,
                result[d.name].fair_share,
            )
            for d in departments
        ],
    )
    for d in departments:
        shares = result[d.name].projects
        yield (
            result[d.name].fair_share,
            [
                (
                    p.deserved,
                    capped_by_limit(p.allocated + p.pending, p.limit),
                    p.weight or 0,
                    shares[p.name].fair_share,
                )
                for p in d.projects
            ],
        )


def deserved_parts(siblings):
    return sum(min(deserved, want) for deserved, want, _, _ in siblings)


def reachable(siblings):
    """What the siblings can get at most: their wants, or their deserved parts for weights 0 and None."""
    return sum(want if weight else min(deserved, want) for deserved, want, weight, _ in siblings)


@INVARIANTS
@given(pools())
def test_it_never_gives_a_sibling_more_than_it_wants_nor_less_than_its_deserved_part(pool):
    capacity, departments, whole_unit = pool
    for _, siblings in sibling_groups(capacity, departments, fair_shares(capacity, departments, whole_unit)):
        for deserved, want, weight, fair_share in siblings:
            assert min(deserved, want) <= fair_share <= want
            if not weight:
                assert fair_share == min(deserved, want)


@INVARIANTS
@given(pools())
def test_it_hands_out_no_more_than_the_capacity_or_the_deserved_parts_if_they_exceed_it(pool):
    capacity, departments, whole_unit = pool
    for divided, siblings in sibling_groups(capacity, departments, fair_shares(capacity, departments, whole_unit)):
        handed_out = sum(fair_share for *_, fair_share in siblings)
        assert handed_out <= max(divided, deserved_parts(siblings))
        if divided <= deserved_parts(siblings):
            assert handed_out == deserved_parts(siblings)


@INVARIANTS
@given(pools())
def test_it_leaves_less_than_a_whole_unit_while_a_weighted_sibling_wants_more(pool):
    capacity, departments, whole_unit = pool
    for divided, siblings in sibling_groups(capacity, departments, fair_shares(capacity, departments, whole_unit)):
        handed_out = sum(fair_share for *_, fair_share in siblings)
        if any(weight and fair_share < want for _, want, weight, fair_share in siblings):
            assert divided - handed_out < whole_unit


@INVARIANTS
@given(pools(fractional_gpus=False))
def test_it_hands_out_exactly_the_capacity_or_what_siblings_can_take_in_whole_units(pool):
    capacity, departments, whole_unit = pool
    for divided, siblings in sibling_groups(capacity, departments, fair_shares(capacity, departments, whole_unit)):
        handed_out = sum(fair_share for *_, fair_share in siblings)
        assert handed_out == max(deserved_parts(siblings), min(divided, reachable(siblings)))


@INVARIANTS
@given(pools(fractional_gpus=False), st.integers(0, 30))
def test_it_never_hands_out_less_to_departments_when_the_pool_grows_in_whole_units(pool, more_units):
    capacity, departments, whole_unit = pool
    smaller = fair_shares(capacity, departments, whole_unit)
    larger = fair_shares(capacity + more_units * whole_unit, departments, whole_unit)
    assert sum(share.fair_share for share in larger.values()) >= sum(share.fair_share for share in smaller.values())


@INVARIANTS
@given(pools(), st.randoms(use_true_random=False))
def test_it_gives_the_same_shares_whatever_the_order_of_departments_and_projects(pool, shuffler: random.Random):
    capacity, departments, whole_unit = pool
    shuffled = []
    for department in departments:
        projects = list(department.projects)
        shuffler.shuffle(projects)
        shuffled.append(
            Department(
                department.name,
                projects,
                department.deserved,
                department.limit,
                department.weight,
                department.created_order,
            )
        )
    shuffler.shuffle(shuffled)
    expected = fair_shares(capacity, departments, whole_unit)
    assert fair_shares(capacity, departments, whole_unit) == expected
    assert fair_shares(capacity, shuffled, whole_unit) == expected


def test_use_splits_into_guaranteed_and_borrowed_low_priority_first():
    assert split_use(1600, 800, 800) == UseSplit(guaranteed=800, borrowed=800, reclaimable=800, non_preemptible=800)
    # Normal work above deserved (a pod we did not submit, a lowered quota) is borrowed too, but not reclaimable.
    assert split_use(1600, 400, 800) == UseSplit(800, 800, 400, 1200)
    # Low-priority work within deserved is guaranteed use, yet never counts against deserved at admission.
    assert split_use(800, 800, 800) == UseSplit(800, 0, 0, 0)
    assert split_use(500, 0, None) == UseSplit(0, 500, 0, 500)


def test_a_projects_share_carries_the_same_split():
    (department,) = fair_shares(2400, [Department("d", [Project("p", deserved=800, allocated=1600, preemptible=800),
                                                        Project("q", deserved=800)])], 100).values()
    share = department.projects["p"]
    assert (share.over_quota, share.allocated_non_preemptible, share.reclaimable) == (800, 800, 800)
    assert (department.over_quota, department.allocated_non_preemptible) == (0, 800)
