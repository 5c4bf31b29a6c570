"""The scheduling tests' world (seed 002's pool, `training`, department `research` with `vision` and `nlp`) and
the real client on the stand-in API server."""

from tests.scheduling.conftest import researcher_api, world  # noqa: F401 (fixtures)
