"""The API's HTTP basic authentication under the sign-in limit (pools.access.signin_limit).

Apart from the limit itself because it needs DRF and drf_spectacular: DRF imports this module (from
REST_FRAMEWORK's DEFAULT_AUTHENTICATION_CLASSES) when the API is first used, whereas every process imports the
limit at start-up (AUTHENTICATION_BACKENDS, the admin's sign-in) and most of them never touch the API."""

import drf_spectacular.authentication
from rest_framework import authentication, exceptions

from pools.access.signin_limit import clear_failures, client_address


class BasicAuthentication(authentication.BasicAuthentication):
    """DRF's HTTP basic authentication under the same limit: a refused attempt answers 429 with Retry-After,
    a good one clears its pair's failures (basic authentication never calls login())."""

    def authenticate_credentials(self, userid, password, request=None):
        try:
            result = super().authenticate_credentials(userid, password, request)
        except exceptions.AuthenticationFailed:
            refused = getattr(request, "signin_refusal", None)
            if refused is not None:
                raise exceptions.Throttled(wait=refused.retry_after, detail=refused.message) from None
            raise
        clear_failures(userid, client_address(request))
        return result


class BasicScheme(drf_spectacular.authentication.BasicScheme):
    """The OpenAPI schema describes the limited basic authentication as plain HTTP basic."""

    target_class = BasicAuthentication
