"""One reader of exit actions for pool documents and workload requests."""

import pytest

from pools.engine import check_exit_actions, exit_code_ranges


def test_it_reads_codes_and_ranges():
    assert exit_code_ranges("0, 1-10,137") == [(0, 0), (1, 10), (137, 137)]
    value = {"COMPLETE": "0", "FAIL": "1-255", "RESCHEDULE": "137,143"}
    assert check_exit_actions(value) is value


@pytest.mark.parametrize(("value", "message"), [
    ({"RETRY": "1"}, "unknown exit action 'RETRY'"),
    ({"FAIL": "one"}, "FAIL: 'one' is not a list of exit codes"),
    ({"FAIL": "1-300"}, "exit codes run from 0 to 255"),
    ({"FAIL": "10-2"}, "ranges low to high"),
])
def test_it_names_what_is_wrong(value, message):
    with pytest.raises(ValueError, match=message):
        check_exit_actions(value)
