from django.contrib import admin
from django.urls import include, path

from osmo_site import health
from pools.access import urls as access_urls
from scheduling.pages import profile as profile_pages

urlpatterns = [
    # Health and metrics (osmo_site.health): no sign-in, GET only.
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/", include("pools.api.urls")),
    path("api/", include(access_urls.api_patterns)),
    path("api/", include("scheduling.urls")),
    path("", include(access_urls.page_patterns)),
    # The profile page: one's own tokens and notification choices (scheduling.pages.profile).
    path("profile/", profile_pages.profile, name="profile-page"),
    path("profile/tokens/", profile_pages.token_create, name="profile-token-create"),
    path("profile/tokens/<str:name>/revoke/", profile_pages.token_revoke, name="profile-token-revoke"),
    path("profile/notifications/", profile_pages.notifications_save, name="profile-notifications-save"),
    path("profile/credentials/", profile_pages.credential_set, name="profile-credential-set"),
    path("profile/credentials/<str:name>/delete/", profile_pages.credential_delete, name="profile-credential-delete"),
    path("workloads/", include("scheduling.pages.urls")),
    path("usage/", include("scheduling.pages.usage_urls")),
    path("", include("pools.pages.urls")),
]

handler404 = "osmo_site.errors.not_found"
handler500 = "osmo_site.errors.server_error"
