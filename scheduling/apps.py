from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """Workloads, admission and dispatch: the "what runs where" half (filled by the scheduling issues)."""

    name = "scheduling"

    def ready(self) -> None:
        from pools.fleet.managed_jobs import managed_jobs_changed

        from .follow import on_managed_jobs_changed

        managed_jobs_changed.connect(on_managed_jobs_changed, dispatch_uid="scheduling.follow")
