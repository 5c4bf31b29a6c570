"""Routes of access control: `api_patterns` are included under /api/, `page_patterns` at the root.
The auth routes are written as OSMO documents them (no trailing slash); a trailing slash is accepted too."""

from django.urls import path, re_path

from pools.access import api, oidc, pages, signin_limit

ID = r"(?P<user_id>[^/]+)"
NAME = r"(?P<name>[^/]+)"
ROLE = r"(?P<role_name>[^/]+)"

api_patterns = [
    re_path(r"^auth/user/?$", api.UserCreateView.as_view(), name="auth-users"),
    re_path(rf"^auth/user/{ID}/?$", api.UserView.as_view(), name="auth-user"),
    re_path(rf"^auth/user/{ID}/roles/?$", api.UserRolesView.as_view(), name="auth-user-roles"),
    re_path(rf"^auth/user/{ID}/roles/{ROLE}/?$", api.UserRoleView.as_view(), name="auth-user-role"),
    re_path(rf"^auth/user/{ID}/access_token/?$", api.UserTokensView.as_view(), name="auth-user-tokens"),
    re_path(rf"^auth/user/{ID}/access_token/{NAME}/?$", api.UserTokenView.as_view(), name="auth-user-token"),
    re_path(rf"^auth/roles/{ROLE}/users/?$", api.RoleUsersView.as_view(), name="auth-role-users"),
    re_path(r"^auth/jwt/access_token/?$", api.LoginTokenView.as_view(), name="auth-login-token"),
    re_path(r"^auth/access_token/?$", api.OwnTokensView.as_view(), name="auth-tokens"),
    re_path(rf"^auth/access_token/{NAME}/?$", api.OwnTokenView.as_view(), name="auth-token"),
    path("profile/", api.ProfileView.as_view(), name="profile"),
    path("configs/role/<str:name>/<str:template>/", api.GenerateRoleView.as_view(), name="config-role-generate"),
]

page_patterns = [
    path("accounts/login/", signin_limit.SignInView.as_view(), name="login"),
    path("accounts/logout/", oidc.LogoutView.as_view(), name="logout"),
    path("accounts/oidc/login/", oidc.login, name="oidc-login"),
    path("accounts/oidc/callback/", oidc.callback, name="oidc-callback"),
    path("profile/permissions/", pages.permissions, name="profile-permissions"),
]
