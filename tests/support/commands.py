"""`manage.py` commands run in the test's own process, as the tests' one command runner."""

import io
import json
import sys

from django.core.management import call_command


def run(*args, stdin: str | None = None) -> str:
    """`manage.py ARGS` through call_command: what it printed. `stdin`, when given, is what it reads."""
    out = io.StringIO()
    if stdin is not None:
        sys_stdin, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        call_command(*args, stdout=out)
    finally:
        if stdin is not None:
            sys.stdin = sys_stdin
    return out.getvalue()


def configure(kind: str, name: str, **fields) -> str:
    """One object's fields changed as an operator changes them: `config show KIND NAME`, then `config update KIND
    NAME -f -` with `fields` changed; what the update printed."""
    document = json.loads(run("config", "show", kind, name))
    (document["pools"][name] if kind == "POOL" else document).update(fields)
    return run("config", "update", kind, name, "-f", "-", stdin=json.dumps(document))
