from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "Pools and configuration"

    def ready(self):
        from pools.access import audit  # noqa: F401 - connects the sign-in signals' audit rows
        from pools.access.roles import register_role_kind
        from pools.config import kinds, writes
        from pools.fleet.sync import memberships_follow_configuration
        from pools.quotas.writes import pool_projects_follow_pools, register_quota_kinds
        from pools.render_limits import connect as render_limits_follow_settings
        from pools.schedulers.outbox import engines_follow_configuration

        writes.register_kinds()
        register_role_kind()
        register_quota_kinds()
        kinds.after_write(memberships_follow_configuration)
        kinds.after_write(pool_projects_follow_pools)
        kinds.after_write(engines_follow_configuration)
        render_limits_follow_settings()
