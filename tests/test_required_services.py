"""REQUIRE_SERVICES=1 (CI) makes a test that needs a missing service fail, whatever made it missing: the
database chosen is SQLite (`DATABASE_URL=sqlite://`) as much as PostgreSQL not answering."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_marked(tmp_path, **env: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_needs_postgres.py"
    test.write_text("import pytest\n\n\n@pytest.mark.postgres\ndef test_it_needs_postgres():\n    pass\n")
    # The suite's hooks (through a conftest beside the test, loaded once Django is set up: the suite's conftest
    # brings fixtures that import models), the suite's options from pyproject.toml, and only this one test.
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems, pytest_runtest_setup  # noqa: F401\n")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml"), str(test)],
                          cwd=ROOT, env={**os.environ, "DATABASE_URL": "sqlite://", **env}, capture_output=True,
                          text=True, timeout=300)


def test_a_postgres_test_on_sqlite_fails_when_services_are_required(tmp_path):
    done = run_marked(tmp_path, REQUIRE_SERVICES="1")  # fails in its setup: pytest counts it an error

    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 error" in done.stdout and "needs PostgreSQL, which REQUIRE_SERVICES=1 requires" in done.stdout


def test_a_postgres_test_on_sqlite_is_skipped_when_services_are_not_required(tmp_path):
    done = run_marked(tmp_path, REQUIRE_SERVICES="0")

    assert done.returncode == 0, done.stdout[-2000:]
    assert "1 skipped" in done.stdout
