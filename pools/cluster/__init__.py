"""The only package that talks to Kubernetes (see interface.py for what it offers)."""

from .interface import (
    DEFAULT_PAGE_SIZE,
    WHOLE_LOG,
    Cluster,
    ClusterError,
    Conflict,
    Expired,
    ListPage,
    LogQuery,
    NotFound,
    ObjectKind,
    Unavailable,
    WatchEvent,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "WHOLE_LOG",
    "Cluster",
    "ClusterError",
    "Conflict",
    "Expired",
    "ListPage",
    "LogQuery",
    "NotFound",
    "ObjectKind",
    "Unavailable",
    "WatchEvent",
]
