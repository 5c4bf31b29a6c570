"""Routes under /api/. The inventory and quota reads are viewsets on a router (basenames `api-pool`,
`api-resource`, `api-node`, `api-project`, `api-department`, `api-quota`); the label and cordon writes keep
gpuctl's path style without a trailing slash, so they are routed by hand. Every write is served with or without
the trailing slash (osmo_site.middleware.SlashEitherWayMiddleware)."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from pools.api import audit, docs, inventory, osmo_fleet, quotas, schema, views

router = SimpleRouter()
router.register("pools", inventory.PoolViewSet, basename="api-pool")
router.register("resources", inventory.ResourceViewSet, basename="api-resource")
router.register("nodes", inventory.NodeViewSet, basename="api-node")
router.register("projects", quotas.ProjectViewSet, basename="api-project")
router.register("departments", quotas.DepartmentViewSet, basename="api-department")
router.register("quotas", quotas.QuotaViewSet, basename="api-quota")

urlpatterns = [
    path("", docs.ApiRootView.as_view(), name="api-root"),
    path("docs/", docs.swagger, name="api-docs"),
    path("docs/redoc/", docs.redoc, name="api-docs-redoc"),
    path("configs/history/", views.HistoryView.as_view(), name="config-history"),
    path("configs/history/rollback/", views.RollbackView.as_view(), name="config-rollback"),
    path("configs/history/diff/", views.DiffView.as_view(), name="config-diff"),
    path("configs/<slug:kind>/", views.ConfigDocumentsView.as_view(), name="config-documents"),
    path("configs/<slug:kind>/<str:name>/", views.ConfigDocumentView.as_view(), name="config-document"),
    *router.urls,
    path("nodes/<str:name>/labels", inventory.NodeViewSet.as_view({"post": "labels"}), name="api-node-labels"),
    path("nodes/<str:name>/cordon", inventory.NodeViewSet.as_view({"post": "cordon"}), name="api-node-cordon"),
    path("nodes/<str:name>/uncordon", inventory.NodeViewSet.as_view({"post": "uncordon"}), name="api-node-uncordon"),
    path("schema/", schema.SchemaView.as_view(), name="api-schema"),
    path("audit/", audit.AuditView.as_view(), name="api-audit"),
    # OSMO's spellings (pools.api.osmo_fleet), for OSMO's CLI: no trailing slash. `resources` without the slash is
    # OSMO's shape (filters pools, all_pools, platforms); `resources/` with it is ours (filter pool).
    re_path(r"^pool_quota/?$", osmo_fleet.PoolQuotaView.as_view(), name="osmo-pool-quota"),
    re_path(r"^pool/?$", osmo_fleet.PoolView.as_view(), name="osmo-pools"),
    re_path(r"^resources$", osmo_fleet.ResourcesView.as_view(), name="osmo-resources"),
    re_path(r"^resources/(?P<name>[^/]+)/?$", osmo_fleet.ResourceView.as_view(), name="osmo-resource"),
]
