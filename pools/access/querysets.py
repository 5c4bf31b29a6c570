"""`Pool.objects.visible_to(user)` and `Node.objects.visible_to(user)`: the one way to list what a
user may see. Kept free of model imports so `pools.models` can use it as its managers."""

from django.db import models


class PoolQuerySet(models.QuerySet):
    def visible_to(self, user) -> "PoolQuerySet":
        """The pools `user` may use (a user, or a request whose user is taken). Lazy: it adds a
        WHERE clause; the user's roles are read once per request."""
        from .scoping import access_for

        return access_for(user).filter_pools(self)


class NodeQuerySet(models.QuerySet):
    def visible_to(self, user) -> "NodeQuerySet":
        """Nodes with a membership in a pool `user` may use; staff also see nodes in no pool."""
        from .scoping import access_for

        return access_for(user).filter_nodes(self)
