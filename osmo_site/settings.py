"""Project settings. Every value that varies by deployment comes from the environment (or, for the
variables the environment leaves unset, from the data directory's settings file `<OSMO_DATA_DIR>/env`) and
is documented in docs/operations/settings.md."""

import ipaddress

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from .env import BASE_DIR, data_dir, env_bool, env_file_path, env_int, env_list, env_str, load_env_file
from .logs import logging_config


def _json_setting(name: str) -> dict:
    """A JSON object from the environment ({} when unset); anything else stops the start with its name."""
    import json

    text = env_str(name, "") or ""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name}: expected a JSON object")
    return value

DATA_DIR = data_dir()
DATA_DIR.mkdir(parents=True, exist_ok=True)
ENV_FILE = env_file_path()
load_env_file(ENV_FILE)

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            f"SECRET_KEY must be set when DEBUG is off: in the environment or in {ENV_FILE or '<OSMO_DATA_DIR>/env'} "
            "(`make install` writes that file for the local demo)")
    SECRET_KEY = "insecure-development-key-only-used-with-DEBUG-on"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"] if DEBUG else [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc served from our origin (/api/docs/)
    "django_filters",
    "django_htmx",
    "pools",
    "scheduling",
]

MIDDLEWARE = [
    "osmo_site.logs.RequestIdMiddleware",  # the request's id on every log line, and its access line
    "osmo_site.errors.ApiErrorsMiddleware",  # JSON errors under /api/ whatever DEBUG says (no debug pages)
    "osmo_site.middleware.InputLimitsMiddleware",  # NUL in URLs (400) and oversized bodies (413), before all else
    "django.middleware.security.SecurityMiddleware",
    "osmo_site.middleware.ContentSecurityPolicyMiddleware",  # OSMO_CSP on every response
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "osmo_site.middleware.SlashEitherWayMiddleware",  # writes answer with or without the trailing slash
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "pools.access.audit.AuditMiddleware",  # the request's user or token is the actor of audit rows
    "pools.access.idp.TrustedHeaderMiddleware",
    "pools.access.scoping.AccessMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "osmo_site.urls"
WSGI_APPLICATION = "osmo_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "pools.pages.polls.live_polls",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'osmo.sqlite3'}"),
        conn_max_age=60,
    )
}
# SQLite (the embedded demo) has one writer at a time while the web server, the Celery worker and CLI commands
# all write. WAL lets readers read during a write; IMMEDIATE takes the write lock at BEGIN, so a transaction that
# read first cannot fail when it comes to write (with DEFERRED that upgrade fails at once, whatever the timeout);
# the busy timeout makes a writer wait its turn instead of answering "database is locked". The options apply to
# each new connection, so persistent ones (conn_max_age) keep them.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env_int("OSMO_SQLITE_BUSY_TIMEOUT_MS", 20_000) / 1000,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        **DATABASES["default"].get("OPTIONS", {}),
    }
# PostgreSQL connections are pooled in each process (psycopg_pool, through Django's "pool" option): a process
# holds at most OSMO_DB_POOL_MAX connections (keep it at gunicorn's threads per worker), and a request that
# finds them all busy waits up to OSMO_DB_POOL_TIMEOUT seconds for one. A burst of requests then queues in
# the pool instead of opening a connection each until PostgreSQL refuses ("too many clients"). 0 turns
# pooling off (a connection per thread, kept for 60 s).
OSMO_DB_POOL_MAX = env_int("OSMO_DB_POOL_MAX", 4)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and OSMO_DB_POOL_MAX > 0:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps connections; Django must not keep them too
    # The pool checks a connection (one empty round trip) before handing it out, so that after PostgreSQL
    # restarts no request gets one of the dead connections the pool still holds.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(env_int("OSMO_DB_POOL_MIN", 1), OSMO_DB_POOL_MAX),
        "max_size": OSMO_DB_POOL_MAX,
        "timeout": env_int("OSMO_DB_POOL_TIMEOUT", 10),
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "pools.access.signin_limit.SignInLimitBackend",  # first: refuses password guesses over the limit
    "django.contrib.auth.backends.ModelBackend",
    "pools.access.idp.TrustedHeaderBackend",
    "pools.access.oidc.OIDCBackend",
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# Access control (docs/admin/access.md).
ACCESS_DEFAULT_POOL_OPEN = env_bool("ACCESS_DEFAULT_POOL_OPEN", True)
OSMO_DEFAULT_PROJECT_OPEN = env_bool("OSMO_DEFAULT_PROJECT_OPEN", True)
# A project's members (by name or role) may use the pools where it has a quota; off: pools only by role.
OSMO_PROJECT_MEMBERS_USE_POOLS = env_bool("OSMO_PROJECT_MEMBERS_USE_POOLS", True)
ACCESS_TOKEN_MAX_DAYS = env_int("ACCESS_TOKEN_MAX_DAYS", 365)
# The login tokens (JWTs) POST /api/auth/jwt/access_token exchanges a personal token for (OSMO's CLI login).
ACCESS_LOGIN_TOKEN_SECONDS = env_int("ACCESS_LOGIN_TOKEN_SECONDS", 300)
ACCESS_HEADER_LOGIN = env_bool("ACCESS_HEADER_LOGIN", False)
# The proxy's user N signs in as <prefix>N ("idp:" keeps them apart from local accounts); a header never signs
# into a local account (one with a password, or a superuser).
ACCESS_HEADER_USER_PREFIX = env_str("ACCESS_HEADER_USER_PREFIX", "")
ACCESS_HEADER_USER = env_str("ACCESS_HEADER_USER", "X-Forwarded-User")
ACCESS_HEADER_GROUPS = env_str("ACCESS_HEADER_GROUPS", "X-Forwarded-Groups")
ACCESS_TRUSTED_PROXIES = env_list("ACCESS_TRUSTED_PROXIES", [])
try:
    [ipaddress.ip_network(_proxy, strict=False) for _proxy in ACCESS_TRUSTED_PROXIES]
except ValueError as _exc:
    raise ImproperlyConfigured(f"ACCESS_TRUSTED_PROXIES: {_exc}") from None
if ACCESS_HEADER_LOGIN and not ACCESS_TRUSTED_PROXIES:
    raise ImproperlyConfigured("ACCESS_HEADER_LOGIN=1 needs ACCESS_TRUSTED_PROXIES (the proxy's addresses)")

# OpenID Connect sign-in (docs/admin/access.md; pools.access.oidc). Off unless OIDC_ISSUER and OIDC_CLIENT_ID are
# set. The provider is found by OIDC_ISSUER's discovery document; register <site>/accounts/oidc/callback/ as
# the client's redirect URI and <site>/accounts/login/ as its post-logout redirect URI.
OIDC_ISSUER = env_str("OIDC_ISSUER", "")
OIDC_CLIENT_ID = env_str("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET", "")
OIDC_SCOPES = env_str("OIDC_SCOPES", "openid profile email groups")
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_USER_PREFIX = env_str("OIDC_USER_PREFIX", "")
OIDC_TIMEOUT = env_int("OIDC_TIMEOUT", 10)
if bool(OIDC_ISSUER) != bool(OIDC_CLIENT_ID):
    raise ImproperlyConfigured("OIDC_ISSUER and OIDC_CLIENT_ID go together: set both, or neither")
if OIDC_ISSUER and "openid" not in OIDC_SCOPES.split():
    raise ImproperlyConfigured(f"OIDC_SCOPES={OIDC_SCOPES!r} must include openid")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)

REST_FRAMEWORK = {
    # Bearer first: its WWW-Authenticate header makes anonymous API calls answer 401, not 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "pools.access.tokens.BearerAuthentication",
        "pools.access.idp.HeaderAuthentication",  # the proxy's header, per request under /api/ (no session)
        "rest_framework.authentication.SessionAuthentication",
        "pools.access.basic_auth.BasicAuthentication",  # DRF's, under the sign-in limit
    ],
    # Every view declares read_access / write_access (pools.access.scoping.Rule); undeclared means admin.
    "DEFAULT_PERMISSION_CLASSES": ["pools.access.scoping.AccessPermission"],
    "EXCEPTION_HANDLER": "pools.api.errors.exception_handler",
    # Every body is JSON, validated by one serializer (or, for configuration documents, the kind's models).
    "DEFAULT_PARSER_CLASSES": ["pools.api.parsers.JSONParser"],
    # JSON out too, to browsers as well: DRF's browsable API writes inline styles that OSMO_CSP refuses.
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "GPU pool control plane API",
    "DESCRIPTION": "Pools, platforms, nodes and configuration. CPU in cores, memory and storage in bytes.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["pools.access.scoping.AccessPermission"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {"ConfigKindEnum": "pools.models.ConfigKind",
                            "SharingEnum": "pools.models.Node.Sharing",
                            "PoolStatusEnum": ["ONLINE", "OFFLINE", "MAINTENANCE"],
                            "RoleAssignmentSourceEnum": "pools.models.RoleAssignment.Source",
                            "WorkloadStatusEnum": "scheduling.models.Status.values",
                            "WorkloadSourceEnum": "scheduling.models.Source.values",
                            "WorkloadPriorityEnum": "scheduling.models.Priority.values",
                            "WorkloadKindEnum": "scheduling.models.Kind.values",
                            "OsmoPriorityEnum": ["HIGH", "NORMAL", "LOW"]},
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "pools.api.schema.osmo_paths"],
}

# Celery: a broker that needs no server by default, kombu's SQLAlchemy transport on a SQLite file of its own under
# .data/ (osmo_site/sqlite_broker.py: one reader at a time takes a message whole); production points
# CELERY_BROKER_URL at Redis. (A `sqlite:` URL names that transport here; kombu's own `sqla+sqlite:` would
# bypass it.)
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqlite:///{DATA_DIR / 'broker.sqlite3'}")
if CELERY_BROKER_URL.startswith("sqlite:"):
    CELERY_BROKER_TRANSPORT = "osmo_site.sqlite_broker:Transport"
elif CELERY_BROKER_URL.startswith("redis://"):
    # Kombu's Redis transport with a guard that keeps the worker alive through a broker outage (osmo_site/broker.py).
    CELERY_BROKER_TRANSPORT = "osmo_site.broker:Transport"
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or None
CELERY_TASK_IGNORE_RESULT = CELERY_RESULT_BACKEND is None
CELERY_TASK_TIME_LIMIT = 300
CELERY_TASK_SOFT_TIME_LIMIT = 240
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# Queues, each served by workers of its own (`manage.py serve`, `manage.py demo`, deploy/base), so that a sync
# holding its process for most of OSMO_SYNC_INTERVAL never delays an admission cycle, a dispatch or a cancel:
# sync (cluster syncs, engine reconciles), admission (cycles, dispatches, stops), lifecycle (sweeps, usage
# snapshots, the demo's trickle). A task routed nowhere goes to Celery's default queue, which the admission
# workers also serve. OSMO_<QUEUE>_CONCURRENCY: the processes (or threads) `serve` and `demo` give each.
CELERY_TASK_ROUTES = {
    "pools.tasks.sync_backends": {"queue": "sync"},
    "pools.tasks.sync_backend": {"queue": "sync"},
    "pools.tasks.reconcile_engines": {"queue": "sync"},
    "scheduling.tasks.admission_cycle": {"queue": "admission"},
    "scheduling.tasks.dispatch_workload": {"queue": "admission"},
    "scheduling.tasks.dispatch_workloads": {"queue": "admission"},
    "scheduling.tasks.stop_workload": {"queue": "admission"},
    "scheduling.tasks.stop_workloads": {"queue": "admission"},
    "scheduling.tasks.lifecycle_sweep": {"queue": "lifecycle"},
    "scheduling.tasks.demo_trickle": {"queue": "lifecycle"},
    "scheduling.tasks.archive_logs": {"queue": "lifecycle"},
    "scheduling.tasks.sample_gpu_utilization": {"queue": "lifecycle"},
    "pools.tasks.record_usage_snapshots": {"queue": "lifecycle"},
    "scheduling.tasks.usage_rollup": {"queue": "lifecycle"},
    "scheduling.tasks.usage_prune": {"queue": "lifecycle"},
    "pools.tasks.prune_audit_log": {"queue": "lifecycle"},
    "scheduling.tasks.send_notification": {"queue": "lifecycle"},
    "scheduling.tasks.notifications_sweep": {"queue": "lifecycle"},
}
OSMO_WORKER_QUEUES = {"sync": ["sync"], "admission": ["admission", "celery"], "lifecycle": ["lifecycle"]}
OSMO_SYNC_CONCURRENCY = env_int("OSMO_SYNC_CONCURRENCY", 4)
OSMO_ADMISSION_CONCURRENCY = env_int("OSMO_ADMISSION_CONCURRENCY", 2)
OSMO_LIFECYCLE_CONCURRENCY = env_int("OSMO_LIFECYCLE_CONCURRENCY", 1)
for _name in OSMO_WORKER_QUEUES:
    if globals()[f"OSMO_{_name.upper()}_CONCURRENCY"] < 1:
        raise ImproperlyConfigured(f"OSMO_{_name.upper()}_CONCURRENCY must be 1 or more")
# Cluster sync: beat starts a sync per backend every OSMO_SYNC_INTERVAL seconds; each watches for a little
# less than that, so the watch is continuous while at most one sync runs per backend (a lease).
OSMO_SYNC_INTERVAL = env_int("OSMO_SYNC_INTERVAL", 30)
# Beat also starts a sync round of each backend at its own start (pools.tasks.sync_at_beat_start), so that after a
# deploy or `make demo` the clusters are followed at once instead of one OSMO_SYNC_INTERVAL later.
OSMO_SYNC_AT_START = env_bool("OSMO_SYNC_AT_START", True)
# The watches miss changes if the cluster's resourceVersions went backwards unnoticed: list in full this often anyway.
OSMO_RELIST_SECONDS = env_int("OSMO_RELIST_SECONDS", 600)
# A backend without a good sync for this long shows its nodes Unknown and its pools OFFLINE.
OSMO_BACKEND_STALE_SECONDS = env_int("OSMO_BACKEND_STALE_SECONDS", 300)
# Node labels written by `label node`, `create -f` and pool selectors carry this prefix (gpuctl's default).
OSMO_LABEL_PREFIX = env_str("OSMO_LABEL_PREFIX", "runwhere.ai/")
OSMO_SIMULATED_STATE_DIR = DATA_DIR / "simulated"
# The pages chart each pool's GPUs over 24 hours from snapshots taken this often and kept this long.
OSMO_USAGE_SNAPSHOT_INTERVAL = env_int("OSMO_USAGE_SNAPSHOT_INTERVAL", 600)
OSMO_USAGE_SNAPSHOT_KEEP_DAYS = env_int("OSMO_USAGE_SNAPSHOT_KEEP_DAYS", 7)
# A node's events (appeared, status, cordon, pools, left: its page and `describe node`) are kept this long.
OSMO_NODE_EVENTS_KEEP_DAYS = env_int("OSMO_NODE_EVENTS_KEEP_DAYS", 7)
# How often the pages' live regions ask the server again (htmx "every ..." triggers, pools.pages.polls), in ms: the
# tables, cards and figures, a workload's status; a followed log; a log panel still waiting for its pod. And how long
# the new-workload form waits after a change before its dry run (several changes in a row make one). Not read from
# the environment: the browser tests shorten them (tests/browser/conftest.py) so that a change is on screen sooner;
# the page shows the same thing either way.
LIVE_POLL_MS = 5000
LOG_POLL_MS = 2000
LOG_WAIT_MS = 5000
DRY_RUN_DELAY_MS = 300

CELERY_BEAT_SCHEDULE = {
    "sync-backends": {
        "task": "pools.tasks.sync_backends",
        "schedule": float(OSMO_SYNC_INTERVAL),
    },
    "record-usage-snapshots": {
        "task": "pools.tasks.record_usage_snapshots",
        "schedule": float(OSMO_USAGE_SNAPSHOT_INTERVAL),
    },
}

# Logs (osmo_site.logs): plain text or, with LOG_FORMAT=json, one JSON object per line; every line of a request
# or task carries its id. Celery keeps this configuration instead of installing its own handlers.
LOG_FORMAT = env_str("LOG_FORMAT", "plain").lower()
LOGGING = logging_config(LOG_FORMAT, env_str("LOG_LEVEL", "INFO"))
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

if not DEBUG:
    SESSION_COOKIE_HTTPONLY = True
    CSRF_COOKIE_HTTPONLY = False
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        # Hashed names (served with a far-future expiry) from a manifest: `manage.py collectstatic` must run first.
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }

# Engines (pools.schedulers): the objects of KAI and Kueue backends are reconciled once a pool, template,
# department or project write commits (unless OSMO_ENGINE_RECONCILE_ON_COMMIT is off) and every
# OSMO_ENGINE_RECONCILE_INTERVAL s.
OSMO_ENGINE_RECONCILE_INTERVAL = env_int("OSMO_ENGINE_RECONCILE_INTERVAL", 60)
OSMO_ENGINE_RECONCILE_ON_COMMIT = env_bool("OSMO_ENGINE_RECONCILE_ON_COMMIT", True)
# The audit log (pools.models.audit, docs/admin/audit.md) keeps rows this many days; beat prunes older ones hourly
# (and leaves a row saying so).
OSMO_AUDIT_DAYS = env_int("OSMO_AUDIT_DAYS", 365)
CELERY_BEAT_SCHEDULE["prune-audit-log"] = {"task": "pools.tasks.prune_audit_log", "schedule": 3600.0}
CELERY_BEAT_SCHEDULE["reconcile-engines"] = {
    "task": "pools.tasks.reconcile_engines",
    "schedule": float(OSMO_ENGINE_RECONCILE_INTERVAL),
}

# Admission (scheduling): beat runs a cycle this often; submits, cancels and finishes also ask for one on
# commit (debounced to one per second per process), and admissions and stops send their dispatch and stop
# messages on commit, unless OSMO_ADMISSION_ON_COMMIT is off.
OSMO_ADMISSION_INTERVAL = env_int("OSMO_ADMISSION_INTERVAL", 5)
OSMO_ADMISSION_ON_COMMIT = env_bool("OSMO_ADMISSION_ON_COMMIT", True)
CELERY_BEAT_SCHEDULE["admission-cycle"] = {
    "task": "scheduling.tasks.admission_cycle",
    "schedule": float(OSMO_ADMISSION_INTERVAL),
}
# Dispatch and lifecycle (scheduling.run.dispatch, follow, stopping, sweeps): a Job lives this long after it
# finishes, and a priority may name a PriorityClass ("high=osmo-high,low=osmo-preemptible"). Every
# OSMO_LIFECYCLE_INTERVAL seconds beat sweeps: ADMITTED rows older than OSMO_DISPATCH_RETRY_SECONDS are sent
# again, stops likewise, timeouts are enforced and dispatched workloads re-read. RESCHEDULE starts at most
# OSMO_MAX_RETRIES new attempts; an image that cannot be pulled for OSMO_IMAGE_PULL_TIMEOUT seconds fails, and so
# does a Job whose pods the API server refuses (FailedCreate Events) for OSMO_CREATE_FAILURE_TIMEOUT seconds.
OSMO_JOB_TTL_SECONDS = env_int("OSMO_JOB_TTL_SECONDS", 86400)
# The image of an OSMO task's data copy steps (its inputs downloaded, its output uploaded: scheduling.specs.task_data).
# Any image with python3 runs them (the copy uses the standard library only).
OSMO_DATA_COPY_IMAGE = env_str("OSMO_DATA_COPY_IMAGE", "python:3.12-alpine")
# Logs (issue 26): when an attempt ends, the last OSMO_LOG_ARCHIVE_BYTES of each replica's log are kept in the
# database. A followed log holds a web worker thread for OSMO_LOG_FOLLOW_SECONDS at most, then ends with a resume
# marker (clients follow on from there). A read answers at most OSMO_LOG_READ_BYTES (the newest) and
# OSMO_LOG_TAIL_MAX lines.
OSMO_LOG_ARCHIVE_BYTES = env_int("OSMO_LOG_ARCHIVE_BYTES", 256 * 1024)
OSMO_LOG_FOLLOW_SECONDS = env_int("OSMO_LOG_FOLLOW_SECONDS", 300)
# A web door's follow asks again this often whether its reader may still read the log (a revoked or expired token,
# a deactivated account, a lost role end it): the cluster's stream is reopened from the last line each time.
OSMO_LOG_FOLLOW_RECHECK_SECONDS = env_int("OSMO_LOG_FOLLOW_RECHECK_SECONDS", 5)
# Follows open at once (issue 42), each holding a web thread: at most OSMO_LOG_FOLLOWS_PER_PROCESS in one web process
# (default half its threads, so the other half always serves the rest of the site) and OSMO_LOG_FOLLOWS_PER_USER of
# one user across the site (counted in the database); beyond either, a 429 with Retry-After. 0 turns a limit off.
OSMO_LOG_FOLLOWS_PER_PROCESS = env_int("OSMO_LOG_FOLLOWS_PER_PROCESS",
                                       max(1, env_int("WEB_THREADS", OSMO_DB_POOL_MAX or 4) // 2))
OSMO_LOG_FOLLOWS_PER_USER = env_int("OSMO_LOG_FOLLOWS_PER_USER", 2)
OSMO_LOG_READ_BYTES = env_int("OSMO_LOG_READ_BYTES", 8 * 1024 * 1024)
OSMO_LOG_TAIL_MAX = env_int("OSMO_LOG_TAIL_MAX", 100_000)
OSMO_PRIORITY_CLASSES = dict(item.split("=", 1) for item in env_list("OSMO_PRIORITY_CLASSES", []) if "=" in item)
# KAI backends: the PriorityClass of KAI's for each of our priorities (KAI ships train 50 and build-preemptible
# 75, preemptible, and build 100 and inference 125, limited to in-quota resources).
OSMO_KAI_PRIORITY_CLASSES = {"high": "inference", "normal": "build", "low": "train", **dict(
    item.split("=", 1) for item in env_list("OSMO_KAI_PRIORITY_CLASSES", []) if "=" in item)}
# Issue 43. The link of a notebook or inference: {"pool/NAME" or "backend/NAME": {host, path, tls_secret,
# ingress_class, annotations}} (docs/admin/links.md); none for its pool or backend: the port-forward line.
OSMO_LINK_TEMPLATES = _json_setting("OSMO_LINK_TEMPLATES")
# Stopping idle notebooks: {"pool/NAME" or "project/NAME": {"under_percent", "minutes", "max_lifetime_hours"}}
# (docs/admin/idle-notebooks.md); a project's rule wins over its pool's.
OSMO_NOTEBOOK_IDLE_RULES = _json_setting("OSMO_NOTEBOOK_IDLE_RULES")
OSMO_DISPATCH_RETRY_SECONDS = env_int("OSMO_DISPATCH_RETRY_SECONDS", 30)
# How many dispatches of a batch a worker has in flight on the cluster at once (threads per worker process, the
# rows still read and written by the task's own thread, in order): an API server answers each create in a few
# milliseconds, so one at a time leaves a worker waiting most of its time. 1: one after the other.
OSMO_DISPATCH_THREADS = max(1, env_int("OSMO_DISPATCH_THREADS", 4))
OSMO_LIFECYCLE_INTERVAL = env_int("OSMO_LIFECYCLE_INTERVAL", 10)
OSMO_MAX_RETRIES = env_int("OSMO_MAX_RETRIES", 3)
OSMO_IMAGE_PULL_TIMEOUT = env_int("OSMO_IMAGE_PULL_TIMEOUT", 300)
# A pod pinned to its planned nodes that finds no node for this many seconds ends the attempt (admitted again).
OSMO_PLACEMENT_GRACE = env_int("OSMO_PLACEMENT_GRACE", 120)
OSMO_CREATE_FAILURE_TIMEOUT = env_int("OSMO_CREATE_FAILURE_TIMEOUT", 300)
# Usage accounting (issue 27): beat observes pods into usage intervals and rolls them up hourly every
# OSMO_USAGE_INTERVAL seconds; raw intervals are kept OSMO_USAGE_INTERVAL_DAYS, hourly rows
# OSMO_USAGE_BUCKET_DAYS (0: for ever); a report spans at most OSMO_USAGE_MAX_DAYS.
OSMO_USAGE_INTERVAL = env_int("OSMO_USAGE_INTERVAL", 60)
OSMO_USAGE_INTERVAL_DAYS = env_int("OSMO_USAGE_INTERVAL_DAYS", 90)
OSMO_USAGE_BUCKET_DAYS = env_int("OSMO_USAGE_BUCKET_DAYS", 0)
OSMO_USAGE_MAX_DAYS = env_int("OSMO_USAGE_MAX_DAYS", 400)
CELERY_BEAT_SCHEDULE["usage-rollup"] = {"task": "scheduling.tasks.usage_rollup", "schedule": float(OSMO_USAGE_INTERVAL)}
CELERY_BEAT_SCHEDULE["usage-prune"] = {"task": "scheduling.tasks.usage_prune", "schedule": 3600.0}
CELERY_BEAT_SCHEDULE["lifecycle-sweep"] = {
    "task": "scheduling.tasks.lifecycle_sweep",
    "schedule": float(OSMO_LIFECYCLE_INTERVAL),
}
# Notifications (scheduling.run.notify, README "Notifications"): each user's choice of transitions, sent to a
# webhook and/or by mail. Sends time out after OSMO_NOTIFY_TIMEOUT seconds and are tried OSMO_NOTIFY_MAX_TRIES
# times with back-off (OSMO_NOTIFY_BACKOFF_SECONDS doubling, at most an hour); a send's claim is taken over after
# OSMO_NOTIFY_CLAIM_SECONDS (above the send task's 60 s hard limit). Beat sweeps every OSMO_NOTIFY_INTERVAL
# seconds (stuck-pending checks and unsent rows). Webhooks may not reach private, loopback or link-local
# addresses unless their host (name, address or CIDR) is in OSMO_NOTIFY_ALLOWED_HOSTS.
OSMO_NOTIFY_TIMEOUT = env_int("OSMO_NOTIFY_TIMEOUT", 5)
OSMO_NOTIFY_MAX_TRIES = env_int("OSMO_NOTIFY_MAX_TRIES", 8)
OSMO_NOTIFY_BACKOFF_SECONDS = env_int("OSMO_NOTIFY_BACKOFF_SECONDS", 30)
OSMO_NOTIFY_CLAIM_SECONDS = env_int("OSMO_NOTIFY_CLAIM_SECONDS", 120)
OSMO_NOTIFY_INTERVAL = env_int("OSMO_NOTIFY_INTERVAL", 60)
OSMO_NOTIFY_ON_COMMIT = env_bool("OSMO_NOTIFY_ON_COMMIT", True)
OSMO_NOTIFY_ALLOWED_HOSTS = env_list("OSMO_NOTIFY_ALLOWED_HOSTS", [])
if OSMO_NOTIFY_CLAIM_SECONDS <= 60:
    raise ImproperlyConfigured("OSMO_NOTIFY_CLAIM_SECONDS must be above 60 (the send task's hard time limit)")
CELERY_BEAT_SCHEDULE["notifications-sweep"] = {"task": "scheduling.tasks.notifications_sweep",
                                               "schedule": float(OSMO_NOTIFY_INTERVAL)}
# Mail (Django's settings): EMAIL_BACKEND (SMTP by default; "django.core.mail.backends.console.EmailBackend" prints),
# EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER, EMAIL_HOST_PASSWORD, EMAIL_USE_TLS / EMAIL_USE_SSL, EMAIL_TIMEOUT and
# DEFAULT_FROM_EMAIL.
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.smtp.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", False)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "osmo@localhost")

# The demo's trickle of submissions, every this many seconds (0: off; `make
# demo` sets 15). Never turn it on in production: it submits workloads as the first superuser.
OSMO_DEMO_TRICKLE = env_int("OSMO_DEMO_TRICKLE", 0)
if OSMO_DEMO_TRICKLE > 0:
    CELERY_BEAT_SCHEDULE["demo-trickle"] = {"task": "scheduling.tasks.demo_trickle",
                                            "schedule": float(OSMO_DEMO_TRICKLE)}

# GPU utilization (scheduling.run.utilization, README "GPU utilization"): with OSMO_PROMETHEUS_URL set (the base URL
# of a Prometheus that scrapes NVIDIA's DCGM exporter; `simulated://dcgm` in the demo), beat reads each running
# workload's GPU utilization every OSMO_UTILIZATION_INTERVAL seconds, averaged over OSMO_UTILIZATION_WINDOW_MINUTES,
# each query answered within OSMO_PROMETHEUS_TIMEOUT seconds and OSMO_PROMETHEUS_MAX_BYTES. A workload whose every
# GPU stayed under OSMO_IDLE_GPU_PERCENT for OSMO_IDLE_GPU_MINUTES is listed as idle. Unset: "not measured".
OSMO_PROMETHEUS_URL = env_str("OSMO_PROMETHEUS_URL", "").strip()
if OSMO_PROMETHEUS_URL and not OSMO_PROMETHEUS_URL.startswith(("http://", "https://", "simulated://")):
    raise ImproperlyConfigured(f"OSMO_PROMETHEUS_URL={OSMO_PROMETHEUS_URL!r}: expected an http:// or https:// URL")
OSMO_PROMETHEUS_TIMEOUT = env_int("OSMO_PROMETHEUS_TIMEOUT", 5)
OSMO_PROMETHEUS_MAX_BYTES = env_int("OSMO_PROMETHEUS_MAX_BYTES", 16 * 1024 * 1024)
OSMO_UTILIZATION_INTERVAL = env_int("OSMO_UTILIZATION_INTERVAL", 60)
OSMO_UTILIZATION_WINDOW_MINUTES = env_int("OSMO_UTILIZATION_WINDOW_MINUTES", 10)
OSMO_IDLE_GPU_PERCENT = env_int("OSMO_IDLE_GPU_PERCENT", 5)
OSMO_IDLE_GPU_MINUTES = env_int("OSMO_IDLE_GPU_MINUTES", 60)
for _name in ("OSMO_PROMETHEUS_TIMEOUT", "OSMO_PROMETHEUS_MAX_BYTES", "OSMO_UTILIZATION_INTERVAL",
              "OSMO_UTILIZATION_WINDOW_MINUTES", "OSMO_IDLE_GPU_MINUTES"):
    if globals()[_name] < 1:
        raise ImproperlyConfigured(f"{_name} must be 1 or more")
if OSMO_PROMETHEUS_URL:
    CELERY_BEAT_SCHEDULE["sample-gpu-utilization"] = {"task": "scheduling.tasks.sample_gpu_utilization",
                                                      "schedule": float(OSMO_UTILIZATION_INTERVAL)}

# Input limits (pools.engine.jsonread): the largest JSON body, admin JSON field or CLI file (413 above it) and
# the deepest nesting accepted (400 deeper).
OSMO_JSON_MAX_BYTES = env_int("OSMO_JSON_MAX_BYTES", 2 * 1024 * 1024)
OSMO_JSON_MAX_DEPTH = env_int("OSMO_JSON_MAX_DEPTH", 64)
# A YAML document (a workflow or job file, a config file) with its aliases expanded: characters plus nodes.
OSMO_YAML_MAX_EXPANDED = env_int("OSMO_YAML_MAX_EXPANDED", 4 * 1024 * 1024)
# Rendering budgets (pools.engine.sandbox), checked while a template renders: the text it writes, any one value
# it makes (characters or items), integers' digits, all it makes together, and its time. Over one: a 400 naming it.
OSMO_RENDER_MAX_OUTPUT = env_int("OSMO_RENDER_MAX_OUTPUT", 1_000_000)
OSMO_RENDER_MAX_VALUE = env_int("OSMO_RENDER_MAX_VALUE", 1_000_000)
OSMO_RENDER_MAX_INT_DIGITS = env_int("OSMO_RENDER_MAX_INT_DIGITS", 1000)
OSMO_RENDER_MAX_WORK = env_int("OSMO_RENDER_MAX_WORK", 10_000_000)
OSMO_RENDER_MAX_SECONDS = env_int("OSMO_RENDER_MAX_SECONDS", 1)
# The time is read between operations, not inside one: a call whose time grows faster than its input (reverse
# searches, wordwrap) is refused above this many characters.
OSMO_RENDER_MAX_SLOW_INPUT = env_int("OSMO_RENDER_MAX_SLOW_INPUT", 10_000)
# A workload's stored request, variables and rendered templates together, as JSON (400 above it).
OSMO_WORKLOAD_MAX_STORED_BYTES = env_int("OSMO_WORKLOAD_MAX_STORED_BYTES", 512 * 1024)

# Submission limits (scheduling.submit.limits, docs/operations/limits.md): a project's document may set its own.
OSMO_MAX_LIVE_WORKLOADS_PER_USER = env_int("OSMO_MAX_LIVE_WORKLOADS_PER_USER", 200)
OSMO_MAX_LIVE_WORKLOADS_PER_PROJECT = env_int("OSMO_MAX_LIVE_WORKLOADS_PER_PROJECT", 1000)
OSMO_MAX_TASKS_PER_WORKFLOW = env_int("OSMO_MAX_TASKS_PER_WORKFLOW", 100)
# Ceilings on one OSMO workflow file, counted before any group is read (not raised by a project's limits).
OSMO_MAX_WORKFLOW_TASKS = env_int("OSMO_MAX_WORKFLOW_TASKS", 1000)
OSMO_MAX_TASKS_PER_GROUP = env_int("OSMO_MAX_TASKS_PER_GROUP", 512)
OSMO_MAX_GROUP_FILE_BYTES = env_int("OSMO_MAX_GROUP_FILE_BYTES", 256 * 1024)
OSMO_MAX_REPLICAS = env_int("OSMO_MAX_REPLICAS", 128)
OSMO_MAX_ENV_ENTRIES = env_int("OSMO_MAX_ENV_ENTRIES", 100)
OSMO_MAX_COMMAND_BYTES = env_int("OSMO_MAX_COMMAND_BYTES", 65536)
OSMO_MAX_POOLS_PER_REQUEST = env_int("OSMO_MAX_POOLS_PER_REQUEST", 20)
OSMO_SUBMISSIONS_PER_MINUTE = env_int("OSMO_SUBMISSIONS_PER_MINUTE", 60)  # per user; 0: no limit
OSMO_SUBMISSION_MAX_BYTES = env_int("OSMO_SUBMISSION_MAX_BYTES", 256 * 1024)

# Health and metrics (osmo_site.health, docs/operations/monitoring.md): /readyz waits at most OSMO_READY_TIMEOUT
# seconds for each of the database and the broker. /metrics answers a scrape with
# `Authorization: Bearer <OSMO_METRICS_TOKEN>` or from an address of OSMO_METRICS_ALLOWED_ADDRESSES (IPs or
# CIDRs, against REMOTE_ADDR); with neither set it is off (404).
OSMO_READY_TIMEOUT = env_int("OSMO_READY_TIMEOUT", 2)
OSMO_METRICS_TOKEN = env_str("OSMO_METRICS_TOKEN", "")
OSMO_METRICS_ALLOWED_ADDRESSES = env_list("OSMO_METRICS_ALLOWED_ADDRESSES", [])
try:
    [ipaddress.ip_network(_address, strict=False) for _address in OSMO_METRICS_ALLOWED_ADDRESSES]
except ValueError as _exc:
    raise ImproperlyConfigured(f"OSMO_METRICS_ALLOWED_ADDRESSES: {_exc}") from None

# HTTPS and hardening (docs/operations/https.md). Behind a proxy that terminates TLS, SECURE_PROXY_SSL_HEADER names the
# header by which it says so ("HTTP_X_FORWARDED_PROTO=https"), else Django takes every request for plain HTTP:
# the redirect would loop and the CSRF origin check refuse every form. Secure cookies are on unless DEBUG is.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
# HSTS pins the host name to HTTPS in browsers for this long, which cannot be taken back before it runs out: on
# by default (a year) only where plain HTTP is redirected anyway. Subdomains and preloading reach beyond this
# host, so they are the operator's call.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000 if SECURE_SSL_REDIRECT else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
_ssl_header = (env_str("SECURE_PROXY_SSL_HEADER", "") or "").strip()
if _ssl_header:
    _name, _sep, _value = _ssl_header.partition("=")
    _name = _name.strip().upper().replace("-", "_")
    if not _sep or not _name or not _value.strip():
        raise ImproperlyConfigured(f"SECURE_PROXY_SSL_HEADER={_ssl_header!r}: expected HEADER=VALUE, "
                                   "such as HTTP_X_FORWARDED_PROTO=https")
    SECURE_PROXY_SSL_HEADER = (_name if _name.startswith("HTTP_") else "HTTP_" + _name, _value.strip())
else:
    SECURE_PROXY_SSL_HEADER = None
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
SECURE_CONTENT_TYPE_NOSNIFF = env_bool("SECURE_CONTENT_TYPE_NOSNIFF", True)
X_FRAME_OPTIONS = (env_str("X_FRAME_OPTIONS", "DENY") or "").upper()
if X_FRAME_OPTIONS not in ("DENY", "SAMEORIGIN"):
    raise ImproperlyConfigured(f"X_FRAME_OPTIONS={X_FRAME_OPTIONS!r}: use DENY or SAMEORIGIN")
SECURE_REFERRER_POLICY = env_str("SECURE_REFERRER_POLICY", "same-origin")
# Content-Security-Policy of every response (osmo_site.middleware); empty: no header. The pages hold no inline
# script, style or handler; the admin's and the pages' images include data: URIs (icons in the CSS).
OSMO_CSP = env_str("OSMO_CSP", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "font-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'self'; "
                               "form-action 'self'; object-src 'none'")
# Password guessing (pools.access.signin_limit): this many failed sign-ins for one user name from one address
# start a back-off (doubling from OSMO_LOGIN_BACKOFF_SECONDS, at most the window) for that pair; as many from one
# address across names refuse it until they age out; 0 turns a limit off.
OSMO_LOGIN_MAX_FAILURES = env_int("OSMO_LOGIN_MAX_FAILURES", 5)
OSMO_LOGIN_BACKOFF_SECONDS = env_int("OSMO_LOGIN_BACKOFF_SECONDS", 60)
OSMO_LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("OSMO_LOGIN_MAX_FAILURES_PER_ADDRESS", 20)
OSMO_LOGIN_LOCKOUT_SECONDS = env_int("OSMO_LOGIN_LOCKOUT_SECONDS", 900)
