"""The workload pages, under the `workloads` namespace (one entry, `workloads:*`, in the access matrix)."""

from django.urls import path

from scheduling.pages import idle as idle_page
from scheduling.pages import logs as page_logs
from scheduling.pages import submit_form
from scheduling.pages import workloads as pages

app_name = "workloads"

urlpatterns = [
    path("", pages.workload_list, name="list"),
    path("queue/", pages.queue, name="queue"),
    path("new/", submit_form.new_workload, name="new"),
    path("new/dry-run/", submit_form.dry_run, name="dry-run"),
    path("idle/", idle_page.idle_list, name="idle"),
    path("<uuid:pk>/", pages.workload_detail, name="detail"),
    path("<uuid:pk>/cancel/", pages.workload_cancel, name="cancel"),
    path("<uuid:pk>/logs/", page_logs.workload_logs, name="logs"),
]
