"""A limit on password guessing that cannot lock the admins out.

Failures count per (user name, address) pair: after OSMO_LOGIN_MAX_FAILURES of them within
OSMO_LOGIN_LOCKOUT_SECONDS, that pair waits OSMO_LOGIN_BACKOFF_SECONDS after its latest failure, twice as long
after each further failure, never longer than the window. Besides, OSMO_LOGIN_MAX_FAILURES_PER_ADDRESS failures
from one address across names refuse that address until enough of them leave the window. A guesser elsewhere
therefore never locks a name: a correct password from an address that did not fail is always tried. A successful
sign-in clears its pair's failures. A limit of 0 turns that limit off. Tokens never pass through here.

One check serves every door: SignInLimitBackend comes first in AUTHENTICATION_BACKENDS, so the sign-in page,
the admin's sign-in and the API's HTTP basic authentication (pools.access.basic_auth) all pass through it. It
never signs anyone in; it refuses by raising PermissionDenied, which ends `authenticate()`. Failures are
recorded from Django's `user_login_failed` signal, one row each in the database (pools.models.SignInFailure),
so that every web process counts the same failures.

The address is REMOTE_ADDR or, from a proxy of ACCESS_TRUSTED_PROXIES, the last address of X-Forwarded-For
that is not one of those proxies (else every client would share the proxy's count).
"""

import datetime as dt
import ipaddress
import math
from dataclasses import dataclass

from asgiref.sync import sync_to_async
from django import forms
from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.utils import timezone

from pools.access.idp import trusted
from pools.models import SignInFailure

# The time the limit reads; tests replace it instead of sleeping.
clock = timezone.now


@dataclass(frozen=True)
class Refusal:
    message: str
    retry_after: int  # seconds until one more attempt is allowed


def client_address(request) -> str | None:
    if request is None:
        return None
    address = request.META.get("REMOTE_ADDR") or ""
    if trusted(address):
        for hop in reversed(request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")):
            hop = hop.strip()
            if hop and not trusted(hop):
                address = hop
                break
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


def _window() -> dt.timedelta:
    return dt.timedelta(seconds=getattr(settings, "OSMO_LOGIN_LOCKOUT_SECONDS", 900))


def _wait(seconds: float) -> str:
    if seconds < 60:
        return f"{math.ceil(seconds)} seconds"
    minutes = math.ceil(seconds / 60)
    return "1 minute" if minutes == 1 else f"{minutes} minutes"


def backoff(failures: int, limit: int, base: float, window: float) -> float:
    """Seconds a pair with `failures` recent failures waits after its latest one (pure)."""
    if limit <= 0 or failures < limit:
        return 0.0
    return min(window, base * 2 ** min(failures - limit, 32))


def refusal(username: str | None, address: str | None, now: dt.datetime | None = None) -> Refusal | None:
    """Why a sign-in as `username` from `address` is refused now, or None when it may be tried."""
    window = _window()
    if window <= dt.timedelta(0):
        return None
    now = now or clock()
    recent = SignInFailure.objects.filter(at__gt=now - window)
    found = []
    limit = getattr(settings, "OSMO_LOGIN_MAX_FAILURES", 5)
    if username and limit > 0:
        pair = recent.filter(username=username[:150], address=address) if address else \
            recent.filter(username=username[:150], address__isnull=True)
        times = list(pair.order_by("-at").values_list("at", flat=True)[:limit + 40])
        wait = backoff(len(times), limit, getattr(settings, "OSMO_LOGIN_BACKOFF_SECONDS", 60), window.total_seconds())
        if wait:
            seconds = math.ceil((times[0] + dt.timedelta(seconds=wait) - now).total_seconds())
            if seconds > 0:
                found.append(Refusal(f"Too many failed sign-ins for this user name from your address: try again in "
                                     f"{_wait(seconds)}.", seconds))
    ceiling = getattr(settings, "OSMO_LOGIN_MAX_FAILURES_PER_ADDRESS", 20)
    if address and ceiling > 0:
        # The ceiling-th newest failure: once it leaves the window, fewer than `ceiling` remain.
        nth = list(recent.filter(address=address).order_by("-at").values_list("at", flat=True)[ceiling - 1:ceiling])
        if nth:
            seconds = max(1, math.ceil((nth[0] + window - now).total_seconds()))
            found.append(Refusal(f"Too many failed sign-ins from your address: try again in {_wait(seconds)}.",
                                 seconds))
    return max(found, key=lambda refused: refused.retry_after, default=None)


def record_failure(username: str, address: str | None, now: dt.datetime | None = None) -> None:
    now = now or clock()
    SignInFailure.objects.create(username=username[:150], address=address, at=now)
    SignInFailure.objects.filter(at__lte=now - _window()).delete()  # what no count reads any more


def clear_failures(username: str, address: str | None) -> None:
    """A successful sign-in clears its own pair's failures only: a guesser elsewhere keeps their back-off."""
    rows = SignInFailure.objects.filter(username=username[:150])
    rows.filter(address=address).delete() if address else rows.filter(address__isnull=True).delete()


class SignInLimitBackend:
    """First of AUTHENTICATION_BACKENDS: refuses password sign-ins over the limit and lets the others be tried.
    Not a BaseBackend on purpose: without get_user and has_perm it is never a session's backend and never asked
    about permissions."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None or password is None:
            return None
        refused = refusal(str(username), client_address(request))
        if refused is not None:
            if request is not None:
                request.signin_refusal = refused
            raise PermissionDenied(refused.message)
        return None

    async def aauthenticate(self, request, username=None, password=None, **kwargs):
        return await sync_to_async(self.authenticate)(request, username=username, password=password, **kwargs)


# AUTHENTICATION_BACKENDS imports this module before `authenticate()` can send either signal.
@receiver(user_login_failed, dispatch_uid="pools.access.signin_limit.record")
def _record(sender, credentials, request=None, **kwargs):
    username = credentials.get("username")
    if username and getattr(request, "signin_refusal", None) is None:  # a refused try is not one more failure
        record_failure(str(username), client_address(request))


@receiver(user_logged_in, dispatch_uid="pools.access.signin_limit.clear")
def _clear(sender, request, user, **kwargs):
    clear_failures(user.get_username(), client_address(request))


def refusal_error(request) -> forms.ValidationError | None:
    """The form error of a sign-in the limit refused (this one and the admin's sign-in form say it)."""
    refused = getattr(request, "signin_refusal", None)
    return None if refused is None else forms.ValidationError(refused.message, code="too_many_failures")


class SignInForm(AuthenticationForm):
    def get_invalid_login_error(self):
        return refusal_error(self.request) or super().get_invalid_login_error()


class SignInView(auth_views.LoginView):
    """The sign-in page; a refused attempt answers 429 with Retry-After and says why on the form."""

    form_class = SignInForm
    template_name = "access/login.html"

    def get_context_data(self, **kwargs):
        from pools.access import oidc

        return {**super().get_context_data(**kwargs),
                "oidc_name": settings.OIDC_PROVIDER_NAME if oidc.enabled() else None}

    def form_invalid(self, form):
        refused = getattr(self.request, "signin_refusal", None)
        if refused is None:
            return super().form_invalid(form)
        response = self.render_to_response(self.get_context_data(form=form, signin_refusal=refused), status=429)
        response["Retry-After"] = str(refused.retry_after)
        return response
