"""The pages, under the `pages` namespace (one entry, `pages:*`, in the access matrix)."""

from django.urls import path

from . import audit_page, history_pages, node_page, quota_pages, views

app_name = "pages"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("nodes/", views.nodes, name="nodes"),
    path("nodes/<str:name>/", node_page.node_detail, name="node"),
    path("nodes/<str:name>/cordon/", node_page.node_cordon, name="node-cordon"),
    path("pools/<str:name>/", views.pool_detail, name="pool"),
    path("quotas/", quota_pages.quotas, name="quotas"),
    path("quotas/edit/", quota_pages.quota_edit, name="quota-edit"),
    path("projects/", quota_pages.projects, name="projects"),
    path("projects/<str:name>/", quota_pages.project_detail, name="project"),
    path("config/history/", history_pages.history_list, name="history"),
    path("audit/", audit_page.audit_list, name="audit"),
    path("config/history/diff/", history_pages.diff, name="diff"),
    path("config/history/rollback/", history_pages.rollback, name="rollback"),
    path("tables/<slug:table>/columns/", views.choose_columns, name="columns"),
]
