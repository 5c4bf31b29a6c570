from django.contrib import admin
from django.urls import include, path

from osmo_site import health
from pools.access import urls as access_urls

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
    path("workloads/", include("scheduling.pages.urls")),
    path("usage/", include("scheduling.usage.urls")),
    path("", include("pools.pages.urls")),
]

handler404 = "osmo_site.errors.not_found"
handler500 = "osmo_site.errors.server_error"
