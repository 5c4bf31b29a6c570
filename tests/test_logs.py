"""osmo_site.logs: JSON lines, request ids, the LOG_FORMAT check."""

import json
import logging

import pytest
from django.core.exceptions import ImproperlyConfigured

from osmo_site.logs import JsonFormatter, RequestIdFilter, logging_config, request_id


def record(message="hello %s", args=("world",), **extra):
    entry = logging.LogRecord("osmo.test", logging.ERROR, __file__, 1, message, args, None)
    entry.__dict__.update(extra)
    return entry


def test_a_json_line_holds_the_message_the_request_id_and_the_extra_fields():
    token = request_id.set("abc123")
    try:
        entry = record(status=503)
        RequestIdFilter().filter(entry)
        line = json.loads(JsonFormatter().format(entry))
    finally:
        request_id.reset(token)
    assert line["message"] == "hello world" and line["request_id"] == "abc123" and line["status"] == 503
    assert line["level"] == "ERROR" and line["logger"] == "osmo.test" and line["time"].endswith("+00:00")


def test_a_traceback_stays_on_its_line():
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        entry = logging.LogRecord("osmo.test", logging.ERROR, __file__, 1, "failed", (), __import__("sys").exc_info())
    text = JsonFormatter().format(entry)
    assert "\n" not in text and "ValueError: bad\nvalue" in json.loads(text)["exc"]


@pytest.mark.parametrize("caller, kept", [("trace-42", True), ("a" * 65, False), ("x y", False),
                                           ("<script>", False)])
def test_the_answer_carries_the_callers_id_only_when_it_is_a_plain_token(client, caller, kept):
    answered = client.get("/healthz", HTTP_X_REQUEST_ID=caller)["X-Request-ID"]
    assert (answered == caller) is kept
    assert len(answered) == 32 or kept


def test_log_format_is_plain_or_json():
    assert logging_config("json", "INFO")["handlers"]["console"]["formatter"] == "json"
    with pytest.raises(ImproperlyConfigured, match="LOG_FORMAT must be plain or json, not 'xml'"):
        logging_config("xml", "INFO")

