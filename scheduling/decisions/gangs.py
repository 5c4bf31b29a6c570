"""The members of a group of differing shapes end together (pure: no Django; docs/architecture/decisions.md, "A
group of differing shapes").

An OSMO group whose tasks differ in image or resource runs as one workload per shape, its members, admitted as one
gang (`scheduling.decisions.admission`). Each member's Job is followed on its own; `settle` answers what the
others must do once one of them has moved on, as one Job's pods would:

- the lead's member (member 0) completed: the others stop as COMPLETED (the lead decides the group's end, as in
  OSMO; a member that is not the lead completing changes nothing);
- a member ended any other way (failed, canceled, timed out): the others end the same way, FAILED for a failure;
- a member starts again (its attempt is newer: evicted, preempted, an exit code asking for it): the others stop and
  start again with it, so that admission starts the gang whole again;
- a member that ended in an older attempt cannot start again: those waiting to start again fail.
"""

from dataclasses import dataclass

COMPLETED, FAILED, CANCELED, RESCHEDULE = "COMPLETED", "FAILED", "FAILED_CANCELED", "RESCHEDULE"


@dataclass(frozen=True)
class Member:
    id: str
    index: int  # its place in the gang: 0 holds the lead
    tasks: tuple[str, ...]
    status: str
    attempt: int
    alive: bool  # not ended
    stopping: bool = False  # a stop is already on its way


@dataclass(frozen=True)
class Stop:
    id: str
    status: str  # a final status, or RESCHEDULE
    reason: str
    message: str


def _part(member: Member) -> str:
    return f"task{'s' if len(member.tasks) > 1 else ''} {', '.join(member.tasks)}"


def settle(group: str, members: list[Member]) -> list[Stop]:
    """What each member that must follow another does now; [] when the gang agrees."""
    if len(members) < 2:
        return []
    current = max(m.attempt for m in members)
    movable = [m for m in members if m.alive and not m.stopping]
    behind = [m for m in movable if m.attempt < current]
    if behind:
        return [Stop(m.id, RESCHEDULE, "GANG_RESCHEDULED",
                     f"Another part of group {group} starts again as attempt {current}; {_part(m)} start again "
                     "with it: the group starts whole.") for m in behind]
    gone = [m for m in members if not m.alive and m.attempt < current]
    if gone:
        ended = gone[0]
        return [Stop(m.id, FAILED, "GANG_BROKEN",
                     f"Group {group} cannot start again whole: {_part(ended)} ended as {ended.status} in attempt "
                     f"{ended.attempt}.") for m in movable]
    ended = [m for m in members if not m.alive and m.attempt == current]
    failed = next((m for m in ended if m.status != COMPLETED), None)
    if failed is not None:
        status = CANCELED if failed.status == CANCELED else FAILED
        return [Stop(m.id, status, "GANG_ENDED", f"{_part(failed).capitalize()} of group {group} ended as "
                                                 f"{failed.status}; the group ends with it.") for m in movable]
    lead = next((m for m in ended if m.index == 0), None)
    if lead is not None:
        return [Stop(m.id, COMPLETED, "LEAD_COMPLETED", f"The lead's {_part(lead)} of group {group} completed; the "
                                                        "group ends with it.") for m in movable]
    return []
