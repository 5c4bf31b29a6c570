"""The Django admin: configuration (pools, platforms, templates, validations, backends, nodes,
revisions), access (roles, tokens, users' roles and projects) and quotas (departments, projects). Every
form saves through `pools.config.writes`."""

from . import access, config, quotas, signin, users

__all__ = ["access", "config", "quotas", "signin", "users"]
