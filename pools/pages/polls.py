"""The periods of the pages' live regions (settings LIVE_POLL_MS, LOG_POLL_MS, LOG_WAIT_MS) and the new-workload
form's wait before its dry run (DRY_RUN_DELAY_MS), as htmx writes an interval: `5s`, or `300ms` for a time that is
no whole number of seconds."""

from django.conf import settings


def htmx_interval(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def live_polls(request) -> dict:
    """For the templates, read at each request: `hx-trigger="every {{ live_every }}"` and
    `hx-trigger="change delay:{{ dry_run_delay }}"`."""
    return {"live_every": htmx_interval(settings.LIVE_POLL_MS),
            "dry_run_delay": htmx_interval(settings.DRY_RUN_DELAY_MS)}
