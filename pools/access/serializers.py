"""The bodies of the access API, one serializer each (requests validated, responses documented), and the
strict JSON fields every API body uses (`pools.api` takes them from here, the layer below it).

A refused body answers 400 `{"detail", "field"}` naming the field (`pools.api.errors`)."""

from drf_spectacular.utils import OpenApiParameter, extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from pools.access import tokens
from pools.access.documents import MAX_NAME, RoleDoc
from pools.engine import ConfigError
from pools.engine.names import NAME_PATTERN
from pools.engine.user_names import user_name_problem
from pools.models import ConfigKind, Role, RoleAssignment

USER_ID_MAX = 150
USER_ID_PATTERN = r"^[^\s/]+$"


class StrictCharField(serializers.CharField):
    """A JSON string: a number or a boolean is refused rather than turned into text."""

    default_error_messages = {"invalid": "must be a string"}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """true or false, not "yes", 1 or "on"."""

    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


def names(help_text: str, **kwargs) -> serializers.ListField:
    return serializers.ListField(child=StrictCharField(), help_text=help_text, **kwargs)


def path_parameter(name: str, description: str, *, pattern: str | None = None, enum=None,
                   max_length: int | None = None) -> OpenApiParameter:
    """A path parameter as the schema types it (the URL itself takes any text up to the next '/', and
    answers 404 or 400 naming the field for a value outside the pattern)."""
    schema = {"type": "string"}
    if pattern:
        schema["pattern"] = pattern
    if max_length:
        schema["maxLength"] = max_length
    return OpenApiParameter(name, schema, OpenApiParameter.PATH, required=True, description=description, enum=enum)


def named(name: str, what: str, max_length: int | None = MAX_NAME) -> OpenApiParameter:
    """A parameter holding a configuration object's name (pools, platforms, templates, roles, tokens)."""
    return path_parameter(name, f"The {what}'s name: a letter first, a letter or digit last, and letters, "
                                "digits, '_', '.' and '-' between.", pattern=NAME_PATTERN, max_length=max_length)


USER_ID = path_parameter("user_id", "The user name.", pattern=USER_ID_PATTERN, max_length=USER_ID_MAX)
ROLE_NAME = named("role_name", "role")
TOKEN_NAME = named("name", "token")


def validated(body: type[serializers.Serializer], request) -> dict:
    """The request's JSON body checked by its one serializer (a refusal raises, naming the field)."""
    serializer = body(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


# ---- requests ---------------------------------------------------------------------------------------------

class UserCreateBody(serializers.Serializer):
    id = StrictCharField(max_length=USER_ID_MAX,
                         help_text="The user name: at most 150 characters, without spaces or '/'.")
    roles = names("Roles to assign; each must exist.", default=list)

    def validate_id(self, value: str) -> str:
        if any(char.isspace() or char == "/" for char in value):
            raise serializers.ValidationError(f"id must be at most {USER_ID_MAX} characters, without spaces or '/'")
        if problem := user_name_problem(value):
            raise serializers.ValidationError(f"id {problem}")
        return value

    def validate_roles(self, role_names: list[str]) -> list[Role]:
        roles = list(Role.objects.filter(name__in=role_names))
        missing = sorted(set(role_names) - {role.name for role in roles})
        if missing:
            raise serializers.ValidationError(f"Unknown role {', '.join(missing)}")
        return roles


class RoleAssignBody(serializers.Serializer):
    role_name = StrictCharField(help_text="The role to assign.")


class BulkAssignBody(serializers.Serializer):
    user_ids = names("The users to assign the role to; unknown ones are reported, not refused.")


@extend_schema_field({"type": "string", "example": "2026-12-31",
                      "description": "An ISO date (00:00 UTC that day) or date-time, in the future and at most "
                                     "ACCESS_TOKEN_MAX_DAYS ahead."})
class ExpiryField(serializers.Field):
    default_error_messages = {"required": "expires_at is required (an ISO date or date-time)"}

    def validate_empty_values(self, data):
        # null is a wrong expiry like any other, with the same message, not "may not be null".
        if data is empty:
            self.fail("required")
        return False, data

    def to_internal_value(self, data):
        try:
            return tokens.parse_expiry(data)
        except ConfigError as exc:
            raise serializers.ValidationError(exc.message) from None


class TokenCreateBody(serializers.Serializer):
    expires_at = ExpiryField()
    roles = names("Roles the token acts with (each held by its user); absent or null: all the user's roles, "
                  "whatever they are when it is used.", required=False, allow_null=True, default=None)


# ---- responses ----------------------------------------------------------------------------------------------

class AssignmentSerializer(serializers.Serializer):
    source = serializers.ChoiceField(choices=RoleAssignment.Source.choices)
    assigned_by = serializers.CharField()
    assigned_at = serializers.DateTimeField()


class UserRoleSerializer(AssignmentSerializer):
    name = serializers.CharField()


class UserSerializer(serializers.Serializer):
    id = serializers.CharField()
    is_staff = serializers.BooleanField()
    is_active = serializers.BooleanField()
    date_joined = serializers.DateTimeField()
    roles = UserRoleSerializer(many=True)


class UserAssignedSerializer(UserSerializer):
    assigned = serializers.BooleanField(help_text="False when the user held the role already.")


class RoleUserSerializer(AssignmentSerializer):
    id = serializers.CharField()


class RoleUsersSerializer(serializers.Serializer):
    role = serializers.CharField()
    users = RoleUserSerializer(many=True)


class FailedAssignmentSerializer(serializers.Serializer):
    id = serializers.CharField()
    detail = serializers.CharField()


class BulkAssignResultSerializer(serializers.Serializer):
    role = serializers.CharField()
    assigned = serializers.ListField(child=serializers.CharField())
    already_assigned = serializers.ListField(child=serializers.CharField())
    failed = FailedAssignmentSerializer(many=True)


class TokenSerializer(serializers.Serializer):
    name = serializers.CharField()
    user = serializers.CharField()
    prefix = serializers.CharField(help_text="The secret's first characters, to recognise it.")
    roles = serializers.ListField(child=serializers.CharField(), allow_null=True,
                                 help_text="null: the token acts with all its user's roles.")
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField()
    expires_at = serializers.DateTimeField()
    expired = serializers.BooleanField()
    last_used_at = serializers.DateTimeField(allow_null=True)


class NewTokenSerializer(TokenSerializer):
    token = serializers.CharField(help_text="The secret, shown this once: send it as Authorization: Bearer.")


class TokenListEntrySerializer(TokenSerializer):
    token_name = serializers.CharField(help_text="The name again, as OSMO's CLI reads it.")
    description = serializers.CharField(help_text="Always empty: tokens carry no description here.")


TokenListSerializer = TokenListEntrySerializer(many=True)


class UserListEntrySerializer(serializers.Serializer):
    id = serializers.CharField()
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(allow_null=True)
    is_staff = serializers.BooleanField()
    is_active = serializers.BooleanField()
    roles = serializers.ListField(child=serializers.CharField())


class UserListSerializer(serializers.Serializer):
    users = UserListEntrySerializer(many=True)
    total_results = serializers.IntegerField(help_text="Users matching the filters, all pages together.")


USER_LIST_PARAMETERS = [
    OpenApiParameter("count", int, description="At most this many users (100; at most 1000)."),
    OpenApiParameter("start_index", int, description="Skip this many (0)."),
    OpenApiParameter("id_prefix", str, description="Only users whose id starts with this."),
    OpenApiParameter("roles", str, many=True, description="Only users holding any of these roles."),
]


class LoginTokenBody(serializers.Serializer):
    token = StrictCharField(help_text="A personal access token (from /api/auth/access_token/{name}).")


class LoginTokenSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="A login token (a JWT): send it as Authorization: Bearer until it "
                                            "expires, then exchange the access token again.")
    expires_at = serializers.IntegerField(help_text="When the login token expires, in seconds since the epoch "
                                                    "(its `exp` claim).")
    name = serializers.CharField(help_text="The user it signs in.")


class GrantSerializer(serializers.Serializer):
    role = serializers.CharField(allow_null=True)
    rule = serializers.CharField()
    reason = serializers.CharField()


class ProfilePoolSerializer(serializers.Serializer):
    name = serializers.CharField()
    grants = GrantSerializer(many=True)


class ProfileSerializer(serializers.Serializer):
    id = serializers.CharField()
    is_staff = serializers.BooleanField()
    token = serializers.CharField(allow_null=True, help_text="The token this request came with, if any.")
    roles = serializers.ListField(child=serializers.CharField())
    pools = ProfilePoolSerializer(many=True, help_text="Every pool the caller may use, and what grants it.")
    default_project = serializers.CharField(help_text="The project a submission names when it names none: the one "
                                                      "set with PATCH, else `default`.")
    default_pool = serializers.CharField(allow_null=True, help_text="The pool a submission uses when it names none "
                                         "(before the project's default pools): set with PATCH or OSMO's "
                                         "`osmo profile set pool`; null: none chosen.")


class ProfileUpdateSerializer(serializers.Serializer):
    default_project = serializers.CharField(allow_null=True, required=False,
                                            help_text="A project you are a member of; null goes back to `default`.")
    default_pool = serializers.CharField(allow_null=True, required=False,
                                         help_text="A pool you may use; null forgets the choice.")


class PoolChangeSerializer(serializers.Serializer):
    pool = serializers.CharField()
    nodes_before = serializers.IntegerField()
    nodes_after = serializers.IntegerField()
    gpus_before = serializers.IntegerField()
    gpus_after = serializers.IntegerField()
    shared_nodes = serializers.IntegerField(help_text="Its nodes that become SHARED with a pool they were not "
                                                      "shared with before.")
    shared_gpus = serializers.IntegerField()
    shared_with = serializers.ListField(child=serializers.CharField(), help_text="Those pools (pools you may not "
                                                                                  "see are counted, not named).")


class ImpactSerializer(serializers.Serializer):
    """What a pool or pod template write does to the fleet (pools.inventory.impact.Impact)."""

    nodes_moved = serializers.IntegerField(help_text="Nodes whose pools change.")
    gpus_moved = serializers.IntegerField()
    nodes_shared = serializers.IntegerField(help_text="Nodes that become SHARED with a pool they were not shared "
                                                      "with before.")
    gpus_shared = serializers.IntegerField()
    pools = PoolChangeSerializer(many=True, help_text="Each pool the write changes, before and after.")
    summary = serializers.CharField()
    lines = serializers.ListField(child=serializers.CharField(), help_text="One line per pool, as the CLI prints.")


class WriteResultSerializer(serializers.Serializer):
    """What a configuration write did (pools.config.kinds.WriteResult)."""

    kind = serializers.ChoiceField(choices=ConfigKind.choices)
    created = serializers.ListField(child=serializers.CharField())
    updated = serializers.ListField(child=serializers.CharField())
    unchanged = serializers.ListField(child=serializers.CharField())
    deleted = serializers.ListField(child=serializers.CharField())
    revisions = serializers.ListField(child=serializers.IntegerField(), help_text="The new revisions' numbers.")
    backends_created = serializers.ListField(child=serializers.CharField(),
                                             help_text="Backends a pool named that did not exist yet (not connected).")
    warnings = serializers.ListField(child=serializers.CharField(),
                                     help_text="Accepted, but worth attention (a KAI pool's topology keys not yet "
                                               "checkable against node labels, say).")
    impact = ImpactSerializer(allow_null=True, help_text="Pools and pod templates: the nodes and GPUs the write "
                                                         "moves between pools; null for other kinds.")
    dry_run = serializers.BooleanField(required=False, help_text="With ?dry_run=1: true, and nothing was written.")


@extend_schema_field(RoleDoc)
class RoleDocumentField(serializers.JSONField):
    pass


class GeneratedRoleSerializer(WriteResultSerializer):
    """What `config set ROLE NAME pool|admin` wrote, and the role."""

    role = RoleDocumentField(help_text="The role as GET /api/configs/role/{name}/ answers it.")
