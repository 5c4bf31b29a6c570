"""The workload pages, under the `workloads` namespace (one entry, `workloads:*`, in the access matrix)."""

from django.urls import path

from scheduling.pages import workloads as pages

app_name = "workloads"

urlpatterns = [
    path("", pages.workload_list, name="list"),
    path("queue/", pages.queue, name="queue"),
    path("<uuid:pk>/", pages.workload_detail, name="detail"),
    path("<uuid:pk>/cancel/", pages.workload_cancel, name="cancel"),
]
