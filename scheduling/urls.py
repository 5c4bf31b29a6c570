"""Routes under /api/: the workloads viewset (basename `api-workload`) and OSMO's workflow paths, kept
exactly as OSMO spells them (no trailing slash; a trailing slash is accepted too)."""

from django.urls import path, re_path
from rest_framework.routers import SimpleRouter

from scheduling.api import logs as api_logs
from scheduling.api import notifications as notify_api
from scheduling.api import osmo, osmo_account, osmo_credentials
from scheduling.api import workloads as api
from scheduling.api.usage import UsageView

router = SimpleRouter()
router.register("workloads", api.WorkloadViewSet, basename="api-workload")

NAME = r"(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]*)"
UUID = r"(?P<pk>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"
urlpatterns = [
    re_path(rf"^workloads/{UUID}/logs/?$", api_logs.WorkloadLogsView.as_view(), name="api-workload-logs"),
    *router.urls,
    path("usage/", UsageView.as_view(), name="api-usage"),
    re_path(r"^pool/(?P<pool>[^/]+)/workflow/?$", osmo.SubmitWorkflowView.as_view(), name="osmo-submit"),
    re_path(r"^workflow/?$", osmo.WorkflowListView.as_view(), name="osmo-workflows"),
    re_path(rf"^workflow/{NAME}/?$", osmo.WorkflowView.as_view(), name="osmo-workflow"),
    re_path(rf"^workflow/{NAME}/logs/?$", api_logs.WorkflowLogsView.as_view(), name="osmo-workflow-logs"),
    re_path(rf"^workflow/{NAME}/error_logs/?$", api_logs.WorkflowErrorLogsView.as_view(),
            name="osmo-workflow-error-logs"),
    re_path(rf"^workflow/{NAME}/events/?$", osmo.WorkflowEventsView.as_view(), name="osmo-workflow-events"),
    re_path(rf"^workflow/{NAME}/spec/?$", osmo.WorkflowSpecView.as_view(), name="osmo-workflow-spec"),
    re_path(rf"^workflow/{NAME}/portforward/(?P<task>[^/]+)/?$", osmo.PortForwardView.as_view(),
            name="osmo-workflow-portforward"),
    re_path(rf"^workflow/{NAME}/cancel/?$", osmo.CancelWorkflowView.as_view(), name="osmo-workflow-cancel"),
    re_path(r"^profile/settings/?$", osmo_account.ProfileSettingsView.as_view(), name="osmo-profile-settings"),
    re_path(r"^version/?$", osmo_account.VersionView.as_view(), name="osmo-version"),
    re_path(r"^credentials/?$", osmo_credentials.CredentialListView.as_view(), name="osmo-credentials"),
    re_path(r"^credentials/(?P<name>[^/]+)/?$", osmo_credentials.CredentialView.as_view(), name="osmo-credential"),
    path("profile/notifications/", notify_api.OwnNotificationsView.as_view(), name="profile-notifications"),
    path("notifications/projects/<str:project>/", notify_api.ProjectNotificationsView.as_view(),
         name="project-notifications"),
]
