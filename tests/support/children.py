"""What a process of ours that a test starts needs to reach the test's database."""

import os

from django.db import connection


def database_url() -> str:
    """The test database (PostgreSQL) as a DATABASE_URL."""
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a `manage.py` process against the test database: debug settings, no .env file, no
    admission on commit; `extra` adds or overrides."""
    return {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "DEBUG": "1",
            "OSMO_ENV_FILE": "", "OSMO_ADMISSION_ON_COMMIT": "0", **extra}
