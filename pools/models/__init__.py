"""The `pools` app's models, one module per concern: `config` (backends, pools, platforms, templates,
validations, revisions), `quotas` (departments, projects, members, quotas), `inventory` (nodes,
memberships, pods, node events, sync log, usage snapshots), `access` (roles, assignments, tokens), `preferences`
(table columns), `signin` (failed sign-ins), `audit` (the append-only audit log). `visibility` decides which
rows a user sees."""

from .access import AccessToken, Role, RoleAssignment
from .audit import AuditEvent
from .config import (
    Backend,
    ConfigKind,
    ConfigRevision,
    Platform,
    PodTemplate,
    Pool,
    PoolQuerySet,
    ResourceValidation,
    RevisionCounter,
)
from .inventory import ManagedJob, Node, NodeEvent, NodeMembership, NodeQuerySet, Pod, SyncLog, UsageSnapshot
from .names import name_validator
from .preferences import Profile, TablePreference
from .quotas import Department, Project, ProjectMember, Quota
from .signin import SignInFailure

__all__ = [
    "AccessToken",
    "AuditEvent",
    "Backend",
    "ConfigKind",
    "ConfigRevision",
    "Department",
    "ManagedJob",
    "Node",
    "NodeEvent",
    "NodeMembership",
    "NodeQuerySet",
    "Platform",
    "Pod",
    "PodTemplate",
    "Pool",
    "PoolQuerySet",
    "Profile",
    "Project",
    "ProjectMember",
    "Quota",
    "ResourceValidation",
    "RevisionCounter",
    "Role",
    "RoleAssignment",
    "SignInFailure",
    "SyncLog",
    "TablePreference",
    "UsageSnapshot",
    "name_validator",
]
