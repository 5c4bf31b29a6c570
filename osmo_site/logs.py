"""Logs an operator can follow (docs/operations): one access line per request, and every line of a request (or of a
Celery task) carrying its id, as plain text or, with LOG_FORMAT=json, as one JSON object per line.

The id comes from the caller's `X-Request-ID` when it is a plain token (a proxy's or load balancer's id, so the
two logs join), else a new one; the answer carries it back in `X-Request-ID`. It lives in a context variable, so
threads of one process (gunicorn's gthread workers, the development server) never mix ids. A Celery task's lines
carry `task:<task id>` (osmo_site.celery).
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime

from django.core.exceptions import ImproperlyConfigured

request_id: ContextVar[str] = ContextVar("request_id", default="-")

_CALLER_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
access_log = logging.getLogger("osmo.access")

# Attributes every LogRecord has; anything else on a record was passed in `extra` and goes into the JSON line.
_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "request_id"}


class RequestIdFilter(logging.Filter):
    """Puts the current request's (or task's) id on every record, as `record.request_id`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id, the record's extra
    fields, and the traceback as one string under `exc` (never spread over lines)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", request_id.get()),
        }
        line.update({key: value for key, value in vars(record).items() if key not in _STANDARD})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def logging_config(log_format: str, level: str) -> dict:
    """Django's LOGGING for LOG_FORMAT `plain` (the default) or `json`."""
    if log_format not in ("plain", "json"):
        raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, not {log_format!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": "osmo_site.logs.RequestIdFilter"}},
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s]: %(message)s"},
            "json": {"()": "osmo_site.logs.JsonFormatter"},
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": log_format,
                                 "filters": ["request_id"]}},
        "root": {"handlers": ["console"], "level": level},
    }


class RequestIdMiddleware:
    """First in the chain: sets the request's id, answers it in `X-Request-ID`, and logs one access line
    (method, path, status, duration) when the answer is ready."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        caller = request.META.get("HTTP_X_REQUEST_ID", "")
        token = request_id.set(caller if _CALLER_ID.fullmatch(caller) else uuid.uuid4().hex)
        request.request_id = request_id.get()  # for what records it beside the logs (the audit log)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response["X-Request-ID"] = request_id.get()
            # The access line says what Django would log again, outside the request, for a 4xx or 5xx answer;
            # an exception is still logged with its traceback where it is raised, inside the request.
            response._has_been_logged = True
            access_log.info("%s %s %s", request.method, request.path, response.status_code, extra={
                "method": request.method, "path": request.path, "status": response.status_code,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "user": getattr(getattr(request, "user", None), "username", "") or "",
            })
            return response
        finally:
            request_id.reset(token)
