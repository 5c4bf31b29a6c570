"""The profile page (`/profile/`): a signed-in user's own API tokens (create, the secret shown once; list with
expiry and last use; revoke) and their notification choices, beside the link to their effective permissions.
Every write is a POST form with its CSRF token; each goes through the same functions as the API and the CLI
(`pools.access.tokens`, `scheduling.run.notify_preferences`, `scheduling.submit.credentials`: the stored credentials,
by name, type and key names), and a refusal is shown on the page with a 400."""

import datetime as dt

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from pools.access import tokens
from pools.access.scoping import Rule, access_required
from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.models import AccessToken
from scheduling.decisions.notifications import LABELS, TRANSITIONS
from scheduling.run import notify_preferences as prefs
from scheduling.submit import credentials as stored

FORM_FIELD_MAX = 2000  # a field longer than any value we accept is refused before it is read further


def _page(request, *, status: int = 200, secret: dict | None = None, errors: dict | None = None,
          form: dict | None = None):
    user = request.user
    notifications = prefs.own(user)
    chosen = notifications["own"] or prefs.describe(None)
    response = render(request, "profile/profile.html", {
        "nav": "profile",
        "tokens": AccessToken.objects.filter(user=user).order_by("name"),
        "secret": secret,
        "errors": errors or {},
        "form": form or {},
        "max_days": settings.ACCESS_TOKEN_MAX_DAYS,
        "notifications": notifications,
        "chosen": {**chosen, "form": form.get("notify") if form else None},
        "choices": [(value, LABELS[value]) for value in TRANSITIONS],
        "credentials": stored.listing(user),
        "credential_types": ["GENERIC", "DATA", "REGISTRY"],
    }, status=status)
    # The page may carry a secret shown once: no cache may keep it.
    response["Cache-Control"] = "no-store"
    return response


@access_required(read=Rule.SIGNED_IN)
def profile(request):
    return _page(request)


def _field(request, name: str, default: str = "") -> str:
    value = request.POST.get(name, default)
    if len(value) > FORM_FIELD_MAX:
        raise ConfigError(f"{name} is longer than {FORM_FIELD_MAX} characters", field=name)
    return value.strip()


@require_POST
@access_required(write=Rule.SIGNED_IN)
def token_create(request):
    form = {"name": request.POST.get("name", "")[:FORM_FIELD_MAX], "days": request.POST.get("days", "")[:10]}
    try:
        name = _field(request, "name")
        try:
            days = int(_field(request, "days", "30"))
        except ValueError:
            raise ConfigError("days must be a whole number", field="days") from None
        if not 1 <= days <= settings.ACCESS_TOKEN_MAX_DAYS:
            raise ConfigError(f"days must be from 1 to {settings.ACCESS_TOKEN_MAX_DAYS}", field="days")
        token, secret = tokens.create_token(request.user, name, timezone.now() + dt.timedelta(days=days),
                                            created_by=request.user.get_username())
    except ConfigError as exc:
        return _page(request, status=409 if isinstance(exc, tokens.Conflict) else 400,
                     errors={exc.field or "name": exc.message}, form=form)
    return _page(request, status=201, secret={"name": token.name, "value": secret, "expires_at": token.expires_at})


@require_POST
@access_required(write=Rule.SIGNED_IN)
def token_revoke(request, name: str):
    try:
        tokens.revoke_token(request.user, name)  # only the caller's own: another's name is "no token named"
    except ConfigNotFound as exc:
        return _page(request, status=404, errors={"revoke": exc.message})
    messages.success(request, f"Token {name} revoked: requests using it are refused from now on.")
    return HttpResponseRedirect(reverse("profile-page"))


@require_POST
@access_required(write=Rule.SIGNED_IN)
def notifications_save(request):
    if request.POST.get("forget") == "yes":
        prefs.forget({"user": request.user}, request.user.get_username(), request.user)
        messages.success(request, "Notification choices cleared: your projects' defaults apply.")
        return HttpResponseRedirect(reverse("profile-page"))
    data = {"transitions": request.POST.getlist("transitions")[:len(TRANSITIONS) + 1],
            "email": request.POST.get("email") == "on"}
    try:
        data["webhook_url"] = _field(request, "webhook_url")
        try:
            data["pending_minutes"] = int(_field(request, "pending_minutes", "60"))
        except ValueError:
            raise ConfigError("pending_minutes must be a whole number", field="pending_minutes") from None
        prefs.save_own(request.user, data, request.user)
    except ConfigError as exc:
        return _page(request, status=400, errors={exc.field or "notify": exc.message},
                     form={"notify": {**data, "webhook_url": request.POST.get("webhook_url", "")[:FORM_FIELD_MAX]}})
    messages.success(request, "Notification choices saved.")
    return HttpResponseRedirect(reverse("profile-page"))


PAYLOAD_MAX = 61440


@require_POST
@access_required(write=Rule.SIGNED_IN)
def credential_set(request):
    """One credential from the form: `key=value` lines, as `osmo credential set --payload` takes them. The
    payload is never put back into the page, even when it is refused."""
    kind = request.POST.get("type", "GENERIC")[:16]
    form = {"credential_name": request.POST.get("name", "")[:63], "credential_type": kind}
    try:
        name = _field(request, "name")
        text = request.POST.get("payload", "")
        if len(text) > PAYLOAD_MAX:
            raise ConfigError(f"payload is longer than {PAYLOAD_MAX} characters", field="payload")
        payload = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            key, sep, value = line.partition("=")
            if not sep or not key.strip() or not value:
                raise ConfigError(f"payload line {number}: expected key=value", field="payload")
            payload[key.strip()] = value
        key = {"GENERIC": "generic_credential", "DATA": "data_credential", "REGISTRY": "registry_credential"}.get(kind)
        if key is None:
            raise ConfigError("type must be GENERIC, DATA or REGISTRY", field="type")
        stored.store(request.user, name, {key: {"credential": payload} if kind == "GENERIC" else payload})
    except ConfigError as exc:
        return _page(request, status=400, errors={"credential": exc.message}, form=form)
    messages.success(request, f"Credential {name} saved.")
    return HttpResponseRedirect(reverse("profile-page") + "#credentials")


@require_POST
@access_required(write=Rule.SIGNED_IN)
def credential_delete(request, name: str):
    try:
        stored.remove(request.user, name)  # only the caller's own
    except ConfigNotFound as exc:
        return _page(request, status=404, errors={"credential": exc.message})
    messages.success(request, f"Credential {name} deleted.")
    return HttpResponseRedirect(reverse("profile-page") + "#credentials")
