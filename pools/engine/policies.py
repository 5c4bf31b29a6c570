"""Who may do what, decided by pure functions (no Django): glob matching of HTTP actions, deny-wins
within a role, OSMO's `osmo-<team>` pool rule, and the reasons shown on "effective permissions".

Globs are translated once into a regular expression that means the same in Python's `re` and in
PostgreSQL's (and SQLite's) regex operator, so the database can filter pools with exactly the rule
that Python applies to a single request. Python itself decides a request with `Glob`, a matcher
that means exactly what that regular expression means but cannot backtrack: a glob like
`/api/*a*a*a*a*b` costs time in proportion to the path, not exponential in its stars.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

POOL_PATH = "/api/pool/"
TEAM_PREFIX = "osmo-"
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# Characters allowed inside a glob's [...] class; anything else makes the bracket a literal.
_CLASS_CHARS = re.compile(r"^!?[A-Za-z0-9_.\-]+$")


def _literal(char: str) -> str:
    # A backslash before a non-alphanumeric character is a literal in both regex dialects.
    return char if char.isalnum() or char == "_" else "\\" + char


def glob_regex(glob: str) -> str:
    """`*` any run of characters (slashes included, as OSMO's policies expect), `?` one character,
    `[abc]` / `[!abc]` a class. The result is unanchored."""
    out, index = [], 0
    while index < len(glob):
        char = glob[index]
        index += 1
        if char == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[" and (end := glob.find("]", index + 1)) != -1 and _CLASS_CHARS.match(glob[index:end]):
            body = glob[index:end]
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            index = end + 1
        else:
            out.append(_literal(char))
    return "".join(out)


class Glob:
    """A glob compiled for matching without backtracking, meaning exactly `re.fullmatch(glob_regex(glob), path,
    re.S)`. The glob is split at its stars into segments of single-character tokens (a literal, `?` or a
    class); the first segment must match at the start, the last at the end, and each one between at the
    leftmost place after the one before it (leftmost is always safe when a star separates segments).
    Each text position is tried at most once per segment, so the work is linear in the path's length
    for a given glob."""

    __slots__ = ("segments",)

    def __init__(self, glob: str):
        segments: list[list] = [[]]
        index = 0
        while index < len(glob):
            char = glob[index]
            index += 1
            if char == "*":
                if segments[-1] or len(segments) == 1:
                    segments.append([])
            elif char == "?":
                segments[-1].append(None)
            elif char == "[" and (end := glob.find("]", index + 1)) != -1 and _CLASS_CHARS.match(glob[index:end]):
                body = glob[index:end]
                negate = body.startswith("!")
                segments[-1].append((negate, _class_ranges(body[1:] if negate else body)))
                index = end + 1
            else:
                segments[-1].append(char)
        self.segments = tuple(tuple(segment) for segment in segments)

    def match(self, text: str) -> bool:
        return self.match_counting(text)[0]

    def match_counting(self, text: str) -> tuple[bool, int]:
        """(matches, steps): steps counts token comparisons, for tests that check the work is linear."""
        steps = 0
        segments, size = self.segments, len(text)

        def at(segment, start: int) -> bool:
            nonlocal steps
            for offset, token in enumerate(segment):
                steps += 1
                if not _token_matches(token, text[start + offset]):
                    return False
            return True

        if len(segments) == 1:  # no star: the whole text, exactly
            return len(segments[0]) == size and at(segments[0], 0), steps
        first, last = segments[0], segments[-1]
        end = size - len(last)
        if len(first) > end or not at(first, 0) or not at(last, end):
            return False, steps
        position = len(first)
        for segment in segments[1:-1]:
            while position + len(segment) <= end and not at(segment, position):
                position += 1
            if position + len(segment) > end:
                return False, steps
            position += len(segment)
        return True, steps


def _class_ranges(body: str) -> tuple[tuple[str, str], ...]:
    """A class body as the regex `[body]` reads it: `a-z` a range, a dash first or last a literal."""
    ranges, index = [], 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            ranges.append((body[index], body[index + 2]))
            index += 3
        else:
            ranges.append((body[index], body[index]))
            index += 1
    return tuple(ranges)


def glob_problem(glob: str) -> str | None:
    """Why `glob` cannot be a rule, or None. A [...] class becomes the same class in the regex, and both
    Python's `re` and PostgreSQL refuse a range that runs backwards (`[b--]`); PostgreSQL also refuses a
    range that starts where another ends (`[a-c-e]`), which Python would read as a range and two literals.
    A rule the database cannot compile would make every page that filters pools by it fail."""
    index = 0
    while (start := glob.find("[", index)) != -1:
        index = start + 1
        end = glob.find("]", index + 1)
        if end == -1 or not _CLASS_CHARS.match(glob[index:end]):
            continue
        body = glob[index:end].removeprefix("!")
        at = 0
        while at < len(body):
            if at + 2 < len(body) and body[at + 1] == "-":
                low, high = body[at], body[at + 2]
                if low > high:
                    return f"[{glob[index:end]}] holds the range {low}-{high}, which runs backwards"
                if at + 4 < len(body) and body[at + 3] == "-":
                    return (f"[{glob[index:end]}] holds a range that starts where the range {low}-{high} ends; "
                            "put a literal - first or last in the class")
                at += 3
            else:
                at += 1
        index = end + 1
    try:
        re.compile(glob_regex(glob))
    except re.error as exc:
        return f"it does not make a regular expression ({exc})"
    return None


def _token_matches(token, char: str) -> bool:
    if token is None:
        return True
    if isinstance(token, str):
        return token == char
    negate, ranges = token
    return any(low <= char <= high for low, high in ranges) is not negate


def anchored(regexes: Iterable[str]) -> str | None:
    """One anchored alternation, or None when there is nothing to match."""
    parts = list(dict.fromkeys(regexes))
    return "^(?:" + "|".join(parts) + ")$" if parts else None


def normalize_path(path: str) -> tuple[bool, str]:
    """(deny, glob). Seed 002 prints a path as `http:/api/profile/*` and tells users `api/pool/shared*`
    works too, so the `http:` tag is dropped and a leading slash added."""
    path = path.strip()
    deny = path.startswith("!")
    path = path.removeprefix("!").strip().removeprefix("http:")
    if not path.startswith(("/", "*")):
        path = "/" + path
    return deny, path


@dataclass(frozen=True)
class Action:
    method: str  # upper case, or "*"
    glob: str
    deny: bool
    written: str  # the path as the document wrote it, for explanations

    @classmethod
    def parse(cls, raw: dict) -> "Action":
        deny, glob = normalize_path(str(raw.get("path", "")))
        return cls(method=str(raw.get("method", "")).upper(), glob=glob, deny=deny, written=raw.get("path", ""))

    @cached_property
    def matcher(self) -> Glob:
        return Glob(self.glob)

    def covers_method(self, method: str) -> bool:
        method = "GET" if method.upper() == "HEAD" else method.upper()
        return self.method in ("*", method)

    def covers(self, method: str, path: str) -> bool:
        return self.covers_method(method) and self.matcher.match(path)

    def describe(self) -> str:
        return f"{self.method} {self.written}"


@dataclass(frozen=True)
class Grant:
    """Why a user may use a pool or make a request: the role (if any), the rule, and a sentence."""

    role: str | None
    rule: str
    reason: str

    def as_dict(self) -> dict:
        return {"role": self.role, "rule": self.rule, "reason": self.reason}


STAFF_GRANT = Grant(None, "staff", "Staff users may use every pool and every API.")
DEFAULT_GRANT = Grant(None, "default pool", "The default pool is open to every signed-in user.")


def team_of(role_name: str) -> str | None:
    """`osmo-<team>` -> `<team>` (seed 001); other role names carry no name rule."""
    team = role_name[len(TEAM_PREFIX):] if role_name.startswith(TEAM_PREFIX) else ""
    return team or None


@dataclass(frozen=True)
class RoleRules:
    name: str
    actions: tuple[Action, ...] = ()

    @classmethod
    def from_policies(cls, name: str, policies: list[dict]) -> "RoleRules":
        return cls(name, tuple(Action.parse(a) for policy in policies for a in policy.get("actions", [])))

    @cached_property
    def unusable(self) -> tuple[tuple[str, str], ...]:
        """(path as written, why) of each action whose glob no rule can use (stored before globs were checked on
        import): such a role is left out of every decision, as if not held, rather than half applied (a deny left
        out would widen it) or handed to the database (which refuses the regex: a 500 on every page)."""
        return tuple((str(a.written), problem) for a in self.actions if (problem := glob_problem(a.glob)))

    def decide(self, method: str, path: str) -> Action | None:
        """The action that allows the request; None when none does or a deny matches (deny wins)."""
        allowing = None
        for action in self.actions:
            if action.covers(method, path):
                if action.deny:
                    return None
                allowing = allowing or action
        return allowing

    def pool_grant(self, pool: str) -> Grant | None:
        pool_path = POOL_PATH + pool
        if any(a.deny and a.covers("POST", pool_path) for a in self.actions):
            return None
        team = team_of(self.name)
        if team and pool.startswith(team):
            return Grant(self.name, f"{TEAM_PREFIX}<team> name rule",
                         f"Role {self.name} grants every pool whose name begins with {team!r}.")
        action = self.decide("POST", pool_path)
        if action is not None:
            return Grant(self.name, f"policy {action.describe()}",
                         f"Role {self.name} allows POST on {action.written}, which matches {pool_path}.")
        return None

    def pool_regexes(self) -> tuple[str | None, str | None, str | None]:
        """(allowed pool paths, allowed pool names, denied pool paths) as anchored regexes, the same
        decision as `pool_grant` for the database to apply."""
        posts = [a for a in self.actions if a.covers_method("POST")]
        team = team_of(self.name)
        return (anchored(glob_regex(a.glob) for a in posts if not a.deny),
                anchored(["".join(map(_literal, team)) + ".*"]) if team else None,
                anchored(glob_regex(a.glob) for a in posts if a.deny))


def project_grant(pool: str, project: str) -> Grant:
    return Grant(None, "project member",
                 f"You are a member of project {project}, which has a quota in pool {pool}.")


def pool_grants(pool: str, roles: Iterable[RoleRules], *, staff: bool, default_open: bool,
                default_pool: str = "default", projects: Iterable[str] = ()) -> list[Grant]:
    """Every reason the user may use `pool`; empty when they may not. `projects`: the projects the user is a
    member of (by name or role) that have a quota in `pool`."""
    grants = [STAFF_GRANT] if staff else []
    if default_open and pool == default_pool:
        grants.append(DEFAULT_GRANT)
    grants += [grant for role in roles if (grant := role.pool_grant(pool)) is not None]
    grants += [project_grant(pool, project) for project in projects]
    return grants


def request_grant(method: str, path: str, roles: Iterable[RoleRules]) -> Grant | None:
    for role in roles:
        action = role.decide(method, path)
        if action is not None:
            return Grant(role.name, f"policy {action.describe()}",
                         f"Role {role.name} allows {action.describe()}.")
    return None
