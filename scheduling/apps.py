from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """Workloads, admission and dispatch: the "what runs where" half (filled by the scheduling issues)."""

    name = "scheduling"

    def ready(self) -> None:
        from django.db.models.signals import pre_delete

        from pools.config.defaults import demo_loaded
        from pools.config.kinds import deletion_check
        from pools.fleet.managed_jobs import managed_jobs_changed
        from pools.models import Pool, Project
        from pools.pages.node_page import workload_links
        from pools.quotas.demand import provide
        from scheduling.pages.node_links import visible_workload_links
        from scheduling.run.demand import pending_demand
        from scheduling.run.follow import on_managed_jobs_changed
        from scheduling.submit.references import keep_pool_name, keep_project_name, live_workloads

        managed_jobs_changed.connect(on_managed_jobs_changed, dispatch_uid="scheduling.run.follow")
        demo_loaded.connect(demo_history, dispatch_uid="scheduling.usage.demo")
        workload_links.connect(visible_workload_links, dispatch_uid="scheduling.pages.node_links")
        deletion_check(live_workloads)
        provide(pending_demand)
        pre_delete.connect(keep_project_name, sender=Project, dispatch_uid="scheduling.keep_project_name")
        pre_delete.connect(keep_pool_name, sender=Pool, dispatch_uid="scheduling.keep_pool_name")


def demo_history(sender, **kwargs) -> str:
    """`manage.py demo`: a week of usage history, so /usage/ is not empty on a new install."""
    import json

    from scheduling.usage import demo

    return f"Usage history: {json.dumps(demo.generate())}"
