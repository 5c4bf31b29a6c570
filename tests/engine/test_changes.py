"""The audit log's one-line summary of a configuration change (pools.engine.changes)."""

from pools.engine.changes import describe


def test_it_names_each_changed_leaf_with_before_and_after():
    before = {"name": "vision", "resources": [{"node_pool": "a", "gpu": {"deserved": 4}}], "description": "x"}
    after = {"name": "vision", "resources": [{"node_pool": "a", "gpu": {"deserved": 6, "limit": 8}}]}
    assert describe(before, after) == ('resources[0].gpu.deserved: 4 → 6; description: "x" → (none); '
                                       'resources[0].gpu.limit: (none) → 8')


def test_nothing_changed_is_empty_and_many_changes_are_cut_with_a_count():
    assert describe({"a": 1}, {"a": 1}) == ""
    text = describe({}, {f"k{i}": i for i in range(10)}, limit=3)
    assert text.endswith("; and 7 more") and text.count("→") == 3


def test_long_values_are_cut():
    text = describe({"a": "x" * 500}, {"a": "y"})
    assert len(text) < 100 and "…" in text
