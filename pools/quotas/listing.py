"""Read side of departments, projects and the quota table, for one viewer: what the API answers and the CLI
prints. A viewer is described by a `Viewer`: the pools whose names it may be told (`Access.visible_pool_names`, through
the one redaction rule, `pools.models.visibility.redact`) and the member roles it may see (None: everything,
as for staff and the CLI). Every list takes its rows from `visible_to`, in a
fixed number of queries whatever the counts.
"""

from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch, QuerySet

from pools.models import Department, Pool, Project
from pools.models.visibility import access_for, redact
from pools.quotas.figures import PoolTable, quota_tables


@dataclass(frozen=True)
class Viewer:
    pools: frozenset[str] | None = None  # names of the pools the viewer may see; None: every pool
    roles: frozenset[str] | None = None  # member roles the viewer may see (those it holds); None: every role

    def pool_names(self, names) -> list[str]:
        return redact(names, self.pools)


OPERATOR = Viewer()  # the CLI: run by operators, names everything


def viewer_of(request) -> Viewer:
    """The request's user: staff see everything; others the pools they may use and the roles they hold."""
    access = access_for(request)
    if access.is_staff:
        return OPERATOR
    return Viewer(pools=access.visible_pool_names, roles=frozenset(access.role_names))


def projects(queryset: QuerySet[Project]) -> QuerySet[Project]:
    """Projects with what a row shows (department, own pool, members) in three queries."""
    return queryset.select_related("department", "pool").prefetch_related("members").order_by("name")


def departments(queryset: QuerySet[Department], visible_projects: QuerySet[Project]) -> QuerySet[Department]:
    """Departments with the names of the projects the viewer may see (`visible_projects`), in two queries."""
    return queryset.prefetch_related(
        Prefetch("projects", queryset=visible_projects.only("name", "department_id").order_by("name"),
                 to_attr="visible_projects")).order_by("name")


def project_row(project: Project, viewer: Viewer) -> dict[str, Any]:
    members: dict[str, list[str]] = {"users": [], "roles": []}
    for member in project.members.all():  # prefetched, ordered by kind and name
        if member.kind == member.Kind.USER:
            members["users"].append(member.name)
        elif viewer.roles is None or member.name in viewer.roles:
            members["roles"].append(member.name)
    own_pool = project.pool.name if project.pool is not None else None
    return {"name": project.name, "department": project.department.name, "description": project.description,
            "namespace": project.namespace, "default_node_pools": viewer.pool_names(project.default_node_pools),
            "pool": own_pool if own_pool is not None and viewer.pool_names([own_pool]) else None,
            "members": members}


def department_row(department: Department, viewer: Viewer) -> dict[str, Any]:
    return {"name": department.name, "description": department.description,
            "default_node_pools": viewer.pool_names(department.default_node_pools),
            "projects": [project.name for project in department.visible_projects]}


def quota_rows(pools: list[Pool], projects: list[Project] | None = None,
               department: str | None = None) -> list[dict[str, Any]]:
    """The quota table's rows of `pools` (as `UnitRow.as_dict`), pool by pool: every department and project
    when `projects` is None, else only those projects' rows (fair shares are computed over everyone either
    way); only the rows of `department` when it is given."""
    return rows_of(quota_tables(pools, projects) if pools else [], department)


def rows_of(tables: list[PoolTable], department: str | None = None) -> list[dict[str, Any]]:
    return [row.as_dict() for table in tables for row in table.rows
            if department is None or row.department == department]
