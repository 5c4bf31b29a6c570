"""Serial dependencies between the groups of one OSMO workflow (pure: no Django). A group that takes inputs from
other groups' tasks waits (WAITING, OSMO's word) until every one of them has COMPLETED; it is then queued like
any other submission. When one of them ends otherwise (failed, canceled, timed out, itself skipped), the waiting
group never runs: it ends FAILED_UPSTREAM (OSMO's word), its message naming that group and how it ended."""

from dataclasses import dataclass

COMPLETED = "COMPLETED"
FINISHED_OTHERWISE = "FAILED"  # every finished status but COMPLETED starts with it


@dataclass(frozen=True)
class Verdict:
    """`wait`, `release` (queue it now) or `skip` (end it FAILED_UPSTREAM), and why, in words."""

    action: str
    message: str


def waiting_reason(groups: list[str]) -> dict:
    """The reason a WAITING workload shows (its `reasons`' one entry: no pool, since it is not queued anywhere)."""
    return {"pool": None, "code": "UPSTREAM", "message": f"Waits for {_names(groups)} of its workflow to complete.",
            "details": {"groups": list(groups)}}


def decide(groups: list[str], statuses: dict[str, str]) -> Verdict:
    """What becomes of a group waiting for `groups`, given the status of each group of its workflow (by name;
    a group missing from `statuses` was never submitted with it)."""
    for group in groups:
        status = statuses.get(group)
        if status is None:
            return Verdict("skip", f"Group {group}, whose output it takes, is not part of its workflow.")
        if status.startswith(FINISHED_OTHERWISE):
            return Verdict("skip", f"Group {group}, whose output it takes, ended {status}: it will not run.")
    waiting = [g for g in groups if statuses[g] != COMPLETED]
    if waiting:
        return Verdict("wait", waiting_reason(waiting)["message"])
    return Verdict("release", f"{_names(groups).capitalize()} completed: queued for admission.")


def _names(groups: list[str]) -> str:
    return ("group " if len(groups) == 1 else "groups ") + ", ".join(groups)
