"""The Django admin: configuration (pools, platforms, templates, validations, backends, nodes,
revisions), access (roles, tokens) and quotas (departments, projects). Every form saves through
`pools.config.writes`."""

from . import access, config, quotas

__all__ = ["access", "config", "quotas"]
