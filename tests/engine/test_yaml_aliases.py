"""YAML aliases are measured on the composed nodes before anything is built: a short file that expands to
hundreds of megabytes once stored as JSON is refused, naming the limit; ordinary anchors still work."""

import tracemalloc

import pytest

from pools.engine import ConfigError, read_yaml, read_yaml_all

MB = 1024 * 1024


def fan_out(size: int, references: int) -> str:
    """One `size`-character string referenced `references` times (the finding: 100 KB x 1,000 in 105 KB)."""
    return f"default-values:\n  s: &s {'a' * size}\nworkflow:\n  args: [{', '.join(['*s'] * references)}]\n"


def test_a_string_referenced_a_thousand_times_is_refused_before_it_is_built():
    text = fan_out(100_000, 1_000)
    assert len(text) < 110_000
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="OSMO_YAML_MAX_EXPANDED") as caught:
            read_yaml(text, "file")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert caught.value.field == "file" and peak < 16 * MB


def test_nested_aliases_billion_laughs_are_refused():
    lines = ["a: &a [" + ", ".join(["lol"] * 10) + "]"]
    lines += [f"{b}: &{b} [" + ", ".join([f"*{a}"] * 10) + "]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    with pytest.raises(ConfigError, match="OSMO_YAML_MAX_EXPANDED"):
        read_yaml("\n".join(lines))


def test_a_document_that_contains_itself_is_refused():
    with pytest.raises(ConfigError, match="refers to itself"):
        read_yaml("a: &x [1, *x]\n")
    with pytest.raises(ConfigError, match="refers to itself"):
        read_yaml_all("ok: 1\n---\na: &x {b: *x}\n")


def test_the_limit_is_an_argument_and_counts_every_reference():
    text = fan_out(1_000, 10)
    assert read_yaml(text, max_expanded=20_000)["workflow"]["args"] == ["a" * 1_000] * 10
    with pytest.raises(ConfigError, match="= 9,000 "):
        read_yaml(text, max_expanded=9_000)


def test_ordinary_anchors_merges_and_streams_read_as_before():
    assert read_yaml("a: &x [1, 2]\nb: *x\nbase: &b {q: 1}\nc: {<<: *b, r: 2}\n") == {
        "a": [1, 2], "b": [1, 2], "base": {"q": 1}, "c": {"q": 1, "r": 2}}
    assert read_yaml("") is None and read_yaml_all("") == []
    assert read_yaml_all("a: 1\n---\nb: 2\n") == [{"a": 1}, {"b": 2}]
    with pytest.raises(ConfigError, match="another document"):
        read_yaml("a: 1\n---\nb: 2\n")


def test_a_character_yaml_does_not_print_is_a_config_error():
    with pytest.raises(ConfigError, match="special characters are not allowed"):
        read_yaml("a: \x0e")
