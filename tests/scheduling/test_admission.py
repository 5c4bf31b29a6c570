"""The pure admission cycle: order, quota and capacity checks, gangs, reclaim, reasons and positions."""

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.decisions.admission import (
    Code,
    Holder,
    Node,
    Pool,
    Quota,
    Snapshot,
    Workload,
    decide,
    never_fits,
)

GIB = 1024 ** 3


def node(name, gpus, cpu=64_000, memory=512 * GIB):
    return Node(f"b/{name}", name, (gpus * 100, cpu, memory))


def workload(wid, project="vision", gpus=1, replicas=1, low=False, rank=None, submitted=0.0, pools=("training",),
             department="research", cpu=1000, memory=GIB):
    return Workload(wid, project, department, (gpus * 100, cpu, memory), replicas, low,
                    rank if rank is not None else (0 if low else 1), submitted,
                    [(p, "h100") for p in pools])


def pool(name="training", nodes=None, projects=None, departments=None, status="ONLINE", spread=False):
    nodes = nodes if nodes is not None else [node("n1", 8), node("n2", 8)]
    return Pool(name, status, spread, {"h100": "H100"}, {"h100": nodes}, projects or {}, departments or {})


def quota(deserved=8, limit=-1, weight=2, used=0, guaranteed=None, fair=None):
    used_g = used if guaranteed is None else guaranteed
    return Quota((deserved * 100, None, None), (limit * 100 if limit >= 0 else -1, -1, -1), (weight, 2, 2),
                 (used * 100, 0, 0), (used_g * 100, 0, 0), None if fair is None else fair * 100)


def test_it_admits_what_fits_and_charges_the_snapshot_before_the_next():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=32)})})
    decision = decide(snapshot, [workload(f"w{i}", gpus=4, submitted=i) for i in range(5)])
    assert sorted(decision.admitted) == ["w0", "w1", "w2", "w3"]
    assert decision.reasons["w4"][0].code == Code.CAPACITY
    assert snapshot.pools["training"].projects["vision"].used[0] == 1600


def test_it_refuses_non_preemptible_work_above_deserved_with_the_numbers():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=8, used=8)},
                                          nodes=[node("n1", 8), node("n2", 8), node("n3", 8)])})
    decision = decide(snapshot, [workload("w", gpus=2)])
    reason = decision.reasons["w"][0]
    assert reason.code == Code.QUOTA
    assert reason.message == ("Project vision has 8 of 8 guaranteed H100 GPUs in use in pool training and asks for "
                              "2 more; low priority could borrow 24 idle GPUs.")


def test_the_idle_gpus_a_reason_offers_count_the_admissions_of_the_same_cycle_in_every_pool_of_their_nodes():
    shared = node("n3", 8)
    snapshot = Snapshot({
        "training": pool(projects={"vision": quota(deserved=16)}, nodes=[node("n1", 8), node("n2", 8), shared]),
        "other": pool("other", projects={"vision": quota(deserved=0)}, nodes=[shared])})
    decision = decide(snapshot, [workload("w0", gpus=8), workload("w1", gpus=8, submitted=1),
                                 workload("w2", gpus=4, submitted=2), workload("w3", gpus=4, submitted=3,
                                                                                pools=("other",))])
    used = {name for wid in ("w0", "w1") for name in decision.admitted[wid].placement}
    assert len(used) == 2
    assert "borrow 8 idle GPUs" in decision.reasons["w2"][0].message  # 24 - 8 (w0) - 8 (w1)
    assert f"borrow {0 if 'n3' in used else 8} idle GPUs" in decision.reasons["w3"][0].message


def test_it_lets_preemptible_work_borrow_up_to_the_limit():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=2, limit=6)})})
    decision = decide(snapshot, [workload("a", gpus=4, low=True), workload("b", gpus=4, low=True, submitted=1)])
    assert list(decision.admitted) == ["a"]
    assert decision.reasons["b"][0].code == Code.LIMIT
    assert "limit of 6" in decision.reasons["b"][0].message


def test_it_keeps_weight_none_within_deserved():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=2, weight=None)})})
    decision = decide(snapshot, [workload("a", gpus=4, low=True)])
    assert decision.reasons["a"][0].code == Code.NO_OVER_QUOTA


def test_it_checks_the_department_as_well_as_the_project():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=8)},
                                          departments={"research": quota(deserved=4, used=2)})})
    decision = decide(snapshot, [workload("a", gpus=4)])
    assert decision.reasons["a"][0].code == Code.QUOTA
    assert decision.reasons["a"][0].message.startswith("Department research has 2 of 4")


def test_a_gang_is_placed_whole_or_not_at_all():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=32)},
                                          nodes=[node("n1", 8), node("n2", 2)])})
    decision = decide(snapshot, [workload("g", gpus=4, replicas=3)])
    reason = decision.reasons["g"][0]
    assert reason.code == Code.GANG
    assert reason.message.startswith("Only 2 of 3 replicas fit")
    assert snapshot.pools["training"].platforms["h100"][0].free[0] == 800


def test_the_capacity_message_names_the_node_with_the_most_free():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=32)},
                                          nodes=[node("dgx-h100-001", 1), node("dgx-h100-007", 2)])})
    reason = decide(snapshot, [workload("w", gpus=4)]).reasons["w"][0]
    assert reason.message == ("No node of platform training/h100 has 4 free H100 GPUs and 1 CPU and 1Gi memory "
                              "(most free: 2 H100 GPUs on dgx-h100-007).")


def test_it_bin_packs_by_default_and_spreads_when_the_pool_says_so():
    for spread, expected in ((False, {"n2": 1}), (True, {"n1": 1})):
        snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=8)}, spread=spread,
                                              nodes=[node("n1", 8), node("n2", 2)])})
        assert decide(snapshot, [workload("w", gpus=1)]).admitted["w"].placement == expected


def test_it_tries_the_pools_in_order_and_records_one_reason_per_pool():
    snapshot = Snapshot({
        "training": pool("training", projects={"vision": quota(deserved=0)}),
        "dev": pool("dev", projects={"vision": quota(deserved=8)}, nodes=[node("d1", 2)]),
        "sim": pool("sim", status="MAINTENANCE"),
    })
    decision = decide(snapshot, [workload("w", gpus=4, pools=("sim", "training", "dev"))])
    assert [r.code for r in decision.reasons["w"]] == [Code.MAINTENANCE, Code.QUOTA, Code.CAPACITY]
    decision = decide(Snapshot({"training": pool("training", projects={"vision": quota(deserved=0)}),
                                "dev": pool("dev", projects={"vision": quota(deserved=8)})}),
                      [workload("w", gpus=4, pools=("training", "dev"))])
    assert decision.admitted["w"].pool == "dev"


def test_within_deserved_goes_before_borrowing_then_priority_then_age():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=4), "nlp": quota(deserved=0)},
                                          nodes=[node("n1", 4)])})
    borrowing = workload("borrow", project="nlp", gpus=4, low=True, submitted=0)
    old_normal = workload("normal", gpus=4, submitted=1)
    high = workload("high", gpus=4, rank=2, submitted=2)
    decision = decide(snapshot, [borrowing, old_normal, high])
    assert decision.order == ["high", "normal", "borrow"]
    assert list(decision.admitted) == ["high"]
    assert decision.positions["normal"] == {"training": 1}
    assert decision.positions["borrow"] == {"training": 2}


def test_reclaim_preempts_the_fewest_borrowers_of_the_most_over_project():
    nodes = [node("n1", 8)]
    holders = [Holder("b1", "nlp", "research", "training", (200, 0, 0), {"b/n1": 1}, True, 1.0),
               Holder("b2", "nlp", "research", "training", (400, 0, 0), {"b/n1": 1}, True, 2.0),
               Holder("c1", "speech", "research", "training", (200, 0, 0), {"b/n1": 1}, True, 3.0)]
    for n in nodes:
        n.free = (0, 64_000, 512 * GIB)
    snapshot = Snapshot({"training": pool(nodes=nodes, projects={
        "vision": quota(deserved=4), "nlp": quota(deserved=0, used=6, guaranteed=0, fair=1),
        "speech": quota(deserved=2, used=2, guaranteed=0, fair=2)})}, holders)
    decision = decide(snapshot, [workload("w", gpus=4)])
    assert "w" not in decision.admitted
    assert list(decision.preempt) == ["b2"]
    assert decision.reasons["w"][0].code == Code.RECLAIMING
    # The next cycle waits for b2 rather than preempting more.
    again = decide(snapshot, [workload("w", gpus=4)])
    assert again.preempt == {}
    assert again.reasons["w"][0].code == Code.RECLAIMING


def full_of_nlp(nlp: Quota) -> Snapshot:
    """One node of 4 GPUs, all held by one preemptible workload of nlp; vision deserves 4."""
    nodes = [node("n1", 4)]
    nodes[0].free = (0, 64_000, 512 * GIB)
    holders = [Holder("b1", "nlp", "research", "training", (400, 0, 0), {"b/n1": 1}, True, 1.0)]
    return Snapshot({"training": pool(nodes=nodes, projects={"vision": quota(deserved=4), "nlp": nlp})}, holders)


def test_reclaim_never_takes_from_a_project_at_or_below_its_deserved():
    snapshot = full_of_nlp(quota(deserved=4, used=4, guaranteed=0, fair=4))
    decision = decide(snapshot, [workload("w", gpus=4)])
    assert decision.preempt == {}
    assert decision.reasons["w"][0].code == Code.CAPACITY


def test_preemptible_work_never_reclaims():
    snapshot = full_of_nlp(quota(deserved=0, used=4, guaranteed=0, fair=0))
    assert decide(snapshot, [workload("w", gpus=4, low=True)]).preempt == {}


def test_never_fits_names_a_replica_larger_than_every_node_and_work_above_deserved():
    snapshot = Snapshot({"training": pool(projects={"vision": quota(deserved=4)})})
    big = workload("w", gpus=16)
    assert never_fits(snapshot, big, "training", "h100", [(800, 64_000, 512 * GIB)]).code == Code.CAPACITY
    above = workload("w", gpus=2, replicas=3)
    reason = never_fits(snapshot, above, "training", "h100", [(800, 64_000, 512 * GIB)])
    assert reason.code == Code.QUOTA and "priority: low" in reason.message
    assert never_fits(snapshot, workload("w", gpus=2, replicas=3, low=True), "training", "h100",
                      [(800, 64_000, 512 * GIB)]) is None


def test_offline_pools_admit_nothing():
    snapshot = Snapshot({"training": pool(status="OFFLINE", projects={"vision": quota(deserved=8)})})
    assert decide(snapshot, [workload("w")]).reasons["w"][0].code == Code.OFFLINE


def test_an_engine_pool_takes_every_workload_that_reaches_it_in_order_whatever_its_quota():
    engine = pool(status="ENGINE", projects={"vision": quota(deserved=0, limit=0)})
    engine.engine = "KAI Scheduler"
    full = pool(projects={"vision": quota(deserved=0, limit=0)})  # ours first: refused there by its limit
    snapshot = Snapshot({"ours": full, "kai": engine})
    many = [workload(f"w{i}", gpus=8) for i in range(5)]
    for w in many:
        w.candidates = [("ours", "h100"), ("kai", "h100")]
    decision = decide(snapshot, many)
    assert {w: (a.pool, a.engine, a.placement) for w, a in decision.admitted.items()} == {
        w.id: ("kai", "KAI Scheduler", {}) for w in many}
    assert engine.projects["vision"].used == (0, 0, 0)  # the engine keeps its own books


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(1, 8), st.integers(1, 3), st.booleans()),
                max_size=25),
       st.lists(st.integers(0, 8), min_size=1, max_size=4), st.integers(0, 12), st.integers(0, 20))
def test_a_cycle_never_admits_beyond_a_quota_a_limit_or_a_node(requests, node_gpus, deserved, limit):
    nodes = [node(f"n{i}", g) for i, g in enumerate(node_gpus)]
    projects = {name: quota(deserved=deserved, limit=limit) for name in "abc"}
    snapshot = Snapshot({"training": pool(nodes=nodes, projects=projects,
                                          departments={"research": quota(deserved=deserved * 2)})})
    queue = [workload(f"w{i}", project=p, gpus=g, replicas=r, low=low, submitted=i)
             for i, (p, g, r, low) in enumerate(requests)]
    decision = decide(snapshot, queue)
    by_id = {w.id: w for w in queue}
    used = dict.fromkeys(node_gpus and [n.key for n in nodes], 0)
    guaranteed, total = {}, {}
    for wid, admission in decision.admitted.items():
        w = by_id[wid]
        for name, n in admission.placement.items():
            used[f"b/{name}"] += w.per_replica[0] * n
        total[w.project] = total.get(w.project, 0) + w.total[0]
        if not w.preemptible:
            guaranteed[w.project] = guaranteed.get(w.project, 0) + w.total[0]
        assert sum(admission.placement.values()) == w.replicas
    for n, g in zip(nodes, node_gpus, strict=True):
        assert used[n.key] <= g * 100
    for project in "abc":
        assert guaranteed.get(project, 0) <= deserved * 100
        assert total.get(project, 0) <= limit * 100
    assert sum(guaranteed.values()) <= deserved * 2 * 100


# ---- a gang of several workloads (an OSMO group whose tasks differ: issue 41) -------------------------------------

def two_platforms(h100=None, a100=None, projects=None, name="training", status="ONLINE", engine=""):
    h100 = h100 if h100 is not None else [node("h1", 8), node("h2", 8)]
    a100 = a100 if a100 is not None else [node("a1", 8)]
    return Pool(name, status, False, {"h100": "H100", "a100": "A100"}, {"h100": h100, "a100": a100},
                projects or {}, {}, engine)


def member(wid, platform="h100", gpus=4, replicas=1, size=2, submitted=0.0, gang="wf/workers", pools=("training",),
           project="vision", low=False):
    return Workload(wid, project, "research", (gpus * 100, 1000, GIB), replicas, low, 0 if low else 1, submitted,
                    [(p, platform) for p in pools], gang=gang, gang_size=size)


def state(snapshot):
    """What admission may change in a snapshot: node free capacity and quota usage, by pool."""
    return {name: ({(platform, n.key): n.free for platform, nodes in p.platforms.items() for n in nodes},
                   {k: (q.used, q.used_guaranteed) for k, q in p.projects.items()},
                   {k: (q.used, q.used_guaranteed) for k, q in p.departments.items()})
            for name, p in snapshot.pools.items()}


def test_a_gang_s_members_on_different_platforms_are_admitted_together_each_with_its_own_placement():
    snapshot = Snapshot({"training": two_platforms(projects={"vision": quota(deserved=32)})})
    decision = decide(snapshot, [member("lead", "h100", gpus=4, replicas=3), member("work", "a100", gpus=8)])
    lead, work = decision.admitted["lead"], decision.admitted["work"]
    assert (lead.pool, lead.platform, sum(lead.placement.values())) == ("training", "h100", 3)
    assert set(lead.placement) <= {"h1", "h2"}
    assert (work.platform, work.placement) == ("a100", {"a1": 1})
    assert snapshot.pools["training"].projects["vision"].used[0] == 2000
    assert sum(n.free[0] for n in snapshot.pools["training"].platforms["h100"]) == 400
    assert decision.reasons == {}


def test_a_gang_whose_second_member_does_not_fit_beside_the_first_takes_nothing_and_leaves_the_snapshot_as_it_was():
    # Alone, each member fits on n1; together they do not.
    def fresh():
        return Snapshot({"training": two_platforms(h100=[node("n1", 8)], a100=[],
                                                   projects={"vision": quota(deserved=16),
                                                             "speech": quota(deserved=0)})})
    gang = [member("lead", gpus=6), member("work", gpus=4, submitted=1)]
    snapshot = fresh()
    before = state(snapshot)
    # Borrowing, so after the gang: its reason counts the idle GPUs as they are once the gang is undone.
    decision = decide(snapshot, [*gang, workload("other", project="speech", gpus=1, submitted=2)])
    assert decision.admitted == {}
    assert state(snapshot) == before
    assert "borrow 8 idle GPUs" in decision.reasons["other"][0].message
    for wid in ("lead", "work"):
        [reason] = decision.reasons[wid]
        assert reason.code == Code.GANG
        assert reason.message.startswith("Group workers: its part of 1 replica(s) on platform training/h100 does not "
                                         "fit beside the others")
        assert reason.message.endswith("the group starts whole or not at all.")
        assert reason.details["gang"] == "wf/workers" and reason.details["member"] == "work"
    # A workload after the gang in the same cycle gets the node and the quota the gang let go.
    snapshot = fresh()
    decision = decide(snapshot, [*gang, workload("later", gpus=8, submitted=2)])
    assert list(decision.admitted) == ["later"]
    assert decision.admitted["later"].placement == {"n1": 1}
    assert snapshot.pools["training"].projects["vision"].used[0] == 800
    assert decision.positions["lead"] == {"training": 1} and decision.positions["work"] == {"training": 2}


def test_a_gang_tries_its_next_pool_once_one_refuses_a_member_and_is_charged_only_there():
    snapshot = Snapshot({"small": two_platforms(h100=[node("s1", 8)], a100=[node("s2", 2)], name="small",
                                                projects={"vision": quota(deserved=32)}),
                         "big": two_platforms(name="big", projects={"vision": quota(deserved=32)})})
    pools = ("small", "big")
    decision = decide(snapshot, [member("lead", "h100", gpus=8, pools=pools),
                                 member("work", "a100", gpus=4, pools=pools)])
    assert {wid: (a.pool, a.platform) for wid, a in decision.admitted.items()} == {"lead": ("big", "h100"),
                                                                                   "work": ("big", "a100")}
    small = snapshot.pools["small"]
    assert small.platforms["h100"][0].free[0] == 800 and small.projects["vision"].used[0] == 0
    assert "research" not in small.departments


def test_a_gang_short_of_a_member_in_the_queue_admits_none():
    snapshot = Snapshot({"training": two_platforms(projects={"vision": quota(deserved=32)})})
    decision = decide(snapshot, [member("lead", size=3), member("work", "a100", size=3)])
    assert decision.admitted == {}
    for wid in ("lead", "work"):
        [reason] = decision.reasons[wid]
        assert reason.code == Code.GANG
        assert reason.message == ("Waiting for the rest of group workers: 2 of its 3 parts are in the queue; the "
                                  "group starts whole or not at all.")
        assert reason.details == {"gang": "wf/workers", "present": 2, "size": 3}
    [reason] = decide(snapshot, [member("lead", size=3)]).reasons["lead"]
    assert reason.message.startswith("Waiting for the rest of group workers: 1 of its 3 parts is in the queue")
    assert snapshot.pools["training"].projects["vision"].used[0] == 0


def test_a_gang_whose_members_together_exceed_the_project_s_guarantee_is_refused_for_quota():
    snapshot = Snapshot({"training": two_platforms(projects={"vision": quota(deserved=8)})})
    decision = decide(snapshot, [member("lead", gpus=4), member("work", "a100", gpus=6, submitted=1),
                                 workload("later", gpus=8, submitted=2)])
    assert list(decision.admitted) == ["later"]  # the lead's 4 GPUs were given back
    for wid in ("lead", "work"):
        [reason] = decision.reasons[wid]
        assert reason.code == Code.QUOTA
        assert reason.message.startswith("Project vision has 4 of 8 guaranteed A100 GPUs in use in pool training "
                                         "and asks for 6 more")
    assert snapshot.pools["training"].projects["vision"].used[0] == 800


def test_a_gang_in_an_engine_s_pool_is_handed_over_whole():
    snapshot = Snapshot({"kai": two_platforms(name="kai", status=Code.ENGINE.value, engine="KAI Scheduler")})
    decision = decide(snapshot, [member("lead", gpus=64, pools=("kai",)), member("work", "a100", pools=("kai",))])
    assert {wid: (a.platform, a.placement, a.engine) for wid, a in decision.admitted.items()} == {
        "lead": ("h100", {}, "KAI Scheduler"), "work": ("a100", {}, "KAI Scheduler")}


def test_a_gang_is_decided_at_its_first_member_s_place_in_the_order():
    snapshot = Snapshot({"training": two_platforms(h100=[node("n1", 8)], a100=[],
                                                   projects={"vision": quota(deserved=32)})})
    decision = decide(snapshot, [member("lead", gpus=4), workload("single", gpus=4, submitted=1),
                                 member("work", gpus=4, submitted=2)])
    assert sorted(decision.admitted) == ["lead", "work"]
    assert decision.reasons["single"][0].code == Code.CAPACITY
    assert decision.positions["single"] == {"training": 1}


def test_a_member_without_the_pool_makes_that_pool_unusable_for_the_gang():
    snapshot = Snapshot({"a": two_platforms(name="a", projects={"vision": quota(deserved=32)}),
                         "b": two_platforms(name="b", projects={"vision": quota(deserved=32)})})
    decision = decide(snapshot, [member("lead", pools=("a", "b")), member("work", pools=("b",))])
    assert {a.pool for a in decision.admitted.values()} == {"b"}
    assert len(decision.admitted) == 2


def test_a_gang_within_its_guarantee_reclaims_room_for_every_member_at_once():
    # Both platforms are full of nlp's borrowed work; vision's gang (4 GPUs on h100, 8 on a100) is within its
    # guarantee: the victims chosen make room for both members, on their own platforms, in one decision.
    h100, a100 = [node("h1", 8)], [node("a1", 8)]
    for n in (*h100, *a100):
        n.free = (0, 64_000, 512 * GIB)
    holders = [Holder("h-small", "nlp", "research", "training", (400, 0, 0), {"b/h1": 1}, True, 1.0),
               Holder("h-big", "nlp", "research", "training", (400, 0, 0), {"b/h1": 1}, True, 2.0),
               Holder("a-all", "nlp", "research", "training", (800, 0, 0), {"b/a1": 1}, True, 3.0)]
    snapshot = Snapshot({"training": two_platforms(h100=h100, a100=a100, projects={
        "vision": quota(deserved=16), "nlp": quota(deserved=0, used=16, guaranteed=0, fair=0)})}, holders)
    gang = [member("lead", "h100", gpus=4), member("work", "a100", gpus=8, submitted=1)]
    decision = decide(snapshot, gang)
    assert decision.admitted == {}
    assert sorted(decision.preempt) == ["a-all", "h-big"]  # one on each platform: the newest on h100 suffices
    assert "for group workers" in decision.preempt["a-all"]
    for wid in ("lead", "work"):
        assert decision.reasons[wid][0].code == Code.RECLAIMING
    # Low priority gangs never reclaim.
    low = [member("lead", "h100", gpus=4, low=True), member("work", "a100", gpus=8, low=True)]
    for holder in holders:
        holder.preempting = False
    assert decide(snapshot, low).preempt == {}
