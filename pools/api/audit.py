"""`GET /api/audit/`: the audit log, newest first, with the page's filters. Staff read every row; anyone else
the rows of their own actions."""

import datetime as dt

from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from pools.engine import ConfigError
from pools.models import AuditEvent
from pools.models.audit import ACTIONS, KINDS
from pools.models.visibility import access_for

LIMIT_DEFAULT, LIMIT_MAX = 100, 1000


class AuditEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = AuditEvent
        fields = ["id", "at", "actor_kind", "actor", "token", "address", "request_id", "kind", "object", "action",
                  "summary", "previous_hash", "hash"]
        extra_kwargs = {
            "actor": {"help_text": "The user name (user or token), or the process (system)."},
            "token": {"help_text": "The API token's name, when the action came through one."},
            "summary": {"help_text": "What changed, before → after where it applies."},
            "hash": {"help_text": "SHA-256 of this row's content and of previous_hash (manage.py audit verify)."},
        }


class AuditPageSerializer(serializers.Serializer):
    count = serializers.IntegerField(help_text="Rows matching the filters (all pages).")
    results = AuditEventSerializer(many=True)


def _moment(params, name: str, *, end: bool = False) -> dt.datetime | None:
    text = (params.get(name) or "").strip()
    if not text:
        return None
    try:  # a bare date first: Python reads "2026-11-27" as a (naive) time too
        day = parse_date(text) if len(text) == 10 else None
        moment = None if day else parse_datetime(text)
    except ValueError:
        moment = day = None
    if day is not None:  # a date: from its start; `to` a date includes that whole day
        moment = dt.datetime.combine(day + dt.timedelta(days=1 if end else 0), dt.time(), tzinfo=dt.UTC)
    if moment is None:
        raise ConfigError(f"{name} must be a date (2026-11-27) or a time with its zone (2026-11-27T10:00:00Z)",
                          field=name)
    if moment.tzinfo is None:
        raise ConfigError(f"{name} needs a time zone (Z or +01:00)", field=name)
    return moment


def _whole(params, name: str, default: int, low: int, high: int) -> int:
    text = params.get(name)
    if text in (None, ""):
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise ConfigError(f"{name} must be a whole number from {low} to {high}", field=name)
    return value


def _choice(params, name: str, allowed) -> str:
    value = (params.get(name) or "").strip()
    if value and value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}", field=name)
    return value


class AuditView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(responses=AuditPageSerializer, parameters=[
        OpenApiParameter("user", str, description="Exactly this actor (staff only; others see only their own)."),
        OpenApiParameter("kind", str, enum=list(KINDS)),
        OpenApiParameter("object", str, description="Objects containing this text (POOL/training, node/h100-001)."),
        OpenApiParameter("action", str, enum=list(ACTIONS)),
        OpenApiParameter("from", str, description="From this date or time (with its zone), inclusive."),
        OpenApiParameter("to", str, description="Until this time, exclusive; a date includes that whole day."),
        OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX, "default": LIMIT_DEFAULT}),
        OpenApiParameter("offset", {"type": "integer", "minimum": 0})])
    def get(self, request):
        params = request.query_params
        access = access_for(request)
        user = (params.get("user") or "").strip()
        if user and not access.is_staff and user != access.user.get_username():
            raise ConfigError("user: only staff may read the actions of others", field="user")
        rows = AuditEvent.objects.visible_to(access).matching(
            user=user, kind=_choice(params, "kind", KINDS), obj=(params.get("object") or "").strip()[:200],
            action=_choice(params, "action", ACTIONS), since=_moment(params, "from"),
            until=_moment(params, "to", end=True))
        limit = _whole(params, "limit", LIMIT_DEFAULT, 1, LIMIT_MAX)
        offset = _whole(params, "offset", 0, 0, 2**31 - 1)
        count = rows.count()
        page = rows.order_by("-id")[offset:offset + limit]
        return Response({"count": count, "results": AuditEventSerializer(page, many=True).data})
