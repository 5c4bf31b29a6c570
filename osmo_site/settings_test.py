import hashlib
import os
from urllib.parse import urlsplit, urlunsplit

os.environ.setdefault("SECRET_KEY", "test-only-secret-key")
# The suite never reads a checkout's settings file (`make install` writes one with DEBUG=1 for the demo).
os.environ["OSMO_ENV_FILE"] = ""

from django.core.exceptions import ImproperlyConfigured

from .env import env_bool, env_str
from .services_probe import DEFAULT_POSTGRES_URL, DEFAULT_REDIS_URL, answers, private_redis

REQUIRE_SERVICES = env_bool("REQUIRE_SERVICES", False)

_pg_url = env_str("DATABASE_URL") or DEFAULT_POSTGRES_URL
if _pg_url.startswith("postgres") and not answers(_pg_url, 5432):
    if REQUIRE_SERVICES:
        raise ImproperlyConfigured(f"REQUIRE_SERVICES=1 but PostgreSQL does not answer at {_pg_url}")
    _pg_url = None
if _pg_url:
    os.environ["DATABASE_URL"] = _pg_url

from .settings import *  # noqa: E402,F403
from .settings import BASE_DIR, DATABASES  # noqa: E402

if not _pg_url:
    DATABASES["default"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
else:
    # Each checkout's test databases carry a digest of its path, so that two suites on one server (CI's clone
    # beside a developer's checkout) never create or drop each other's.
    _checkout = hashlib.sha1(str(BASE_DIR).encode()).hexdigest()[:8]
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{_checkout}"}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # Django's PostgreSQL backend, with a transactional test's clean-up by DELETE rather than TRUNCATE
        # (seconds per such test on a loaded machine): tests/support/postgresql/base.py.
        DATABASES["default"]["ENGINE"] = "tests.support.postgresql"
DATABASES["default"]["CONN_MAX_AGE"] = 0
# In-process tests share one connection per thread with pytest-django's test database; the pool is tested
# where it serves, in a real server (tests/test_serve.py).
DATABASES["default"].get("OPTIONS", {}).pop("pool", None)

# Without TEST_REDIS_URL (or REDIS_URL) the run starts a Redis of its own and hands it to every process it starts
# (xdist workers, children) through the environment; one that cannot be started leaves the local default.
_private = not (env_str("TEST_REDIS_URL") or env_str("REDIS_URL")) and env_bool("TEST_PRIVATE_REDIS", True)
if _private and (started := private_redis()):
    os.environ["TEST_REDIS_URL"] = started
TEST_REDIS_URL = env_str("TEST_REDIS_URL") or env_str("REDIS_URL") or DEFAULT_REDIS_URL
# Under pytest-xdist (`make test` runs workers gw0, gw1, ...) each worker has its own test database
# (pytest-django suffixes its name) and its own Redis database, the next ones after TEST_REDIS_URL's (of
# Redis's 16), so that no worker's Celery worker takes another worker's messages.
XDIST_WORKER = int((env_str("PYTEST_XDIST_WORKER") or "gw0").removeprefix("gw") or 0)


def redis_database(url: str, offset: int = 0) -> str:
    """`url` on its Redis database number + `offset` + this xdist worker's number (modulo 16)."""
    parts = urlsplit(url)
    number = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(number + offset + XDIST_WORKER) % 16}"))


TEST_REDIS_URL = redis_database(TEST_REDIS_URL)
REDIS_AVAILABLE = answers(TEST_REDIS_URL, 6379)
if REQUIRE_SERVICES and not REDIS_AVAILABLE:
    raise ImproperlyConfigured(f"REQUIRE_SERVICES=1 but Redis does not answer at {TEST_REDIS_URL}")

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CELERY_TASK_ALWAYS_EAGER = False
OSMO_ADMISSION_ON_COMMIT = env_bool("OSMO_ADMISSION_ON_COMMIT", False)
OSMO_ENGINE_RECONCILE_ON_COMMIT = env_bool("OSMO_ENGINE_RECONCILE_ON_COMMIT", False)
OSMO_NOTIFY_ON_COMMIT = env_bool("OSMO_NOTIFY_ON_COMMIT", False)
# The suite serves plain HTTP (the test client, live_server, servers it starts): cookies must not need HTTPS.
# Templates name static files without a manifest (nothing runs collectstatic); tests/test_deploy_settings.py
# runs the production settings.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = SECURE_SSL_REDIRECT = False
SECURE_HSTS_SECONDS = 0
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
