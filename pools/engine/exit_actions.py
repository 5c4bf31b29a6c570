"""OSMO's exit actions (`{"COMPLETE": "0", "FAIL": "1-255", "RESCHEDULE": "137,143"}`): what a container's exit
code makes of an attempt. One reader for a pool's `default_exit_actions` and a workload's `exit_actions`."""

import re

EXIT_ACTIONS = ("COMPLETE", "FAIL", "RESCHEDULE")
_EXIT_CODES = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$", re.ASCII)


def exit_code_ranges(codes: str) -> list[tuple[int, int]]:
    """"0,1-10,137" as [(0, 0), (1, 10), (137, 137)]."""
    ranges = []
    for part in codes.replace(" ", "").split(","):
        low, _, high = part.partition("-")
        ranges.append((int(low), int(high or low)))
    return ranges


def check_exit_actions(value: dict[str, str]) -> dict[str, str]:
    """`value` as given; ValueError naming the first action that is unknown or whose codes do not read."""
    for action, codes in value.items():
        if action not in EXIT_ACTIONS:
            raise ValueError(f"unknown exit action {action!r}; use one of {', '.join(EXIT_ACTIONS)}")
        if not isinstance(codes, str) or not _EXIT_CODES.fullmatch(codes.replace(" ", "")):
            raise ValueError(f"{action}: {codes!r} is not a list of exit codes or ranges such as '1-10,137'")
        if any(high > 255 or low > high for low, high in exit_code_ranges(codes)):
            raise ValueError(f"{action}: {codes!r}: exit codes run from 0 to 255, ranges low to high")
    return value
