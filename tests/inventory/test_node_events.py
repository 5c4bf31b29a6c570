"""What a change to a node's row means (pools.inventory.node_events): pure."""

from pools.inventory.node_events import ADDED, CORDON, POOLS, REMOVED, STATUS, describe, node_changes

READY = {"status": "Ready", "unschedulable": False, "pool_names": ["training"]}


def visible_all(names):
    return list(names)


def test_a_new_node_is_one_added_event_with_its_status_and_pools():
    assert node_changes(None, {**READY, "pool_names": ["b", "a"]}) == [
        (ADDED, {"status": "Ready", "pools": ["a", "b"]})]


def test_no_watched_change_is_no_event():
    assert node_changes(READY, dict(READY)) == []
    assert node_changes(READY, {**READY, "pool_names": ["training"]}) == []


def test_a_cordon_is_a_cordon_event_and_the_status_it_brings():
    after = {**READY, "unschedulable": True, "status": "Cordoned"}
    assert node_changes(READY, after) == [
        (CORDON, {"cordoned": True}), (STATUS, {"before": "Ready", "after": "Cordoned"})]
    assert node_changes(after, READY)[0] == (CORDON, {"cordoned": False})


def test_pools_compare_as_sets_and_record_both_sides_sorted():
    assert node_changes(READY, {**READY, "pool_names": ["training", "shared"]}) == [
        (POOLS, {"before": ["training"], "after": ["shared", "training"]})]


def test_describe_names_only_the_pools_the_viewer_may_see():
    def alpha_only(names):
        return [name for name in names if name == "alpha"]

    assert describe(POOLS, {"before": ["alpha"], "after": ["alpha", "secret"]}, visible_all) == \
        "Pools alpha \u2192 alpha, secret"
    # The change touched only a pool the viewer may not see: nothing to say, and no name.
    assert describe(POOLS, {"before": ["alpha"], "after": ["alpha", "secret"]}, alpha_only) == ""
    assert describe(POOLS, {"before": ["secret"], "after": ["alpha"]}, alpha_only) == "Pools none \u2192 alpha"
    assert describe(ADDED, {"status": "Ready", "pools": ["alpha", "secret"]}, alpha_only) == \
        "Appeared: Ready, pools alpha"
    assert describe(STATUS, {"before": "Ready", "after": "Unknown"}, alpha_only) == "Status Ready \u2192 Unknown"
    assert describe(CORDON, {"cordoned": True}, alpha_only).startswith("Cordoned")
    assert describe(REMOVED, {}, alpha_only) == "Left the cluster"
