"""OSMO's account paths, for OSMO's CLI:

- `GET /api/profile/settings` (`osmo profile list`, and the default pool `submit` and `resource list` use when
  no `--pool` is given): `{profile: {username, email_notification, slack_notification, pool}, pools, roles,
  token: {name, expires_at} | null}`. `pool` is the default pool of `/api/profile/` (`default_pool`); the
  notification flags are one's own notification choice (`/api/profile/notifications/`): mail on, a webhook set.
- `POST /api/profile/settings` (`osmo profile set pool P`, `... notifications email|slack true|false`): `{pool}`,
  `{email_notification}`, `{slack_notification}`; slack can only be turned off here (a webhook URL is set at
  `/api/profile/notifications/`).
- `GET /api/version` (`osmo version`): `{major, minor, revision, hash}` of the OSMO API these paths follow, and
  our own version as `service_version`.
"""

from importlib import metadata

from django.db import transaction
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.api import profile, set_default_pool
from pools.access.scoping import Rule
from pools.engine import ConfigError
from pools.models.visibility import access_for
from scheduling.api.osmo_time import osmo_time
from scheduling.models import NotificationPreference
from scheduling.run import notify_preferences as prefs

OSMO_API_VERSION = {"major": "6", "minor": "4", "revision": "0", "hash": ""}
SETTINGS = inline_serializer("OsmoProfileSettings", {
    "profile": serializers.DictField(), "pools": serializers.ListField(child=serializers.CharField()),
    "roles": serializers.ListField(child=serializers.CharField()), "token": serializers.DictField(allow_null=True)})
SETTINGS_BODY = inline_serializer("OsmoProfileSettingsBody", {
    "pool": serializers.CharField(required=False, allow_null=True),
    "email_notification": serializers.BooleanField(required=False),
    "slack_notification": serializers.BooleanField(required=False)})


def settings_of(request) -> dict:
    own = profile(request)
    access = access_for(request)
    choice = NotificationPreference.objects.filter(user=request.user).first()
    token = access.token
    return {"profile": {"username": request.user.get_username(),
                        "email_notification": bool(choice and choice.email),
                        "slack_notification": bool(choice and choice.webhook_url),
                        "pool": own["default_pool"]},
            "pools": [pool["name"] for pool in own["pools"]], "roles": own["roles"],
            "token": {"name": token.name, "expires_at": osmo_time(token.expires_at)} if token is not None else None}


class ProfileSettingsView(APIView):
    read_access = Rule.SIGNED_IN
    write_access = Rule.SIGNED_IN

    @extend_schema(operation_id="osmo_profile_settings", responses=SETTINGS)
    def get(self, request):
        return Response(settings_of(request))

    @extend_schema(operation_id="osmo_profile_settings_set", request=SETTINGS_BODY, responses=SETTINGS)
    @transaction.atomic
    def post(self, request):
        data = request.data if isinstance(request.data, dict) else {}
        known = {"pool", "email_notification", "slack_notification"}
        if not data or set(data) - known:
            unknown = sorted(set(data) - known)
            raise ConfigError(f"{unknown[0] if unknown else 'pool'}: give pool, email_notification or "
                              "slack_notification", field=unknown[0] if unknown else "pool")
        for name in ("email_notification", "slack_notification"):
            if name in data and not isinstance(data[name], bool):
                raise ConfigError(f"{name}: must be true or false", field=name)
        if data.get("slack_notification") is True:
            choice = NotificationPreference.objects.filter(user=request.user).first()
            if not (choice and choice.webhook_url):
                raise ConfigError("slack_notification: set your webhook URL first (PUT /api/profile/notifications/ "
                                  "{\"webhook_url\": ...}, or the profile page)", field="slack_notification")
        if "pool" in data:
            set_default_pool(request, data["pool"])
        change = {}
        if "email_notification" in data:
            change["email"] = data["email_notification"]
        if data.get("slack_notification") is False:
            change["webhook_url"] = ""
        if change:
            prefs.save_own(request.user, change, request.user)
        return Response(settings_of(request))


class VersionView(APIView):
    """Open to all, as OSMO's is: the CLI asks it before signing in."""

    authentication_classes = ()
    permission_classes = ()

    @extend_schema(operation_id="osmo_version", auth=[], responses=inline_serializer("OsmoVersion", {
        "major": serializers.CharField(), "minor": serializers.CharField(), "revision": serializers.CharField(),
        "hash": serializers.CharField(), "service_version": serializers.CharField()}))
    def get(self, request):
        try:
            ours = metadata.version("osmo-pools")
        except metadata.PackageNotFoundError:
            ours = "unknown"
        return Response({**OSMO_API_VERSION, "service_version": ours})
