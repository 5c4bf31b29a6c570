"""The OpenAPI schema at /api/schema/: readable by any signed-in user (it describes the API, not anyone's
rows). The shapes of configuration documents are pydantic models, as drf-spectacular reads them; the
write path checks the documents themselves (pools.config.documents, pools.access.documents,
pools.quotas.documents)."""

from typing import Any, Literal

from django.conf import settings
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.views import SpectacularAPIView
from pydantic import BaseModel, ConfigDict, Field, RootModel

from pools.access.documents import RoleDoc
from pools.access.scoping import Rule
from pools.config.documents import PoolDoc
from pools.engine.rules import OPERATORS
from pools.quotas.documents import WEIGHTS

# Paths OSMO writes without a trailing slash (their routes accept both).
OSMO_PATHS = ("/api/auth/", "/api/workflow", "/api/pool/")


class SchemaView(SpectacularAPIView):
    read_access = Rule.SIGNED_IN


# The API's sign-in schemes, documented in the schema (defining an extension registers it). They live here, with
# the view that serves the schema, not beside the authentication classes, which every process imports (the admin's
# sign-in page imports the header login): drf-spectacular's extensions cost a `./manage.py` command about 0.2 s of
# imports it never uses.
class BearerScheme(OpenApiAuthenticationExtension):
    target_class = "pools.access.tokens.BearerAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A personal token from /api/auth/access_token/"}


class HeaderScheme(OpenApiAuthenticationExtension):
    target_class = "pools.access.idp.HeaderAuthentication"
    name = "proxyHeader"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": settings.ACCESS_HEADER_USER,
                "description": "Set by the authenticating proxy, from ACCESS_TRUSTED_PROXIES only, when "
                               "ACCESS_HEADER_LOGIN is on."}


def osmo_paths(result, generator, request, public):
    """drf-spectacular postprocessing hook: OSMO's auth routes as OSMO writes them, and the pydantic
    models' JSON Schema in OpenAPI 3.0's words."""
    result["paths"] = {path.rstrip("/") if path.startswith(OSMO_PATHS) else path: item
                       for path, item in result["paths"].items()}
    return _openapi_30(result)


def _openapi_30(node):
    """pydantic writes `anyOf: [X, {"type": "null"}]` and `const`; OpenAPI 3.0 says `nullable` and `enum`."""
    if isinstance(node, list):
        return [_openapi_30(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _openapi_30(value) for key, value in node.items()}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    alternatives = node.get("anyOf")
    if alternatives and {"type": "null"} in alternatives:
        rest = [item for item in alternatives if item != {"type": "null"}]
        node.pop("anyOf")
        if len(rest) == 1 and "$ref" not in rest[0]:
            node = {**rest[0], **node}
        else:
            node["anyOf" if len(rest) > 1 else "allOf"] = rest
        node["nullable"] = True
    return node


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PodTemplate(_Shape):
    """A pod template: Kubernetes pod fields, whose values may use {{VARIABLES}}."""

    apiVersion: str | None = None
    kind: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict, description="Kubernetes object metadata.")
    spec: dict[str, Any] = Field(default_factory=dict, description="A Kubernetes pod spec.")


class ValidationRule(_Shape):
    """One resource rule: left OPERATOR right, with {{USER_*}} and {{K8_*}} tokens."""

    operator: Literal[OPERATORS]
    left_operand: str | float
    right_operand: str | float
    assert_message: str = ""


class PoolsByName(_Shape):
    pools: dict[str, PoolDoc]


class RolesByName(_Shape):
    roles: dict[str, RoleDoc]


class PoolDocument(RootModel[PoolsByName | dict[str, PoolDoc] | PoolDoc]):
    """type pool: {"pools": {NAME: POOL}} (as GET answers), {NAME: POOL}, or one pool carrying "name" or
    named by the URL."""


class PodTemplateDocument(RootModel[dict[str, PodTemplate] | PodTemplate]):
    """type pod_template: {NAME: TEMPLATE} (as GET answers), or the template itself when the URL names it."""


class ResourceValidationDocument(RootModel[dict[str, list[ValidationRule]] | list[ValidationRule]]):
    """type resource_validation: {NAME: [RULE, ...]} (as GET answers), or the rule list when the URL names it."""


class RoleDocument(RootModel[RoleDoc | RolesByName | dict[str, RoleDoc] | list[RoleDoc]]):
    """type role: one role carrying "name" (as GET answers one), {"roles": {NAME: ROLE}} (as GET answers
    all), {NAME: ROLE}, or a list of roles."""


class ResourceQuota(_Shape):
    """One resource's quota in a pool: GPUs to hundredths, CPU in millicores or a quantity such as "500m",
    memory in bytes or a quantity such as "512Gi"; a limit of -1 is none."""

    deserved: float | str = 0
    limit: float | str = -1
    over_quota_weight: Literal[tuple(WEIGHTS)] = "Medium"  # type: ignore[valid-type]


class PoolQuota(_Shape):
    node_pool: str
    gpu: ResourceQuota | None = None
    cpu: ResourceQuota | None = None
    memory: ResourceQuota | None = None


class DepartmentDoc(_Shape):
    name: str | None = None
    description: str = ""
    default_node_pools: list[str] = []
    resources: list[PoolQuota] = []


class ProjectMembers(_Shape):
    users: list[str] = []
    roles: list[str] = []


class ProjectDoc(DepartmentDoc):
    department: str = "default"
    namespace: str | None = Field(None, description="A Kubernetes namespace name; proj-NAME when left out.")
    members: ProjectMembers | None = None


class DepartmentsByName(_Shape):
    departments: dict[str, DepartmentDoc]


class ProjectsByName(_Shape):
    projects: dict[str, ProjectDoc]


class DepartmentDocument(RootModel[DepartmentsByName | dict[str, DepartmentDoc] | DepartmentDoc
                                   | list[DepartmentDoc]]):
    """type department: {"departments": {NAME: DEPARTMENT}} (as GET answers all), {NAME: DEPARTMENT}, one
    department carrying "name" or named by the URL (as GET answers one), or a list of departments."""


class ProjectDocument(RootModel[ProjectsByName | dict[str, ProjectDoc] | ProjectDoc | list[ProjectDoc]]):
    """type project: {"projects": {NAME: PROJECT}} (as GET answers all), {NAME: PROJECT}, one project carrying
    "name" or named by the URL (as GET answers one), or a list of projects."""


class ConfigDocument(RootModel[PoolDocument | PodTemplateDocument | ResourceValidationDocument | RoleDocument
                               | DepartmentDocument | ProjectDocument]):
    """A configuration document of the URL's type, in any shape that type accepts; GET answers a shape
    that PUT accepts back unchanged."""
