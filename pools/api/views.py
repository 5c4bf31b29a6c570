"""`/api/configs/...`: the configuration documents over HTTP, in OSMO's shapes."""

from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.serializers import StrictCharField, validated
from pools.config import history, writes
from pools.engine import ConfigError

PAGE_SIZE = 100


def _kind(slug: str) -> str:
    kind = history.SLUGS.get(slug)
    if kind is None:
        raise history.ConfigNotFound(f"Unknown configuration type {slug!r}; use one of {', '.join(history.SLUGS)}")
    return kind


class ConfigDocumentView(APIView):
    """GET exports; PUT imports the request body (a document in any accepted shape) whole or not at all.
    `?description=` is stored on the revisions."""

    def get(self, request, kind, name=None):
        return Response(writes.export(_kind(kind), name))

    def put(self, request, kind, name=None):
        # The kind's document models check the body (pools.config.documents, pools.access.documents),
        # in the write path every door shares.
        result = writes.import_document(_kind(kind), request.data, name=name, author=request.user,
                                         description=request.query_params.get("description", ""))
        return Response(result.as_dict())

    def delete(self, request, kind, name=None):
        if name is None:
            raise ConfigError("DELETE needs an object name: /api/configs/<type>/<name>/")
        result = writes.delete(_kind(kind), name, author=request.user,
                                description=request.query_params.get("description", ""))
        return Response(result.as_dict())


class HistoryView(APIView):
    """Revisions newest first; filter with `?type=pool&name=NAME`; `?limit=` (default 100, at most
    1000); `?documents=1` adds each revision's document."""

    def get(self, request):
        kind = request.query_params.get("type")
        revisions = history.revisions(_kind(kind.lower()) if kind else None, request.query_params.get("name"))
        include_documents = request.query_params.get("documents") in ("1", "true")
        rows = []
        try:
            limit = int(request.query_params.get("limit", PAGE_SIZE))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            raise ConfigError("limit must be a whole number from 1 to 1000", field="limit")
        for revision in revisions[:limit]:
            row = history.summary(revision)
            if include_documents:
                row["document"] = revision.document
            rows.append(row)
        return Response({"revisions": rows})


class RollbackSerializer(serializers.Serializer):
    type = StrictCharField(help_text=f"The configuration type: {', '.join(history.SLUGS)} (any case).")
    revision = serializers.IntegerField(min_value=1, help_text="The revision to restore the object to.")
    description = StrictCharField(required=False, allow_blank=True, default="",
                                  help_text="Stored on the new revision.")


class RollbackView(APIView):
    def post(self, request):
        body = validated(RollbackSerializer, request)
        result = writes.rollback(_kind(body["type"].lower()), body["revision"], author=request.user,
                                  description=body["description"])
        return Response(result.as_dict())


class DiffView(APIView):
    """`?type=pool&revision=N[&other=M]`: unified diff text, as `config diff` prints."""

    def get(self, request):
        params = request.query_params
        try:
            number = int(params.get("revision", ""))
            other = int(params["other"]) if params.get("other") else None
        except ValueError:
            raise ConfigError("revision and other must be revision numbers", field="revision") from None
        kind = _kind(params.get("type", "").lower())
        return Response({"diff": history.unified_diff(kind, number, other)})
