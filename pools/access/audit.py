"""Who is acting, for the audit log (pools.models.audit), and the audit rows of sign-ins.

AuditMiddleware (after authentication) makes the request being served the actor of every row written while it
is: its user or token, its client's address (from a trusted proxy, the forwarded one) and its request id.
Sign-ins leave a row each: success (a session began: password, proxy header or OpenID Connect), failure, and a
refusal by the sign-in limit (`lockout`: once while it lasts, not once per refused try). Bearer tokens prove who
someone is on every request and leave no row; creating and revoking them does (pools.access.tokens). Accounts leave
a row when they are created, deactivated, activated again or deleted, through whichever door (the admin, the API,
`project add-member`, a first sign-in through the identity provider): the model's signals, not each door."""

import datetime as dt

from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models.signals import post_delete, post_init, post_save
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


# ---- accounts: created, deactivated or activated, deleted ------------------------------------------------

@receiver(post_init, sender=get_user_model(), dispatch_uid="pools.access.audit.loaded")
def _loaded(sender, instance, **kwargs):
    instance._osmo_was_active = instance.is_active if instance.pk else None


@receiver(post_save, sender=get_user_model(), dispatch_uid="pools.access.audit.saved")
def _saved(sender, instance, created, update_fields=None, **kwargs):
    name = f"user/{instance.get_username()}"
    if created:
        audit.record("user", name, "create", "account created" + (" (staff)" if instance.is_staff else "")
                     + ("" if instance.is_active else ", inactive"))
    elif instance._osmo_was_active is not None and instance._osmo_was_active != instance.is_active:
        audit.record("user", name, "activate" if instance.is_active else "deactivate",
                     "account activated" if instance.is_active else "account deactivated: it can no longer sign in")
    instance._osmo_was_active = instance.is_active


@receiver(post_delete, sender=get_user_model(), dispatch_uid="pools.access.audit.deleted")
def _deleted(sender, instance, **kwargs):
    audit.record("user", f"user/{instance.get_username()}", "delete", "account deleted")
