from django.urls import path
from drf_spectacular.views import SpectacularAPIView

from pools.api import inventory, quotas, views

urlpatterns = [
    path("configs/history/", views.HistoryView.as_view(), name="config-history"),
    path("configs/history/rollback/", views.RollbackView.as_view(), name="config-rollback"),
    path("configs/history/diff/", views.DiffView.as_view(), name="config-diff"),
    path("configs/<slug:kind>/", views.ConfigDocumentView.as_view(), name="config-documents"),
    path("configs/<slug:kind>/<str:name>/", views.ConfigDocumentView.as_view(), name="config-document"),
    path("pools/", inventory.PoolListView.as_view(), name="api-pools"),
    path("pools/<str:name>/", inventory.PoolDetailView.as_view(), name="api-pool"),
    path("resources/", inventory.ResourceListView.as_view(), name="api-resources"),
    path("nodes/<str:name>/", inventory.NodeDetailView.as_view(), name="api-node"),
    path("nodes/<str:name>/labels", inventory.NodeLabelsView.as_view(), name="api-node-labels"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
]

# Departments, projects and the quota table: viewsets on their own router.
urlpatterns += quotas.router.urls
