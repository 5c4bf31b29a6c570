"""Lists are whole unless asked otherwise: OSMO's clients read every row, so without `limit` and `offset`
a list answers a plain JSON array. With either, it answers one page as
`{"count", "next", "previous", "results"}` (`limit` alone: the first rows; `offset` alone: the rest)."""

from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.utils.urls import remove_query_param, replace_query_param


class OptionalLimitOffsetPagination(LimitOffsetPagination):
    default_limit = None
    max_limit = None

    def paginate_queryset(self, queryset, request, view=None):
        params = request.query_params
        if self.limit_query_param not in params and self.offset_query_param not in params:
            return None
        self.request = request
        self.limit = self._whole(params, self.limit_query_param, minimum=1)
        self.offset = self._whole(params, self.offset_query_param, minimum=0) or 0
        self.count = self.get_count(queryset)
        # Never past the last row: the database is not asked for a LIMIT or OFFSET beyond its integers.
        start = min(self.offset, self.count)
        end = self.count if self.limit is None else min(self.count, start + self.limit)
        return list(queryset[start:end])

    @staticmethod
    def _whole(params, name: str, *, minimum: int) -> int | None:
        text = params.get(name)
        if text in (None, ""):
            return None
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise serializers.ValidationError({name: [f"must be a whole number of at least {minimum}"]})
        return value

    def get_next_link(self):
        if self.limit is None or self.offset + self.limit >= self.count:
            return None
        url = self.request.build_absolute_uri()
        url = replace_query_param(url, self.limit_query_param, self.limit)
        return replace_query_param(url, self.offset_query_param, self.offset + self.limit)

    def get_previous_link(self):
        if self.offset <= 0:
            return None
        url = self.request.build_absolute_uri()
        if self.limit is None:
            return replace_query_param(url, self.offset_query_param, 0)  # still a page, of every row
        url = replace_query_param(url, self.limit_query_param, self.limit)
        offset = max(0, self.offset - self.limit)
        if offset == 0:
            return remove_query_param(url, self.offset_query_param)
        return replace_query_param(url, self.offset_query_param, offset)

    def get_paginated_response_schema(self, schema):
        page = super().get_paginated_response_schema(schema)
        page["description"] = "One page, when limit or offset is given."
        return {"oneOf": [{**schema, "description": "Every row, when neither limit nor offset is given."}, page]}

    def get_schema_operation_parameters(self, view):
        limit, offset = super().get_schema_operation_parameters(view)
        limit["description"] = "Page size. Without limit and offset the whole list is answered as an array."
        limit["schema"]["minimum"] = 1
        offset["description"] = "Rows to skip (answers a page; see limit)."
        offset["schema"]["minimum"] = 0
        return [limit, offset]
