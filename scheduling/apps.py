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
        from pools.pages.hooks import workload_links
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
        from django.core import checks

        checks.register(kind_settings_check)


def kind_settings_check(app_configs=None, **kwargs) -> list:
    """OSMO_LINK_TEMPLATES and OSMO_NOTEBOOK_IDLE_RULES (issue 43) mean something: `manage.py check` (and every
    start) names the key at fault rather than dispatch or the sweep failing on it later."""
    from django.core.checks import Error

    from pools.engine import ConfigError
    from scheduling.run import idle_notebooks, links

    found = []
    for name, read in (("OSMO_LINK_TEMPLATES", links.templates), ("OSMO_NOTEBOOK_IDLE_RULES", idle_notebooks.rules)):
        try:
            read()
        except (ConfigError, ValueError) as exc:
            found.append(Error(str(getattr(exc, "message", exc)), id=f"scheduling.E043.{name}"))
    return found


def demo_history(sender, **kwargs) -> str:
    """`manage.py demo`: a week of usage history, so /usage/ is not empty on a new install."""
    import json

    from scheduling.usage import demo

    return f"Usage history: {json.dumps(demo.generate())}"
