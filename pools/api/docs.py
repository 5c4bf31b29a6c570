"""The API's own pages: `/api/` lists the endpoints the caller may read (JSON, like DRF's API root), and
`/api/docs/` (Swagger UI) and `/api/docs/redoc/` (Redoc) render the schema of /api/schema/ from files served
by our origin (drf-spectacular-sidecar), started by static/osmo/api-docs.js, as the content security policy
allows no inline script. The docs pages show what the schema shows, to whom it shows it: signed-in users."""

from django.shortcuts import render
from django.urls import resolve, reverse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access.scoping import Rule, access_required, authorize, config_path, rule_for
from pools.models import ConfigKind
from pools.models.visibility import access_for

# name -> URL name of each endpoint that reads without arguments, in the order a newcomer would look.
ENDPOINTS = (
    ("pools", "api-pool-list"),
    ("resources", "api-resource-list"),
    ("departments", "api-department-list"),
    ("projects", "api-project-list"),
    ("quotas", "api-quota-list"),
    ("workloads", "api-workload-list"),
    ("workflows", "osmo-workflows"),
    ("profile", "profile"),
    ("access_tokens", "auth-tokens"),
    ("users", "auth-users"),
    ("config_history", "config-history"),
    ("schema", "api-schema"),
    ("docs", "api-docs"),
    ("redoc", "api-docs-redoc"),
)
CONFIG_ENDPOINTS = tuple((f"configs_{kind.lower()}", kind) for kind in ConfigKind.values)


def _may_read(request, path: str) -> bool:
    view = getattr(resolve(path).func, "cls", None)
    rule = rule_for(view, "GET") if view is not None else Rule.SIGNED_IN
    if rule == Rule.ADMIN:
        return access_for(request).request_grant("GET", path) is not None
    return authorize(request, rule)


class ApiRootView(APIView):
    """The endpoints this user may read, by name; admin-only ones appear to those their roles let in."""

    read_access = Rule.SIGNED_IN

    @extend_schema(operation_id="api_root", tags=["index"], responses=inline_serializer("ApiRoot", {
        name: serializers.URLField(required=False) for name, _ in ENDPOINTS + CONFIG_ENDPOINTS}))
    def get(self, request):
        paths = [(name, reverse(url_name)) for name, url_name in ENDPOINTS]
        paths += [(name, config_path(kind)) for name, kind in CONFIG_ENDPOINTS]
        return Response({name: request.build_absolute_uri(path) for name, path in paths
                         if _may_read(request, path)})


def _docs_page(request, template: str):
    return render(request, template, {"schema_url": reverse("api-schema") + "?format=json", "nav": "api-docs"})


@access_required()
def swagger(request):
    return _docs_page(request, "api/swagger.html")


@access_required()
def redoc(request):
    return _docs_page(request, "api/redoc.html")
