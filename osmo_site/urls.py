from django.contrib import admin
from django.urls import include, path

from pools.access import urls as access_urls

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("pools.api.urls")),
    path("api/", include(access_urls.api_patterns)),
    path("api/", include("scheduling.urls")),
    path("", include(access_urls.page_patterns)),
    path("workloads/", include("scheduling.page_urls")),
    path("", include("pools.pages.urls")),
]
