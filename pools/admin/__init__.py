"""The Django admin: configuration (pools, platforms, templates, validations, backends, nodes,
revisions) and access (roles, tokens). Every form saves through `pools.config.writes`."""

from . import access, config

__all__ = ["access", "config"]
