"""Every API error is a JSON body `{"detail", "field"}`; a refused input names its field (dotted for
nested fields, such as `labels.runwhere.ai/pool`)."""

from django.db import DataError
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from pools.cluster import ClusterError, Unavailable
from pools.config.history import ConfigNotFound
from pools.engine import ConfigError, TooLarge
from pools.models.dbwrites import NotRecorded


def first_error(detail, path: tuple[str, ...] = ()) -> tuple[str, str]:
    """(dotted field, message) of the first error in a serializer's nested error detail."""
    if isinstance(detail, dict):
        if not detail:
            return ".".join(path), "invalid"
        key, value = next(iter(detail.items()))
        return first_error(value, path if key == "non_field_errors" else (*path, str(key)))
    if isinstance(detail, list):
        # A list field's errors are indexed by position; the first item that has one.
        errors = [item for item in detail if item] or ["invalid"]
        return first_error(errors[0], path)
    return ".".join(path), str(detail)


def _validation_response(exc: ValidationError) -> Response:
    field, message = first_error(exc.detail)
    if field and not message.startswith(field):
        message = f"{field}: {message}"
    return Response({"detail": message, "field": field or None}, status=status.HTTP_400_BAD_REQUEST)


def _data_error_response(exc: DataError) -> Response:
    """The database refused a value a write sent that the checks let through (an integer out of range, a string
    too long): the input was wrong, not the server. PostgreSQL names the column when it knows it."""
    cause = exc.__cause__
    diag = getattr(cause, "diag", None)
    field = getattr(diag, "column_name", None) or None
    reason = (getattr(diag, "message_primary", None) or str(cause or exc)).strip().splitlines()[0]
    where = f"{field}: " if field else ""
    return Response({"detail": f"{where}the database refused a value: {reason}", "field": field},
                    status=status.HTTP_400_BAD_REQUEST)


def exception_handler(exc, context):
    if isinstance(exc, TooLarge):
        return Response({"detail": exc.message, "field": exc.field or None},
                        status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
    if isinstance(exc, DataError):
        request = context.get("request")
        if request is not None and request.method in SAFE_METHODS:
            # A read sends no value to store: the database refused SQL the server built itself (such as a role's
            # regex), a server error to be logged and fixed, not the client's.
            return None
        return _data_error_response(exc)
    if isinstance(exc, ConfigError):
        code = status.HTTP_404_NOT_FOUND if isinstance(exc, ConfigNotFound) else status.HTTP_400_BAD_REQUEST
        return Response({"detail": exc.message, "field": exc.field or None, **getattr(exc, "extra", {})},
                        status=code)
    if isinstance(exc, ClusterError):
        # The cluster refused or did not answer: the request was fine, the upstream was not.
        code = status.HTTP_503_SERVICE_UNAVAILABLE if isinstance(exc, Unavailable) else status.HTTP_502_BAD_GATEWAY
        return Response({"detail": exc.message, "field": None}, status=code)
    if isinstance(exc, NotRecorded):
        # The cluster took the change and the database did not: the next sync records it.
        return Response({"detail": exc.message, "field": None}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    if isinstance(exc, ValidationError):
        return _validation_response(exc)
    return drf_exception_handler(exc, context)
