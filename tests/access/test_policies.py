"""The pure rules: globs, deny-wins, seed 001's osmo-<team> rule, and the reasons given."""

import re

import pytest

from pools.engine.policies import (
    DEFAULT_GRANT,
    STAFF_GRANT,
    RoleRules,
    glob_regex,
    normalize_path,
    pool_grants,
    request_grant,
    team_of,
)


def role(name: str, *actions: tuple[str, str]) -> RoleRules:
    return RoleRules.from_policies(name, [{"actions": [{"base": "http", "method": method, "path": path}
                                                       for method, path in actions]}])


# ---- seed 001 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("pool", ["teamcluster01", "team-cluster-02", "team-gpu-pool"])
def test_role_osmo_team_grants_the_pools_seed_001_allows(pool):
    assert role("osmo-team").pool_grant(pool) is not None


@pytest.mark.parametrize("pool", ["myteam-cluster-01", "other-team-pool"])
def test_role_osmo_team_refuses_the_pools_seed_001_refuses(pool):
    assert role("osmo-team").pool_grant(pool) is None


def test_the_name_rule_needs_the_osmo_prefix_and_a_team():
    assert team_of("osmo-team") == "team"
    assert team_of("team") is None
    assert team_of("osmo-") is None
    assert role("team").pool_grant("team-gpu-pool") is None


def test_the_name_rule_explains_itself():
    grant = role("osmo-team").pool_grant("team-gpu-pool")

    assert grant.role == "osmo-team"
    assert grant.rule == "osmo-<team> name rule"
    assert "begins with 'team'" in grant.reason


# ---- seed 002 policies --------------------------------------------------------------------------------

SEED_ACTIONS = [("post", "/api/pool/shared_simulation_training_pool*"), ("*", "http:/api/profile/*")]
SEED_002 = role("osmo-shared", *SEED_ACTIONS)


def test_a_post_policy_on_api_pool_grants_the_pools_it_matches():
    grant = role("submitters", *SEED_ACTIONS).pool_grant("shared_simulation_training_pool")

    assert grant is not None
    assert grant.rule == "policy POST /api/pool/shared_simulation_training_pool*"
    assert role("x", ("POST", "/api/pool/shared*")).pool_grant("shared_other") is not None


def test_a_policy_that_only_allows_get_grants_no_pool():
    assert role("x", ("GET", "/api/pool/*")).pool_grant("anything") is None


def test_the_http_tag_and_a_missing_leading_slash_are_tolerated_as_seed_002_prints_them():
    assert normalize_path("http:/api/profile/*") == (False, "/api/profile/*")
    assert normalize_path("api/pool/shared*") == (False, "/api/pool/shared*")
    assert normalize_path("!/api/pool/x") == (True, "/api/pool/x")
    assert role("x", ("post", "api/pool/shared*")).pool_grant("shared-a") is not None
    assert SEED_002.decide("GET", "/api/profile/") is not None


def test_methods_match_without_regard_to_case_and_get_covers_head():
    rules = role("x", ("get", "/api/a"), ("*", "/api/b"))

    assert rules.decide("GET", "/api/a") and rules.decide("HEAD", "/api/a")
    assert rules.decide("POST", "/api/a") is None
    assert all(rules.decide(method, "/api/b") for method in ("GET", "POST", "DELETE", "PATCH"))


# ---- deny wins within a role ------------------------------------------------------------------------

@pytest.mark.parametrize("order", ["allow first", "deny first"])
def test_deny_beats_allow_within_a_role_in_either_order(order):
    actions = [("*", "/api/pool/*"), ("*", "!/api/pool/secret*")]
    rules = role("x", *(actions if order == "allow first" else reversed(actions)))

    assert rules.decide("POST", "/api/pool/open") is not None
    assert rules.decide("POST", "/api/pool/secret-1") is None
    assert rules.pool_grant("secret-1") is None
    assert rules.pool_grant("open") is not None


def test_a_deny_also_overrides_the_name_rule_of_its_own_role():
    rules = role("osmo-team", ("post", "!/api/pool/team-secret*"))

    assert rules.pool_grant("team-gpu") is not None
    assert rules.pool_grant("team-secret-a") is None


def test_a_deny_in_one_role_does_not_take_away_what_another_role_allows():
    denying = role("a", ("*", "!/api/pool/x*"))
    allowing = role("b", ("post", "/api/pool/x*"))

    assert request_grant("POST", "/api/pool/x1", [denying, allowing]).role == "b"
    assert [g.role for g in pool_grants("x1", [denying, allowing], staff=False, default_open=False)] == ["b"]


def test_a_deny_for_another_method_does_not_deny_this_one():
    rules = role("x", ("*", "/api/configs/*"), ("put", "!/api/configs/*"))

    assert rules.decide("GET", "/api/configs/pool/") is not None
    assert rules.decide("PUT", "/api/configs/pool/") is None


# ---- globs ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("glob", "path", "matches"), [
    ("/api/pool/*", "/api/pool/a/b/c", True),  # * crosses slashes, as OSMO's policies expect
    ("/api/pool/?", "/api/pool/a", True),
    ("/api/pool/?", "/api/pool/ab", False),
    ("/api/pool/[ab]1", "/api/pool/b1", True),
    ("/api/pool/[!ab]1", "/api/pool/b1", False),
    ("/api/pool/[!ab]1", "/api/pool/c1", True),
    ("/api/pool/a.b", "/api/pool/aXb", False),  # a dot is a dot
    ("/api/pool/a+b", "/api/pool/a+b", True),
    ("/api/pool/[a", "/api/pool/[a", True),  # an unclosed bracket is a literal
    ("/api/pool/x", "/api/pool/x/", False),
    ("*", "/anything/at/all", True),
])
def test_globs_match_like_fnmatch_with_star_crossing_slashes(glob, path, matches):
    assert (re.fullmatch(glob_regex(glob), path) is not None) is matches


def test_the_database_regexes_decide_exactly_like_the_python_rule():
    rules = [role("osmo-team", ("post", "!/api/pool/team-secret*")),
             role("sim", ("post", "/api/pool/sim*"), ("*", "!/api/pool/sim-secret*"), ("get", "/api/pool/get*")),
             role("all", ("*", "*"), ("post", "!/api/pool/[xy]*"))]
    names = ["team-a", "team-secret-1", "sim-a", "sim-secret", "get-x", "x-1", "y2", "z3", "teamless", "simx"]
    for rules_of_role in rules:
        allow_path, allow_name, deny_path = rules_of_role.pool_regexes()
        for name in names:
            path = "/api/pool/" + name
            by_regex = ((allow_path and re.search(allow_path, path)) or (allow_name and re.search(allow_name, name))) \
                and not (deny_path and re.search(deny_path, path))
            assert bool(by_regex) == (rules_of_role.pool_grant(name) is not None), (rules_of_role.name, name)


# ---- who gets what ------------------------------------------------------------------------------------

def test_staff_and_the_open_default_pool_are_reasons_of_their_own():
    assert pool_grants("default", [], staff=False, default_open=True) == [DEFAULT_GRANT]
    assert pool_grants("default", [], staff=False, default_open=False) == []
    assert pool_grants("any", [], staff=True, default_open=False) == [STAFF_GRANT]


def test_every_granting_role_is_listed():
    grants = pool_grants("team-x", [role("osmo-team"), role("osmo-te"), role("osmo-zzz")], staff=False,
                         default_open=True)

    assert [grant.role for grant in grants] == ["osmo-team", "osmo-te"]
