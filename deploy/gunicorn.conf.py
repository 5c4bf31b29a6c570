"""gunicorn's settings for the web process (docs/operations/scaling.md): `gunicorn -c deploy/gunicorn.conf.py`.

Workers are processes, each with threads (gthread, with requests read before a thread takes them:
osmo_site/web_worker.py): a request that waits on PostgreSQL or the API server holds a thread, not a process.
Each worker pools at most OSMO_DB_POOL_MAX database connections, so keep that at the thread count: PostgreSQL
then sees at most workers x threads connections from the web, whatever the load.
"""

import os

bind = f"{os.environ.get('HOST', '0.0.0.0')}:{os.environ.get('PORT', '8000')}"
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
threads = int(os.environ.get("WEB_THREADS", os.environ.get("OSMO_DB_POOL_MAX", "4")))
# gthread, with each request's head (and a body of up to WEB_BUFFER_BYTES) read on the worker's event loop before a
# thread takes it, within WEB_HEADER_TIMEOUT (10) and WEB_BODY_TIMEOUT (30) seconds: a slow client holds no thread.
worker_class = "osmo_site.web_worker.HeadFirstWorker"
timeout = int(os.environ.get("WEB_TIMEOUT", "60"))  # a request running longer is killed and its worker restarted
graceful_timeout = 30
keepalive = 5
# Workers are not recycled by default: a worker that restarts closes its clients' keep-alive connections, which
# they see as reset connections (36 of 15,283 requests under wrk at 2,000 requests a worker, and a third of the
# throughput). WEB_MAX_REQUESTS > 0 recycles a worker after about that many requests, should memory ever creep.
max_requests = int(os.environ.get("WEB_MAX_REQUESTS", "0"))
max_requests_jitter = max_requests // 10
# The app logs one access line per request itself (osmo_site.logs), with the request id; gunicorn's own lines
# (start, stop, worker timeouts) go to stderr in the same format.
accesslog = None
errorlog = "-"
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
# X-Forwarded-* headers are believed from these addresses only (the ingress or proxy in front).
forwarded_allow_ips = os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1")

if os.environ.get("LOG_FORMAT", "plain").lower() == "json":
    # gunicorn merges this over its defaults key by key, so the handlers its default root logger names are
    # defined here too.
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "osmo_site.logs.JsonFormatter"}},
        "handlers": {
            "console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"},
            "error_console": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"},
        },
        "root": {"level": loglevel.upper(), "handlers": ["console"]},
        "loggers": {"gunicorn.error": {"handlers": ["error_console"], "level": loglevel.upper(),
                                       "propagate": False}},
    }
