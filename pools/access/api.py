"""`/api/auth/...` (users, role assignments, tokens) and `/api/profile/`, in OSMO's shapes (seed 000,
step 5). Every view declares its access rule; errors are `{"detail", "field"}` JSON."""

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import APIException, ErrorDetail
from rest_framework.response import Response
from rest_framework.views import APIView

from pools.access import assignments, login_tokens, tokens
from pools.access import serializers as bodies
from pools.access.assignments import describe_user
from pools.access.documents import check_access_name
from pools.access.roles import GENERATORS, generated_role
from pools.access.scoping import Rule
from pools.config import writes
from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.models import AccessToken, ConfigKind, Pool, Profile, Project, Role
from pools.models.quotas import default_project_name
from pools.models.visibility import access_for


class Problem(APIException):
    """A refusal with our error shape and any status (DRF's handler passes dict details through)."""

    def __init__(self, detail: str, field: str | None = None, status: int = 400):
        self.status_code = status
        self.detail = {"detail": ErrorDetail(detail), "field": field}


class AccessView(APIView):
    read_access = Rule.ADMIN
    write_access = Rule.ADMIN

    def handle_exception(self, exc):
        if isinstance(exc, tokens.Conflict):
            exc = Problem(exc.message, exc.field or None, status=409)
        return super().handle_exception(exc)


def _user(user_id: str):
    try:
        return get_user_model().objects.get(username=user_id)
    except get_user_model().DoesNotExist:
        raise ConfigNotFound(f"There is no user {user_id!r}", field="id") from None


def _role(name: str) -> Role:
    try:
        return Role.objects.get(name=name)
    except Role.DoesNotExist:
        raise ConfigNotFound(f"There is no role {name!r}", field="role_name") from None


def _is_staff_account(user) -> bool:
    return user.is_staff or user.is_superuser


def _guard_staff(request, user, what: str) -> None:
    """A role that manages users must not reach staff powers through a staff user's token or account:
    whatever the role's policies allow, only staff act on staff users, their roles and their tokens."""
    if _is_staff_account(user) and not access_for(request).is_staff:
        raise Problem(f"Only staff may {what} a staff user", "id", status=403)


USER_LIST_MAX = 1000


def _count(value, name: str, default: int) -> int:
    if value in (None, ""):
        return default
    if not str(value).isdigit():
        raise ConfigError(f"{name}: {value!r} is not a whole number", field=name)
    return int(value)


class UserCreateView(AccessView):
    """GET /api/auth/user (OSMO's `osmo user list`: `?count`, `?start_index`, `?id_prefix`, `?roles`): `{users: [{id,
    created_at, roles}], total_results}`, staff or an admin role. POST /api/auth/user {"id", "roles"?}: a user who
    signs in through the identity provider or with tokens."""

    @extend_schema(operation_id="auth_user_list", responses=bodies.UserListSerializer,
                   parameters=bodies.USER_LIST_PARAMETERS)
    def get(self, request):
        params = request.query_params
        count = min(_count(params.get("count"), "count", 100), USER_LIST_MAX)
        start = _count(params.get("start_index"), "start_index", 0)
        users = get_user_model().objects.order_by("username")
        if params.get("id_prefix"):
            users = users.filter(username__startswith=params["id_prefix"])
        roles = [name for name in params.getlist("roles") if name]
        if roles:
            users = users.filter(role_assignments__role__name__in=roles).distinct()
        total = users.count()
        page = list(users.prefetch_related("role_assignments__role")[start:start + count])
        return Response({"users": [{
            "id": user.get_username(), "created_at": user.date_joined.isoformat(), "created_by": None,
            "is_staff": user.is_staff, "is_active": user.is_active,
            "roles": sorted(a.role.name for a in user.role_assignments.all())} for user in page],
            "total_results": total})

    @extend_schema(request=bodies.UserCreateBody, responses={201: bodies.UserSerializer})
    def post(self, request):
        body = bodies.validated(bodies.UserCreateBody, request)
        user_id = body["id"]
        try:
            with transaction.atomic():
                user = get_user_model().objects.create_user(username=user_id)
                assignments.add([(user, role) for role in body["roles"]], by=request.user.get_username())
        except IntegrityError:
            raise Problem(f"User {user_id!r} already exists", "id", status=409) from None
        return Response(describe_user(user), status=201)


@extend_schema(parameters=[bodies.USER_ID])
class UserView(AccessView):
    @extend_schema(responses=bodies.UserSerializer)
    def get(self, request, user_id):
        return Response(describe_user(_user(user_id)))

    @extend_schema(responses={204: None})
    def delete(self, request, user_id):
        user = _user(user_id)
        if user.pk == request.user.pk:
            raise ConfigError("You cannot delete yourself", field="id")
        _guard_staff(request, user, "delete")
        user.delete()
        return Response(status=204)


@extend_schema(parameters=[bodies.USER_ID])
class UserRolesView(AccessView):
    """POST /api/auth/user/{id}/roles {"role_name"}; assigning a held role again changes nothing."""

    @extend_schema(request=bodies.RoleAssignBody,
                   responses={201: bodies.UserAssignedSerializer, 200: bodies.UserAssignedSerializer})
    def post(self, request, user_id):
        user = _user(user_id)
        _guard_staff(request, user, "assign a role to")
        role = _role(bodies.validated(bodies.RoleAssignBody, request)["role_name"])
        added, _ = assignments.add([(user, role)], by=request.user.get_username())
        return Response({**describe_user(user), "assigned": bool(added)}, status=201 if added else 200)


@extend_schema(parameters=[bodies.USER_ID, bodies.ROLE_NAME])
class UserRoleView(AccessView):
    @extend_schema(responses={204: None})
    def delete(self, request, user_id, role_name):
        user = _user(user_id)
        _guard_staff(request, user, "remove a role from")
        if assignments.remove(user, [_role(role_name)]):
            raise ConfigNotFound(f"{user_id} does not hold role {role_name}", field="role_name")
        return Response(status=204)


@extend_schema(parameters=[bodies.ROLE_NAME])
class RoleUsersView(AccessView):
    @extend_schema(responses=bodies.RoleUsersSerializer)
    def get(self, request, role_name):
        role = _role(role_name)
        assignments = role.assignments.select_related("user").order_by("user__username")
        return Response({"role": role.name, "users": [
            {"id": a.user.get_username(), "source": a.source, "assigned_by": a.assigned_by,
             "assigned_at": a.assigned_at.isoformat()} for a in assignments]})

    @extend_schema(request=bodies.BulkAssignBody, responses=bodies.BulkAssignResultSerializer)
    def post(self, request, role_name):
        """{"user_ids": [...]} -> which were assigned, already assigned, or failed (and why)."""
        role = _role(role_name)
        user_ids = bodies.validated(bodies.BulkAssignBody, request)["user_ids"]
        users = {u.get_username(): u for u in get_user_model().objects.filter(username__in=user_ids)}
        for user in users.values():
            _guard_staff(request, user, "assign a role to")
        named = list(dict.fromkeys(user_ids))
        added, held = assignments.add([(users[name], role) for name in named if name in users],
                                      by=request.user.get_username())
        return Response({"role": role.name, "assigned": [user.get_username() for user, _ in added],
                         "already_assigned": [user.get_username() for user, _ in held],
                         "failed": [{"id": name, "detail": "no such user"} for name in named if name not in users]})


# ---- tokens -----------------------------------------------------------------------------------------

def _create_token(request, user, name: str) -> Response:
    body = bodies.validated(bodies.TokenCreateBody, request)
    access = access_for(request)
    restricted = access.token is not None and not access.token.all_roles
    token, secret = tokens.create_token(
        user, name, body["expires_at"], roles=body["roles"],
        allowed_roles=set(access.role_names) if restricted and user.pk == request.user.pk else None,
        created_by=request.user.get_username())
    return Response(tokens.describe(token, secret), status=201)


def _token_list(user) -> Response:
    """A list, as OSMO's `osmo token list` reads it (`token_name`, `description`, `expires_at`, `roles`), each entry
    also in our own token shape (`name`, `roles` null for a token that acts with all its user's roles...)."""
    rows = AccessToken.objects.filter(user=user).select_related("user").prefetch_related("roles")
    return Response([{**tokens.describe(token), "token_name": token.name, "description": ""} for token in rows])


class OwnTokensView(AccessView):
    read_access = Rule.SIGNED_IN

    @extend_schema(responses=bodies.TokenListSerializer)
    def get(self, request):
        return _token_list(request.user)


@extend_schema(parameters=[bodies.TOKEN_NAME])
class OwnTokenView(AccessView):
    """POST creates the caller's token (the response carries the secret, once); DELETE revokes it."""

    write_access = Rule.SIGNED_IN

    @extend_schema(request=bodies.TokenCreateBody, responses={201: bodies.NewTokenSerializer})
    def post(self, request, name):
        return _create_token(request, request.user, name)

    @extend_schema(responses={204: None})
    def delete(self, request, name):
        tokens.revoke_token(request.user, name)
        return Response(status=204)


@extend_schema(parameters=[bodies.USER_ID])
class UserTokensView(AccessView):
    @extend_schema(responses=bodies.TokenListSerializer)
    def get(self, request, user_id):
        return _token_list(_user(user_id))


@extend_schema(parameters=[bodies.USER_ID, bodies.TOKEN_NAME])
class UserTokenView(AccessView):
    @extend_schema(request=bodies.TokenCreateBody, responses={201: bodies.NewTokenSerializer})
    def post(self, request, user_id, name):
        user = _user(user_id)
        _guard_staff(request, user, "create a token for")
        return _create_token(request, user, name)

    @extend_schema(responses={204: None})
    def delete(self, request, user_id, name):
        user = _user(user_id)
        _guard_staff(request, user, "revoke a token of")
        tokens.revoke_token(user, name)
        return Response(status=204)


class LoginTokenView(APIView):
    """POST /api/auth/jwt/access_token {"token": T}: a short-lived login token (JWT) for the personal token T,
    as OSMO's CLI logs in and refreshes (`pools.access.login_tokens`). Open to anyone: T is the credential."""

    authentication_classes = ()
    permission_classes = ()

    @extend_schema(request=bodies.LoginTokenBody, responses=bodies.LoginTokenSerializer, auth=[])
    def post(self, request):
        secret = request.data.get("token") if isinstance(request.data, dict) else None
        try:
            token, login_token, expires = login_tokens.exchange(secret)
        except login_tokens.Refused as exc:
            raise Problem(str(exc), "token", status=401) from None
        tokens.mark_used(token)
        return Response({"token": login_token, "expires_at": expires, "name": token.user.get_username()})


# ---- profile and generated roles --------------------------------------------------------------------

def profile(request) -> dict:
    """Who the caller is and, for each pool they may use, every role and rule that grants it."""
    access = access_for(request)
    pools = list(Pool.objects.visible_to(request).order_by("name").values_list("name", flat=True))
    chosen = Profile.objects.filter(user=request.user).values_list("default_project__name",
                                                                   "default_pool__name").first()
    return {
        "id": request.user.get_username(),
        "is_staff": access.is_staff,
        "token": access.token.name if access.token is not None else None,
        "roles": access.role_names,
        "pools": [{"name": name, "grants": [grant.as_dict() for grant in access.pool_grants(name)]}
                  for name in pools],
        "default_project": (chosen and chosen[0]) or default_project_name(access, chosen=False),
        "default_pool": chosen[1] if chosen and chosen[1] in pools else None,
    }


def set_default_pool(request, name) -> None:
    """The pool one's submissions use when they name none: one the caller may use, or None to forget it."""
    pool = None
    if name is not None:
        pool = Pool.objects.visible_to(request).filter(name=name).first() if isinstance(name, str) else None
        if pool is None:
            # Not echoed: the answer is the same for a pool that exists and one that does not.
            raise ConfigError("pool: not a pool you may use (GET /api/pools/ lists yours)", field="pool")
    Profile.objects.update_or_create(user=request.user, defaults={"default_pool": pool})


class ProfileView(AccessView):
    read_access = Rule.SIGNED_IN

    write_access = Rule.SIGNED_IN

    @extend_schema(responses=bodies.ProfileSerializer)
    def get(self, request):
        return Response(profile(request))

    @extend_schema(request=bodies.ProfileUpdateSerializer, responses=bodies.ProfileSerializer)
    def patch(self, request):
        """Set the default project of one's submissions (a project one is a member of) and/or their default pool
        (a pool one may use); null forgets either."""
        data = request.data if isinstance(request.data, dict) else {}
        if "default_project" not in data and "default_pool" not in data:
            raise ConfigError("default_project: give default_project and/or default_pool (a name, or null)",
                              field="default_project")
        if "default_pool" in data:
            try:
                set_default_pool(request, data["default_pool"])
            except ConfigError as exc:
                raise ConfigError(exc.message.replace("pool:", "default_pool:", 1), field="default_pool") from None
        if "default_project" in data:
            name = data["default_project"]
            project = None
            if name is not None:
                project = Project.objects.visible_to(request).filter(name=name).first() \
                    if isinstance(name, str) else None
                if project is None:
                    raise ConfigError(f"default_project: {name!r} is not a project you are a member of",
                                      field="default_project")
            Profile.objects.update_or_create(user=request.user, defaults={"default_project": project})
        return Response(profile(request))


class GenerateRoleView(AccessView):
    """POST /api/configs/role/{name}/{template}/: `config set ROLE NAME pool|admin` over HTTP."""

    @extend_schema(request=None, responses=bodies.GeneratedRoleSerializer, parameters=[
        bodies.named("name", "role"),
        bodies.path_parameter("template", "pool: use the pools the name grants (osmo-NAME: pools NAME*); "
                                          "admin: every API.", enum=GENERATORS)])
    def post(self, request, name, template):
        check_access_name(name)
        result = writes.import_document(ConfigKind.ROLE, generated_role(name, template), name=name,
                                         author=request.user, description=f"Generated {template} role")
        return Response({**result.as_dict(), "role": writes.export(ConfigKind.ROLE, name)})
