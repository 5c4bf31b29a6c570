"""Every API error is a JSON body; configuration refusals name the field."""

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from pools.documents import ConfigError
from pools.history import ConfigNotFound


def exception_handler(exc, context):
    if isinstance(exc, ConfigError):
        code = status.HTTP_404_NOT_FOUND if isinstance(exc, ConfigNotFound) else status.HTTP_400_BAD_REQUEST
        return Response({"detail": exc.message, "field": exc.field or None}, status=code)
    return drf_exception_handler(exc, context)
