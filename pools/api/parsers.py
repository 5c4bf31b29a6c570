"""The API's one body parser: JSON through `pools.engine.jsonread` (size, depth, numbers, NUL and lone
surrogates checked), refused with the line and column of the first syntax error or the JSON path of the
refused value, as `{"detail", "field"}`; a body over `OSMO_JSON_MAX_BYTES` answers 413."""

from django.conf import settings
from rest_framework import parsers

from pools.engine import jsonread


def max_bytes() -> int:
    return getattr(settings, "OSMO_JSON_MAX_BYTES", jsonread.MAX_BYTES)


def max_depth() -> int:
    return getattr(settings, "OSMO_JSON_MAX_DEPTH", jsonread.MAX_DEPTH)


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        limit = max_bytes()
        body = stream.read(limit + 1)  # never more than one byte past the limit
        return jsonread.read_json(body, source="request body", max_bytes=limit, max_depth=max_depth())
