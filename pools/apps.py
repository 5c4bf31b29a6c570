from django.apps import AppConfig


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "Pools and configuration"

    def ready(self):
        from pools.access.roles import register_role_kind
        from pools.config import kinds, writes
        from pools.fleet.sync import memberships_follow_configuration

        writes.register_kinds()
        register_role_kind()
        kinds.after_write(memberships_follow_configuration)
