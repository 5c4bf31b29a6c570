"""A department or project document whose keys are not all strings (a YAML `~:` or `1:` key beside others) is
refused with a message naming the keys, never a 500 (found by the API fuzz test: `sorted` of None beside a string)."""

import pytest

from pools.engine import ConfigError
from pools.quotas.documents import department_documents


@pytest.mark.parametrize("key", [None, 1])
def test_it_refuses_keys_that_are_not_strings_by_name(key):
    with pytest.raises(ConfigError, match=f"unknown field '{key}', 'zzz'"):
        department_documents({"product": {"name": "product", key: "x", "zzz": "y"}}, None)
