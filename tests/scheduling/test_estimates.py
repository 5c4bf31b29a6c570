"""The start estimator (pure): no basis is "unknown"; exec timeouts; run-time history per size bucket; the queue
ahead (with backfill); multi-pool candidates; gangs larger than what is free or than the pool; quota waits."""

import pytest

from scheduling.decisions import estimates as est
from scheduling.decisions.estimates import Estimate, PoolFacts, Queued, Running, Wanted, estimate

NOW = 1_800_000_000.0
H = 3600.0


def want(id="w", gpus=4, pools=("p",), positions=None, reasons=None, project="vision", department="research",
         waited=0.0):
    return Wanted(id, gpus, tuple(pools), positions if positions is not None else {pool: 1 for pool in pools},
                  reasons or {}, project, department, waited)


def pool(name="p", capacity=16, free=0, running=(), queue=(), history=(), status="ONLINE", waits=()):
    return PoolFacts(name, capacity, free, list(running), list(queue), list(history), status, list(waits))


def one(facts: PoolFacts | list[PoolFacts], wanted: Wanted, now: float = NOW):
    pools = {f.name: f for f in (facts if isinstance(facts, list) else [facts])}
    queue_of = {name: f.queue for name, f in pools.items()}
    for name, position in wanted.positions.items():  # the wanted workload is in the queues it is numbered in
        if name in pools and not any(q.id == wanted.id for q in queue_of[name]):
            queue_of[name].append(Queued(wanted.id, wanted.gpus, position))
    return estimate(pools, [wanted], now)[wanted.id]


def test_no_running_work_with_an_end_and_no_history_is_unknown():
    forecast = one(pool(running=[Running(16, NOW - H, None)]), want())
    assert forecast.at is None
    assert forecast.basis.startswith("unknown: it needs 4 GPUs in pool p (0 free now)")
    assert forecast.pools == (Estimate("p", 1, None, forecast.basis),)


def test_exec_timeouts_free_the_gpus():
    # Three 4-GPU workloads started an hour ago with 3 h timeouts: 12 GPUs free in 2 h.
    running = [Running(4, NOW - H, 3 * H) for _ in range(3)] + [Running(4, NOW - H, None)]
    forecast = one(pool(running=running), want(gpus=12))
    assert forecast.at == NOW + 2 * H
    assert forecast.basis == ("about 2 h: 12 GPUs free up in pool p when 3 running workloads reach their exec "
                              "timeouts")


def test_the_earliest_timeout_that_frees_enough_is_the_answer():
    running = [Running(4, NOW, 1 * H), Running(4, NOW, 5 * H), Running(8, NOW, 2 * H)]
    assert one(pool(running=running), want(gpus=4)).at == NOW + H
    forecast = one(pool(running=running), want(gpus=10))
    assert forecast.at == NOW + 2 * H
    assert "12 GPUs free up in pool p when 2 running workloads reach their exec timeouts" in forecast.basis


def test_a_timeout_already_passed_frees_now_plus_a_cycle():
    forecast = one(pool(running=[Running(8, NOW - 5 * H, H)]), want(gpus=8))
    assert forecast.at == NOW + est.CYCLE_SECONDS


def test_history_medians_predict_the_end_of_running_work():
    history = [(4, 40 * 60.0)] * 30 + [(4, 600.0)] * 20  # the last 50: median 40 min
    forecast = one(pool(running=[Running(16, NOW, None)], history=[(16, s) for _, s in history]), want(gpus=4))
    assert forecast.at == pytest.approx(NOW + 40 * 60)
    assert forecast.basis == ("about 40 min: 16 GPUs free up in pool p when 1 running workload ends (as expected "
                              "from the median run time of the last 50 finished workloads of 9-16 GPUs in pool p)")


def test_history_counts_only_the_last_fifty_and_uses_the_size_bucket():
    old = [(1, 10 * H)] * 100  # older than the newest fifty: not counted
    small = [(1, 60.0)] * 25
    big = [(8, 2 * H)] * 25
    times = est.RunTimes("p", small + big + old)
    assert times.typical(1) == (60.0, "the last 25 finished workloads of 1 GPU in pool p")
    assert times.typical(6) == (2 * H, "the last 25 finished workloads of 5-8 GPUs in pool p")
    assert times.typical(32)[1] == "the last 50 finished workloads in pool p"  # too few of its size: the pool's
    assert est.RunTimes("p", [(1, 60.0)] * (est.MIN_HISTORY - 1)).typical(1) is None


def test_exactly_min_history_runs_are_a_basis_in_the_bucket_and_in_the_pool():
    """The edge itself (the mutation run's survivor: `>` for `>=` on the pool's runs), not only one below it."""
    enough = [(1, 60.0)] * est.MIN_HISTORY
    assert est.RunTimes("p", enough).typical(1) == (60.0, f"the last {est.MIN_HISTORY} finished workloads of 1 GPU "
                                                          "in pool p")
    assert est.RunTimes("p", enough).typical(32) == (60.0, f"the last {est.MIN_HISTORY} finished workloads in pool p")
    assert est.bucket(0) == est.bucket(-1) == (0, 0)  # no GPU (a negative count is none)


def test_a_run_past_every_recent_run_time_falls_back_on_its_timeout_or_unknown():
    history = [(8, 600.0)] * 10
    long_run = Running(8, NOW - H, None)
    assert one(pool(capacity=8, running=[long_run], history=history), want(gpus=8)).at is None
    with_timeout = Running(8, NOW - H, 3 * H)
    assert one(pool(capacity=8, running=[with_timeout], history=history), want(gpus=8)).at == NOW + 2 * H


def test_the_earlier_of_timeout_and_median_wins():
    history = [(8, 4 * H)] * 10
    forecast = one(pool(capacity=8, running=[Running(8, NOW, H)], history=history), want(gpus=8))
    assert forecast.at == NOW + H and "exec timeout" in forecast.basis


def test_without_a_foreseeable_end_the_pools_recent_waits_are_the_basis():
    # The GPUs are held by work with no timeout and no history (the fleet's own pods, or ours without an end).
    waits = [(4, 300.0)] * 5 + [(1, 60.0)] * 10
    forecast = one(pool(running=[Running(16, NOW, None)], waits=waits), want(gpus=4))
    assert forecast.at == NOW + 300
    assert forecast.basis == ("about 5 min: the median wait of the last 5 workloads of 3-4 GPUs that started in pool "
                              "p (the GPUs it needs are held by work with no foreseeable end)")
    waited = one(pool(running=[Running(16, NOW, None)], waits=waits + [(4, 900.0)] * 3), want(gpus=4, waited=400))
    assert waited.at == NOW + 500  # the waits longer than its 400 s so far: median 900
    assert one(pool(running=[Running(16, NOW, None)], waits=waits), want(gpus=4, waited=1000)).at is None


def test_free_gpus_now_mean_the_next_cycles():
    forecast = one(pool(free=8), want(gpus=4))
    assert forecast.at == NOW + est.CYCLE_SECONDS
    assert forecast.basis == ("within a minute: 8 GPUs are free in pool p now (it needs 4); the next admission cycles "
                              "should admit it")


def test_free_by_count_but_scattered_waits_for_the_next_release():
    running = [Running(4, NOW, 2 * H)]
    forecast = one(pool(free=6, running=running), want(gpus=6, reasons={"p": ("GANG", {})}))
    assert forecast.at == NOW + 2 * H
    scattered = one(pool(free=6), want(gpus=6, reasons={"p": ("CAPACITY", {})}))
    assert scattered.at is None and "not on few enough nodes" in scattered.basis


def test_a_gang_larger_than_the_pool_is_unknown_and_says_why():
    forecast = one(pool(capacity=16, free=16), want(gpus=32))
    assert forecast.at is None
    assert forecast.basis == "unknown: it needs 32 GPUs, more than the 16 of pool p's ready nodes"


def test_a_gang_needing_more_than_is_free_waits_for_enough_releases():
    running = [Running(2, NOW, H * (i + 1)) for i in range(6)]  # 2 GPUs back each hour
    forecast = one(pool(capacity=16, free=4, running=running), want(gpus=10))
    assert forecast.at == NOW + 3 * H  # 4 free + 3 x 2


def test_workloads_ahead_take_their_gpus_for_their_expected_run_first():
    history = [(8, 2 * H)] * 10
    running = [Running(8, NOW, H)]
    queue = [Queued("ahead", 8, 1, None)]
    forecast = one(pool(capacity=8, running=running, queue=queue, history=history), want(gpus=8, positions={"p": 2}))
    assert forecast.at == NOW + 3 * H  # after the one ahead runs its median 2 h
    assert forecast.basis.endswith("when 1 running workload reaches its exec timeout and 1 workload ahead in the "
                                   "queue finishes first")
    assert forecast.pools[0].position == 2


def test_a_smaller_workload_behind_a_large_one_backfills():
    history = [(8, 2 * H)] * 10 + [(2, 30 * 60.0)] * 10
    running = [Running(6, NOW, 4 * H)]
    queue = [Queued("big", 8, 1, None)]  # cannot start before the 6 come back
    forecast = one(pool(capacity=8, free=2, running=running, queue=queue, history=history),
                   want(gpus=2, positions={"p": 2}))
    assert forecast.at == NOW + est.CYCLE_SECONDS  # the 2 free GPUs, for 30 min, end before the big one starts


def test_backfill_never_delays_the_one_ahead():
    history = [(2, 5 * H)] * 10 + [(8, 2 * H)] * 10
    running = [Running(6, NOW, H)]
    queue = [Queued("big", 8, 1, None)]
    forecast = one(pool(capacity=8, free=2, running=running, queue=queue, history=history),
                   want(gpus=2, positions={"p": 2}))
    assert forecast.at == NOW + 3 * H  # 5 h on the 2 free GPUs would delay "big": after it


def test_a_workload_ahead_with_no_end_holds_its_gpus_for_ever():
    running = [Running(8, NOW, H)]
    queue = [Queued("ahead", 8, 1, None)]
    forecast = one(pool(capacity=8, running=running, queue=queue), want(gpus=8, positions={"p": 2}))
    assert forecast.at is None


def test_deep_queues_are_unknown_past_the_walk_limit(monkeypatch):
    monkeypatch.setattr(est, "MAX_AHEAD", 3)
    queue = [Queued(f"q{i}", 1, i + 1, H) for i in range(5)]
    forecast = one(pool(free=16, queue=queue), want(gpus=1, positions={"p": 6}))
    assert forecast.basis == "unknown: more than 3 workloads are ahead of it in pool p's queue"


def test_multi_pool_candidates_take_the_earliest_and_keep_each():
    slow = pool("slow", running=[Running(16, NOW, 5 * H)])
    fast = pool("fast", running=[Running(16, NOW, H)])
    forecast = one([slow, fast], want(gpus=4, pools=("slow", "fast"), positions={"slow": 1, "fast": 3}))
    assert forecast.at == NOW + H and "pool fast" in forecast.basis
    assert [(e.pool, e.position, e.at) for e in forecast.pools] == [("slow", 1, NOW + 5 * H), ("fast", 3, NOW + H)]


def test_unknown_in_every_pool_says_why_in_the_first_candidate():
    """The basis shown for the whole workload is its first candidate pool's (the mutation run's survivor: the
    last one's)."""
    forecast = one([pool("m", free=16, status="MAINTENANCE"), pool("o", free=16, status="MAINTENANCE")],
                   want(pools=("m", "o", "new"), positions={"m": 1, "o": 1}))
    assert forecast.at is None and forecast.basis == "unknown: pool m is in maintenance"


def test_a_pool_numbered_but_missing_from_the_facts_is_unknown_and_the_others_still_count():
    """A candidate numbered in a pool the facts lack (deleted since the cycle) is unknown there (the mutation
    run's survivor: `or` for `and` walked a pool it had no facts for)."""
    forecast = one([pool("o", free=16)], want(pools=("gone", "o"), positions={"gone": 1, "o": 1}))
    by_pool = {e.pool: e for e in forecast.pools}
    assert by_pool["gone"].at is None and by_pool["gone"].basis.startswith("unknown:")
    assert forecast.at == NOW + est.CYCLE_SECONDS and "pool o" in forecast.basis


def test_a_pool_not_numbered_yet_or_closed_is_unknown():
    forecast = one([pool("m", free=16, status="MAINTENANCE"), pool("o", free=16)],
                   want(pools=("m", "o", "new"), positions={"m": 1, "o": 1}))
    by_pool = {e.pool: e for e in forecast.pools}
    assert by_pool["m"].basis == "unknown: pool m is in maintenance"
    assert by_pool["new"].basis.startswith("unknown: not in this pool's queue yet")
    assert forecast.at == NOW + est.CYCLE_SECONDS and "pool o" in forecast.basis
    offline = one(pool(free=16, status="OFFLINE"), want())
    assert offline.at is None and "offline" in offline.basis


def test_no_gpu_and_no_pool_are_unknown():
    assert one(pool(free=16), want(gpus=0)).basis == "unknown: it asks for no GPU, and estimates count GPUs"
    assert estimate({}, [want(pools=())], NOW)["w"].basis == "unknown: it has no candidate pool"


def test_reclaimed_work_frees_now():
    forecast = one(pool(running=[Running(16, NOW, None, preempting=True)]), want(gpus=4))
    assert forecast.at == NOW + est.CYCLE_SECONDS


QUOTA = {"unit": "project", "name": "vision", "resource": "gpu", "deserved": 8, "limit": -1, "in_use": 8,
         "in_use_guaranteed": 8, "requested": 4}


def test_a_quota_wait_ends_when_the_projects_own_work_ends():
    running = [Running(4, NOW, 3 * H, project="vision"), Running(8, NOW, H, project="other")]
    forecast = one(pool(free=8, running=running), want(gpus=4, reasons={"p": ("QUOTA", QUOTA)}))
    assert forecast.at == NOW + 3 * H
    assert forecast.basis == ("about 3 h: project vision gets 4 GPUs of its quota back in pool p when 1 of its "
                              "running workloads ends")


def test_a_quota_wait_with_no_foreseeable_end_is_unknown():
    running = [Running(8, NOW, None, project="vision")]
    forecast = one(pool(free=8, running=running), want(gpus=4, reasons={"p": ("QUOTA", QUOTA)}))
    assert forecast.at is None and "project vision's quota" in forecast.basis
    cpu = one(pool(free=8), want(reasons={"p": ("QUOTA", {**QUOTA, "resource": "cpu"})}))
    assert cpu.at is None and "cpu quota" in cpu.basis


def test_a_limit_wait_counts_the_department_when_the_department_is_at_its_limit():
    details = {**QUOTA, "unit": "department", "name": "research", "limit": 10, "in_use": 10}
    running = [Running(4, NOW, 2 * H, project="a", department="research")]
    forecast = one(pool(free=8, running=running), want(gpus=4, reasons={"p": ("LIMIT", details)}))
    assert forecast.at == NOW + 2 * H and "department research" in forecast.basis


@pytest.mark.parametrize(("seconds", "words"), [(10, "under a minute"), (60, "1 min"), (40 * 60, "40 min"),
                                                (3590, "1 h"), (2 * H, "2 h"), (1.6 * H, "1.5 h"), (30 * H, "30 h"),
                                                (72 * H, "3 d")])
def test_spans_read_as_people_say_them(seconds, words):
    assert est.span(seconds) == words


@pytest.mark.parametrize(("gpus", "bounds"), [(0, (0, 0)), (1, (1, 1)), (2, (2, 2)), (3, (3, 4)), (4, (3, 4)),
                                              (5, (5, 8)), (8, (5, 8)), (9, (9, 16)), (64, (33, 64))])
def test_size_buckets(gpus, bounds):
    assert est.bucket(gpus) == bounds
