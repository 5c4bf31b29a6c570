"""Every API error is a JSON body; configuration refusals name the field."""

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from pools.cluster import ClusterError, Unavailable
from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.models.dbwrites import NotRecorded


def exception_handler(exc, context):
    if isinstance(exc, ConfigError):
        code = status.HTTP_404_NOT_FOUND if isinstance(exc, ConfigNotFound) else status.HTTP_400_BAD_REQUEST
        return Response({"detail": exc.message, "field": exc.field or None}, status=code)
    if isinstance(exc, ClusterError):
        # The cluster refused or did not answer: the request was fine, the upstream was not.
        code = status.HTTP_503_SERVICE_UNAVAILABLE if isinstance(exc, Unavailable) else status.HTTP_502_BAD_GATEWAY
        return Response({"detail": exc.message, "field": None}, status=code)
    if isinstance(exc, NotRecorded):
        # The cluster took the change and the database did not: the next sync records it.
        return Response({"detail": exc.message, "field": None}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
    return drf_exception_handler(exc, context)
