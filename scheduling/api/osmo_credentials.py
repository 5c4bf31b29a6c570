"""OSMO's credential paths, as `osmo credential` calls them:

- `POST /api/credentials/{name}` with `{"generic_credential": {"credential": {k: v}}}`, `{"data_credential":
  {access_key_id, access_key, endpoint, region}}` or `{"registry_credential": {auth, registry, username}}`: create or
  replace the caller's credential; answers its name, type and profile.
- `GET /api/credentials`: `{"credentials": [{cred_name, cred_type, profile, keys}]}`, the caller's own.
- `DELETE /api/credentials/{name}`: `{"credentials": [{cred_name, cred_type, profile}]}` (what the CLI reads back).

Values are never answered, logged or audited (`scheduling.submit.credentials`); a refusal names the field, never
a value. Each user sees only their own: another user's credential is a name that does not exist.
"""

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule
from scheduling.submit import credentials

CREDENTIALS = inline_serializer("OsmoCredentials", {"credentials": serializers.ListField(
    child=serializers.DictField())})
BODY = inline_serializer("OsmoCredentialBody", {
    "generic_credential": serializers.DictField(required=False),
    "data_credential": serializers.DictField(required=False),
    "registry_credential": serializers.DictField(required=False)})


class CredentialListView(APIView):
    read_access = Rule.SIGNED_IN

    @extend_schema(operation_id="osmo_credential_list", responses=CREDENTIALS)
    def get(self, request):
        return Response({"credentials": credentials.listing(request.user)})


class CredentialView(APIView):
    read_access = Rule.SIGNED_IN
    write_access = Rule.SIGNED_IN

    @extend_schema(operation_id="osmo_credential_set", request=BODY, responses=CREDENTIALS)
    def post(self, request, name):
        credential = credentials.store(request.user, name, request.data)
        return Response({"credentials": [credentials.shown(credential)]})

    @extend_schema(operation_id="osmo_credential_delete", request=None, responses=CREDENTIALS)
    def delete(self, request, name):
        return Response({"credentials": [credentials.shown(credentials.remove(request.user, name))]})
