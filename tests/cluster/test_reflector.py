"""list_all, Backoff and Follower: unit tests with fakes, then the real client against the stand-in."""

import logging
import threading
import time

import pytest

from pools.cluster import Expired, Unavailable, WatchEvent
from pools.cluster.reflector import Backoff, Follower, list_all
from tests.kube_objects import make_node, make_pod
from tests.kube_standin import HANG
from tests.support.clock import Clock
from tests.waiting import until

# The watches below end on the events the tests wait for; their deadlines and timeouts (HANG) are ceilings that only
# turn a hang into a failure, so that no load can end a watch (and add a request the tests count) before its events
# came.


class Sleeps:
    """A sleep that records instead of sleeping."""

    def __init__(self):
        self.calls = []

    def __call__(self, seconds):
        self.calls.append(seconds)


def instant_backoff(sleeps=None):
    return Backoff(base=0.5, cap=30.0, rng=lambda: 1.0, sleep=sleeps if sleeps is not None else Sleeps())


def names(items):
    return [item["metadata"]["name"] for item in items]


def schedule(action):
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


# list_all


def test_list_all_follows_continue_tokens_through_every_page(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i:02d}") for i in range(11))

    listed = list_all(kube.list_nodes, limit=3)

    assert names(listed.items) == [f"gpu-{i:02d}" for i in range(11)]
    assert listed.resource_version == "11"
    assert listed.continue_token is None
    assert len(standin.requests_to("/api/v1/nodes")) == 4


def test_list_all_restarts_from_the_first_page_when_a_continue_token_expires(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(5))
    compactions = []

    def list_page(**kwargs):
        page = kube.list_nodes(**kwargs)
        if not compactions:
            # Between the first and the second page, as when etcd compacts during a long list.
            standin.add_node(make_node("gpu-5"))
            standin.compact()
            compactions.append(page.resource_version)
        return page

    listed = list_all(list_page, limit=2)

    assert names(listed.items) == [f"gpu-{i}" for i in range(6)]
    assert listed.resource_version == "6"
    continues = [r.query.get("continue") is not None for r in standin.requests_to("/api/v1/nodes")]
    assert continues == [False, True, False, True, True]


def test_list_all_gives_up_after_three_expired_lists(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(4))

    def list_page(**kwargs):
        page = kube.list_nodes(**kwargs)
        standin.compact()
        return page

    with pytest.raises(Expired):
        list_all(list_page, limit=2)

    assert [r.query.get("continue") is None for r in standin.requests_to("/api/v1/nodes")] == [True, False] * 3


def test_list_all_does_not_retry_an_expired_first_page():
    calls = []

    def list_page(**kwargs):
        calls.append(kwargs)
        raise Expired("listing nodes: HTTP 410", 410)

    with pytest.raises(Expired):
        list_all(list_page)

    assert calls == [{"limit": 500, "continue_token": None}]


def test_a_node_deleted_between_two_lists_is_missing_from_the_second(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(3))
    before = list_all(kube.list_nodes, limit=2)

    standin.delete_node("gpu-1")
    after = list_all(kube.list_nodes, limit=2)

    assert names(before.items) == ["gpu-0", "gpu-1", "gpu-2"]
    assert names(after.items) == ["gpu-0", "gpu-2"]
    assert int(after.resource_version) > int(before.resource_version)


# Backoff


def test_backoff_doubles_its_ceiling_up_to_the_cap():
    backoff = Backoff(base=0.5, cap=4.0, rng=lambda: 1.0, sleep=Sleeps())

    assert [backoff.next_delay() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]


def test_backoff_jitters_each_delay_between_zero_and_its_ceiling():
    draws = iter([0.0, 0.5, 0.25])
    backoff = Backoff(base=1.0, cap=30.0, rng=lambda: next(draws), sleep=Sleeps())

    assert [backoff.next_delay() for _ in range(3)] == [0.0, 1.0, 1.0]


def test_backoff_waits_by_sleeping_and_reset_starts_over():
    sleeps = Sleeps()
    backoff = Backoff(base=0.5, cap=30.0, rng=lambda: 1.0, sleep=sleeps)

    backoff.wait()
    backoff.wait()
    backoff.reset()
    backoff.wait()
    backoff.wait(limit=0.25)

    assert sleeps.calls == [0.5, 1.0, 0.5, 0.25]


def test_backoff_survives_a_very_long_outage():
    backoff = Backoff(base=0.5, cap=30.0, rng=lambda: 1.0, sleep=Sleeps())

    delays = [backoff.next_delay() for _ in range(2000)]

    assert delays[-1] == 30.0


# Follower with fakes


class FakeWatch:
    """Hands out scripted streams: a list of events (then a normal end) or an exception to raise."""

    def __init__(self, *scripts):
        self.scripts = list(scripts)
        self.calls = []

    def __call__(self, resource_version, *, timeout_seconds):
        self.calls.append((resource_version, timeout_seconds))
        script = self.scripts.pop(0) if self.scripts else []
        if isinstance(script, Exception):
            raise script
        yield from script


def event(kind, version, name="gpu-1"):
    if kind == "BOOKMARK":
        return WatchEvent(kind, {"kind": "Node", "apiVersion": "v1", "metadata": {"resourceVersion": version}})
    return WatchEvent(kind, {"metadata": {"name": name, "resourceVersion": version}})


def test_follower_skips_bookmarks_but_takes_their_resource_version():
    watch = FakeWatch([event("ADDED", "5"), event("BOOKMARK", "9")], [event("MODIFIED", "12")])
    follower = Follower(watch, "4", clock=Clock(100.0, step=0.01), backoff=instant_backoff())

    seen = []
    for item in follower.events(deadline=103.0):
        seen.append((item.type, item.resource_version))
        if len(seen) == 2:
            break

    assert seen == [("ADDED", "5"), ("MODIFIED", "12")]
    assert watch.calls[1][0] == "9"
    assert follower.resource_version == "12"


def test_follower_asks_for_no_longer_than_the_time_left():
    clock = Clock(0.0)
    calls = []

    def quiet_watch(version, *, timeout_seconds):
        calls.append((version, timeout_seconds))
        clock.advance(timeout_seconds)
        yield from ()

    follower = Follower(quiet_watch, "1", timeout_seconds=60, clock=clock, backoff=instant_backoff())
    assert list(follower.events(deadline=2.5)) == []

    assert calls == [("1", 3)]


def test_follower_backs_off_on_unavailable_and_resumes_from_the_last_version():
    sleeps = Sleeps()
    watch = FakeWatch(
        [event("ADDED", "5")],
        Unavailable("watching nodes: HTTP 503"),
        Unavailable("watching nodes: stream broken or stalled"),
        [event("MODIFIED", "7")],
    )
    follower = Follower(watch, "4", clock=Clock(100.0, step=0.01), backoff=instant_backoff(sleeps))

    seen = []
    for item in follower.events(deadline=200.0):
        seen.append(item.resource_version)
        if len(seen) == 2:
            break

    assert seen == ["5", "7"]
    assert [call[0] for call in watch.calls] == ["4", "5", "5", "5"]
    # The first stream delivered events (reset), then two failures in a row: 0.5 s, then 1 s.
    assert sleeps.calls[-2:] == [0.5, 1.0]
    assert follower.errors == 2
    assert follower.restarts == 3


def test_follower_propagates_expired_for_the_caller_to_list_again():
    watch = FakeWatch([event("ADDED", "5")], Expired("watching nodes: HTTP 410", 410))
    follower = Follower(watch, "4", clock=Clock(100.0, step=0.01), backoff=instant_backoff())

    seen = []
    with pytest.raises(Expired):
        for item in follower.events(deadline=200.0):
            seen.append(item.resource_version)

    assert seen == ["5"]
    assert follower.resource_version == "5"


def test_follower_does_not_start_a_watch_past_its_deadline():
    watch = FakeWatch([event("ADDED", "5")])
    follower = Follower(watch, "4", clock=Clock(50.0), backoff=instant_backoff())

    assert list(follower.events(deadline=50.0)) == []
    assert watch.calls == []


def test_follower_backs_off_when_streams_end_at_once_without_events():
    sleeps = Sleeps()
    watch = FakeWatch([], [], [event("ADDED", "5")])
    follower = Follower(watch, "4", clock=Clock(100.0, step=0.01), backoff=instant_backoff(sleeps))

    first = next(follower.events(deadline=200.0))

    assert first.resource_version == "5"
    assert sleeps.calls == [0.5, 1.0]
    assert follower.errors == 2


# Follower with the real client and the stand-in


def test_it_resumes_the_watch_without_relisting_after_a_normal_end(standin, kube):
    standin.add_node(make_node("gpu-1"))
    listed = list_all(kube.list_nodes)
    standin.end_next_watch_after(2)
    for i in range(2, 5):
        standin.add_node(make_node(f"gpu-{i}"))
    follower = Follower(kube.watch_nodes, listed.resource_version, timeout_seconds=HANG, backoff=instant_backoff())

    seen = []
    for item in follower.events(deadline=time.monotonic() + HANG):
        seen.append(item.object["metadata"]["name"])
        if len(seen) == 3:
            break

    assert seen == ["gpu-2", "gpu-3", "gpu-4"]
    watches = standin.requests_to("/api/v1/nodes", watch=True)
    assert [w.query["resourceVersion"] for w in watches] == ["1", "3"]
    assert len(standin.requests_to("/api/v1/nodes", watch=False)) == 1
    assert follower.restarts == 1
    assert follower.errors == 0


def test_bookmarks_advance_the_resource_version_so_a_resume_survives_compaction(standin, kube):
    standin.add_node(make_node("gpu-1"))
    listed = list_all(kube.list_nodes)
    clock = Clock(100.0)  # the follow ends when the bookmark has arrived, not after a window of wall time
    follower = Follower(kube.watch_nodes, listed.resource_version, timeout_seconds=60, clock=clock,
                        backoff=instant_backoff())

    def pod_traffic_then_bookmark():
        standin.wait_for_watches()
        standin.add_pods(make_pod(f"p-{i}", "gpu-1") for i in range(3))
        standin.bookmark()
        until(lambda: follower.resource_version == "4", "the bookmark to reach the follower")
        clock.advance(600)
        standin.end_watches()

    helper = schedule(pod_traffic_then_bookmark)
    assert list(follower.events(deadline=clock() + 600)) == []
    helper.join()
    assert follower.resource_version == "4"

    standin.compact()
    standin.add_node(make_node("gpu-2"))
    (added,) = _first(follower.events(deadline=clock() + 600), 1)

    assert added.object["metadata"]["name"] == "gpu-2"
    assert [w.query["resourceVersion"] for w in standin.requests_to("/api/v1/nodes", watch=True)] == ["1", "4"]


def _first(events, count):
    taken = []
    for item in events:
        taken.append(item)
        if len(taken) == count:
            break
    return taken


def test_a_server_error_on_resume_is_backed_off_and_the_watch_resumed(standin, kube, caplog):
    standin.add_node(make_node("gpu-1"))
    listed = list_all(kube.list_nodes)
    standin.add_node(make_node("gpu-2"))
    standin.end_next_watch_after(1)
    standin.fail_next(2, status=503, path_prefix="/api/v1/nodes")
    sleeps = Sleeps()
    follower = Follower(
        kube.watch_nodes, listed.resource_version, timeout_seconds=HANG, backoff=instant_backoff(sleeps), name="nodes"
    )

    def traffic():
        standin.wait_for_watches()
        standin.add_node(make_node("gpu-3"))

    seen = []
    with caplog.at_level(logging.WARNING, logger="pools.cluster.reflector"):
        for item in follower.events(deadline=time.monotonic() + HANG):
            seen.append(item.object["metadata"]["name"])
            if len(seen) == 1:
                schedule(traffic)
            if len(seen) == 2:
                break

    assert seen == ["gpu-2", "gpu-3"]
    # The fault answers the next two node requests: the watch that failed twice, backing off 0.5 s then 1 s.
    assert sleeps.calls == [0.5, 1.0]
    assert follower.errors == 2
    watches = standin.requests_to("/api/v1/nodes", watch=True)
    assert [w.query["resourceVersion"] for w in watches] == ["1", "2", "2", "2"]
    assert len(standin.requests_to("/api/v1/nodes", watch=False)) == 1
    assert "nodes unavailable (watching nodes: HTTP 503" in caplog.text
    assert "resuming from resourceVersion 2" in caplog.text


def test_a_stalled_stream_is_abandoned_and_the_watch_resumed(standin, kube):
    standin.add_node(make_node("gpu-1"))
    listed = list_all(kube.list_nodes)
    standin.add_node(make_node("gpu-2"))
    standin.stall_next_watch()
    sleeps = Sleeps()
    follower = Follower(kube.watch_nodes, listed.resource_version, timeout_seconds=1, backoff=instant_backoff(sleeps))

    started = time.monotonic()
    (added,) = _first(follower.events(deadline=time.monotonic() + 600), 1)  # the deadline only guards a hang

    assert added.object["metadata"]["name"] == "gpu-2"
    # Abandoned by the read timeout, timeoutSeconds (1) plus the margin (tests/cluster/conftest.py), not at the
    # deadline: the stalled stream counts as an error and is resumed from the same version, which an end at the
    # deadline would not do. Only a lower bound on the time, which no load can break.
    assert time.monotonic() - started > 1 + kube.watch_margin - 0.1
    assert [w.query["resourceVersion"] for w in standin.requests_to("/api/v1/nodes", watch=True)] == ["1", "1"]
    assert follower.errors == 1
    assert sleeps.calls == [0.5]


def test_an_expired_watch_reaches_the_caller_who_lists_again(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(3))
    listed = list_all(kube.list_nodes)
    standin.add_node(make_node("gpu-3"))
    standin.compact()
    follower = Follower(kube.watch_nodes, listed.resource_version, timeout_seconds=HANG, backoff=instant_backoff())

    with pytest.raises(Expired):
        list(follower.events(deadline=time.monotonic() + HANG))
    relisted = list_all(kube.list_nodes)
    follower.resource_version = relisted.resource_version
    standin.add_node(make_node("gpu-4"))
    (added,) = _first(follower.events(deadline=time.monotonic() + HANG), 1)

    assert names(relisted.items) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    assert added.object["metadata"]["name"] == "gpu-4"


def test_an_in_stream_expired_error_reaches_the_caller(standin, kube):
    standin.add_nodes(make_node(f"gpu-{i}") for i in range(3))
    standin.error_next_watch(410, after=2)
    follower = Follower(kube.watch_nodes, "0", timeout_seconds=HANG, backoff=instant_backoff())

    seen = []
    with pytest.raises(Expired):
        for item in follower.events(deadline=time.monotonic() + HANG):
            seen.append(item.object["metadata"]["name"])

    assert seen == ["gpu-0", "gpu-1"]
    assert follower.errors == 0


def test_the_follower_returns_at_its_deadline_on_a_quiet_watch(standin, kube):
    follower = Follower(kube.watch_pods, "0", timeout_seconds=60, backoff=instant_backoff())

    started = time.monotonic()
    assert list(follower.events(deadline=started + 1)) == []

    # The request itself proves the deadline clipped the watch; the elapsed time only has to be well under
    # the 60 s the watch would otherwise have waited, whatever the machine's load.
    assert time.monotonic() - started < 30
    (watch,) = standin.requests_to("/api/v1/pods", watch=True)
    assert watch.query["timeoutSeconds"] == "1"


def test_list_then_watch_ends_with_the_state_of_a_fresh_list(standin, kube):
    standin.add_node(make_node("gpu-1"))
    standin.add_pods(make_pod(f"p-{i}", "gpu-1", namespace=f"team-{i % 2}") for i in range(6))
    listed = list_all(kube.list_pods, limit=4)
    state = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in listed.items}
    standin.end_next_watch_after(3)

    def traffic():
        standin.wait_for_watches()
        standin.delete_pod("p-0", namespace="team-0")
        standin.modify_pod("p-1", {"status": {"phase": "Succeeded"}}, namespace="team-1")
        standin.add_pod(make_pod("p-9", "gpu-1", namespace="team-1"))
        standin.wait_for_watches()
        standin.add_pod(make_pod("p-10", "gpu-1", namespace="team-0"))
        standin.delete_pod("p-9", namespace="team-1")

    schedule(traffic)
    follower = Follower(kube.watch_pods, listed.resource_version, timeout_seconds=HANG, backoff=instant_backoff())
    for count, item in enumerate(follower.events(deadline=time.monotonic() + HANG), start=1):
        key = (item.object["metadata"]["namespace"], item.object["metadata"]["name"])
        if item.type == "DELETED":
            state.pop(key)
        else:
            state[key] = item.object
        if count == 5:
            break

    fresh = list_all(kube.list_pods, limit=4)
    assert state == {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in fresh.items}
    assert follower.resource_version == fresh.resource_version
