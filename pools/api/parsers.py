"""The API's one body parser: JSON, refused with the line and column of the first error (as the CLI
reports a file's), as `{"detail", "field"}`."""

from rest_framework import parsers

from pools.engine import parse_json


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        return parse_json(stream.read(), source="request body")
