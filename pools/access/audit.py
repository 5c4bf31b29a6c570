"""Who is acting, for the audit log (pools.models.audit), and the audit rows of sign-ins.

AuditMiddleware (after authentication) makes the request being served the actor of every row written while it
is: its user or token, its client's address (from a trusted proxy, the forwarded one) and its request id.
Sign-ins leave a row each: success (a session began: password, proxy header or OpenID Connect), failure, and a
refusal by the sign-in limit (`lockout`: once while it lasts, not once per refused try). Bearer tokens prove who
someone is on every request and leave no row; creating and revoking them does (pools.access.tokens)."""

import datetime as dt

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver
from django.utils import timezone

from pools.access.signin_limit import client_address
from pools.models import audit


class AuditMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = audit.acting_request.set(audit.Acting(request, client_address(request),
                                                      getattr(request, "request_id", "")))
        try:
            return self.get_response(request)
        finally:
            audit.acting_request.reset(token)


@receiver(user_logged_in, dispatch_uid="pools.access.audit.signed_in")
def _signed_in(sender, request, user, **kwargs):
    backend = getattr(user, "backend", "") or ""
    how = ("OpenID Connect" if backend.endswith("OIDCBackend") else
           "authenticating proxy" if backend.endswith("TrustedHeaderBackend") else "password")
    audit.record("signin", f"user/{user.get_username()}", "success", f"signed in by {how}", actor=user)


@receiver(user_login_failed, dispatch_uid="pools.access.audit.failed")
def _failed(sender, credentials, request=None, **kwargs):
    username = str(credentials.get("username") or "")[:150]
    refused = getattr(request, "signin_refusal", None)
    if refused is not None:
        # One row per lockout, not per refused try: a flood of tries at a locked name adds nothing to keep.
        address = client_address(request)
        since = timezone.now() - dt.timedelta(seconds=refused.retry_after)
        if not audit.AuditEvent.objects.filter(kind="signin", action="lockout", object=f"user/{username}",
                                               address=address, at__gte=since).exists():
            audit.record("signin", f"user/{username}", "lockout", refused.message)
    else:
        audit.record("signin", f"user/{username}", "failure", "wrong user name or password")
