from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """Workloads, admission and dispatch: the "what runs where" half (filled by the scheduling issues)."""

    name = "scheduling"

    def ready(self) -> None:
        from pools.fleet.managed_jobs import managed_jobs_changed
        from pools.pages.node_page import workload_links

        from .follow import on_managed_jobs_changed
        from .node_links import visible_workload_links

        managed_jobs_changed.connect(on_managed_jobs_changed, dispatch_uid="scheduling.follow")
        workload_links.connect(visible_workload_links, dispatch_uid="scheduling.node_links")
