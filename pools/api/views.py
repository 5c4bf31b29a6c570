"""`/api/configs/...`: the configuration documents over HTTP, in OSMO's shapes."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import config_path, may_touch_config, readable_revisions, refuse_unreadable_revision
from pools.access.serializers import (
    StrictBooleanField,
    StrictCharField,
    WriteResultSerializer,
    named,
    path_parameter,
    validated,
)
from pools.config import history, writes
from pools.engine import ConfigError
from pools.models import ConfigKind, ConfigRevision
from pools.models.visibility import access_for

from .schema import ConfigDocument

PAGE_SIZE = 100
KIND = path_parameter("kind", "The configuration type.", enum=list(history.SLUGS))
DESCRIPTION = OpenApiParameter("description", str, description="Stored on the revisions this write makes.")


def _kind(slug: str) -> str:
    kind = history.SLUGS.get(slug)
    if kind is None:
        raise history.ConfigNotFound(f"Unknown configuration type {slug!r}; use one of {', '.join(history.SLUGS)}")
    return kind


DRY_RUN = OpenApiParameter("dry_run", bool, description="1: check the document and answer what it would do "
                                                       "(its impact on the fleet included), writing nothing.")


def _import(request, kind: str, name: str | None) -> Response:
    # The kind's document models check the body (pools.config.documents, pools.access.documents), in the
    # write path every door shares; a document is imported whole or not at all.
    description = request.query_params.get("description", "")
    dry_run = request.query_params.get("dry_run", "") in ("1", "true")
    if dry_run:
        result = writes.validate(_kind(kind), request.data, name=name, description=description)
    else:
        result = writes.import_document(_kind(kind), request.data, name=name, author=request.user,
                                         description=description)
    return _answer(request, result, dry_run=dry_run)


def _answer(request, result, *, dry_run: bool = False) -> Response:
    """The write's result; its impact names only the pools the caller may see, and those it wrote."""
    if result.impact is not None:
        visible = access_for(request).visible_pool_names
        if visible is not None:
            written = {*result.created, *result.updated, *result.deleted} if result.kind == ConfigKind.POOL else set()
            result.impact = result.impact.visible(lambda pool: pool in visible or pool in written)
    return Response({**result.as_dict(), **({"dry_run": True} if dry_run else {})})


@extend_schema(parameters=[KIND])
class ConfigDocumentsView(APIView):
    """Every object of a type: GET exports them, PUT imports a document of any number of them."""

    @extend_schema(responses=ConfigDocument, operation_id="configs_retrieve")
    def get(self, request, kind):
        return Response(writes.export(_kind(kind)))

    @extend_schema(request=ConfigDocument, responses=WriteResultSerializer, parameters=[DESCRIPTION, DRY_RUN],
                   operation_id="configs_update")
    def put(self, request, kind):
        return _import(request, kind, None)

    @extend_schema(exclude=True)
    def delete(self, request, kind):
        raise ConfigError("DELETE needs an object name: /api/configs/<type>/<name>/")


@extend_schema(parameters=[KIND, named("name", "object")])
class ConfigDocumentView(APIView):
    """One object: GET exports it, PUT imports it, DELETE deletes it (refused while something uses it)."""

    @extend_schema(responses=ConfigDocument, operation_id="config_retrieve")
    def get(self, request, kind, name):
        return Response(writes.export(_kind(kind), name))

    @extend_schema(request=ConfigDocument, responses=WriteResultSerializer, parameters=[DESCRIPTION, DRY_RUN],
                   operation_id="config_update")
    def put(self, request, kind, name):
        return _import(request, kind, name)

    @extend_schema(responses={200: WriteResultSerializer}, parameters=[DESCRIPTION], operation_id="config_destroy")
    def delete(self, request, kind, name):
        result = writes.delete(_kind(kind), name, author=request.user,
                                description=request.query_params.get("description", ""))
        return _answer(request, result)


class RevisionSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=ConfigKind.choices)
    revision = serializers.IntegerField()
    name = serializers.CharField()
    action = serializers.ChoiceField(choices=ConfigRevision.Action.values)
    author = serializers.CharField()
    time = serializers.DateTimeField()
    description = serializers.CharField()
    document = serializers.JSONField(required=False, help_text="With documents=1: the object's document after "
                                                                "the change (before it, for a delete).")


class RevisionsSerializer(serializers.Serializer):
    revisions = RevisionSerializer(many=True)


class DiffSerializer(serializers.Serializer):
    diff = serializers.CharField(help_text="A unified diff, as `config diff` prints it.")


TYPE_FILTER = OpenApiParameter("type", str, description=f"A configuration type: {', '.join(history.SLUGS)} "
                                                       "(any case).")


class HistoryView(APIView):
    """Revisions newest first; filter with `?type=pool&name=NAME`; `?limit=` (default 100, at most
    1000); `?documents=1` adds each revision's document."""

    @extend_schema(responses=RevisionsSerializer, parameters=[
        TYPE_FILTER, OpenApiParameter("name", str, description="An object's name."),
        OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": 1000, "default": PAGE_SIZE},
                         description="How many revisions, newest first."),
        OpenApiParameter("documents", bool, description="Add each revision's document.")])
    def get(self, request):
        kind = request.query_params.get("type")
        revisions = readable_revisions(
            request, history.revisions(_kind(kind.lower()) if kind else None, request.query_params.get("name")))
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
    before = StrictBooleanField(required=False, default=False,
                                help_text="Restore the object as it was just before the revision instead: before "
                                          "its creation it did not exist, so it is deleted.")


class RollbackView(APIView):
    @extend_schema(request=RollbackSerializer, responses=WriteResultSerializer)
    def post(self, request):
        body = validated(RollbackSerializer, request)
        kind = _kind(body["type"].lower())
        target = history.get_revision(kind, body["revision"])
        for method in ("PUT", "DELETE") if body["before"] else ("PUT",):
            if not may_touch_config(request, method, kind, target.name):
                raise PermissionDenied(f"Rolling back {kind} {target.name} writes it: that needs staff or a role "
                                       f"that allows {method} {config_path(kind, target.name)}")
        result = writes.rollback(kind, body["revision"], before=body["before"], author=request.user,
                                  description=body["description"])
        return _answer(request, result)


class DiffView(APIView):
    """`?type=pool&revision=N[&other=M]`: unified diff text, as `config diff` prints."""

    @extend_schema(responses=DiffSerializer, parameters=[
        OpenApiParameter("type", str, required=True, description=TYPE_FILTER.description),
        OpenApiParameter("revision", int, required=True, description="A revision number."),
        OpenApiParameter("other", int, description="Diff against this revision instead of the previous one.")])
    def get(self, request):
        params = request.query_params
        try:
            number = int(params.get("revision", ""))
            other = int(params["other"]) if params.get("other") else None
        except ValueError:
            raise ConfigError("revision and other must be revision numbers", field="revision") from None
        kind = _kind(params.get("type", "").lower())
        for revision in history.diff_pair(kind, number, other):
            refuse_unreadable_revision(request, revision)
        return Response({"diff": history.unified_diff(kind, number, other)})
