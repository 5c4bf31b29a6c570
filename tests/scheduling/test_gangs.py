"""The members of a group of differing shapes end and start again together (scheduling.decisions.gangs, pure)."""

from scheduling.decisions.gangs import Member, settle


def member(index, status="RUNNING", attempt=1, stopping=False, tasks=None):
    alive = status in ("PENDING", "WAITING", "ADMITTED", "PREEMPTING", "SCHEDULING", "RUNNING")
    return Member(f"m{index}", index, tuple(tasks or [f"t{index}"]), status, attempt, alive, stopping)


def test_a_gang_that_agrees_is_left_alone():
    assert settle("g", [member(0), member(1), member(2)]) == []
    assert settle("g", [member(0, "COMPLETED"), member(1, "COMPLETED")]) == []
    assert settle("g", [member(0)]) == []


def test_the_leads_completion_ends_the_others_as_completed_and_another_members_does_not():
    stops = settle("g", [member(0, "COMPLETED"), member(1), member(2, "SCHEDULING")])
    assert [(s.id, s.status, s.reason) for s in stops] == [("m1", "COMPLETED", "LEAD_COMPLETED"),
                                                            ("m2", "COMPLETED", "LEAD_COMPLETED")]
    assert stops[0].message == "The lead's task t0 of group g completed; the group ends with it."
    assert settle("g", [member(0), member(1, "COMPLETED")]) == []


def test_a_failure_or_cancel_of_any_member_ends_the_others_the_same_way():
    stops = settle("g", [member(0), member(1, "FAILED_IMAGE_PULL", tasks=["a", "b"])])
    assert [(s.id, s.status, s.reason) for s in stops] == [("m0", "FAILED", "GANG_ENDED")]
    assert stops[0].message == "Tasks a, b of group g ended as FAILED_IMAGE_PULL; the group ends with it."
    stops = settle("g", [member(0, "FAILED_CANCELED"), member(1, "PENDING")])
    assert [(s.id, s.status) for s in stops] == [("m1", "FAILED_CANCELED")]


def test_a_stop_on_its_way_is_not_asked_again():
    assert settle("g", [member(0, "FAILED"), member(1, stopping=True)]) == []


def test_a_member_starting_again_takes_the_others_with_it_and_a_finished_one_breaks_the_gang():
    stops = settle("g", [member(0, "PENDING", attempt=2), member(1, "RUNNING", attempt=1)])
    assert [(s.id, s.status, s.reason) for s in stops] == [("m1", "RESCHEDULE", "GANG_RESCHEDULED")]
    stops = settle("g", [member(0, "PENDING", attempt=2), member(1, "COMPLETED", attempt=1)])
    assert [(s.id, s.status, s.reason) for s in stops] == [("m0", "FAILED", "GANG_BROKEN")]
    assert settle("g", [member(0, "PENDING", attempt=2), member(1, "PENDING", attempt=2)]) == []
