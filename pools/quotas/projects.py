"""Facts about one project that its page shows and submission will use: who its members are and how each
holds membership (`Project.objects.visible_to` is the same rule as a query), and the pool list a workload
that names none is tried on (docs/concepts.md, workloads: the request's, else the project's, else its department's,
else `default`)."""

from dataclasses import dataclass

from django.conf import settings

from pools.models import Pool, Project, ProjectMember


@dataclass(frozen=True)
class Membership:
    kind: str  # user | role | pool | everyone
    name: str  # the user, the role or the pool; "" for everyone
    how: str


def memberships(project: Project) -> list[Membership]:
    """Everyone who holds membership, and how: the default project is open to every signed-in user (unless
    OSMO_DEFAULT_PROJECT_OPEN is off), a pool's own project to everyone who may use that pool, other projects
    to the users and role holders their document names."""
    found = []
    if project.name == Project.DEFAULT_NAME and settings.OSMO_DEFAULT_PROJECT_OPEN:
        found.append(Membership("everyone", "", "everyone: the default project is open to every signed-in user"))
    if project.pool_id is not None:
        pool = project.pool.name
        found.append(Membership("pool", pool, f"everyone who may use pool {pool}"))
    for member in project.members.order_by("kind", "name"):
        if member.kind == ProjectMember.Kind.USER:
            found.append(Membership("user", member.name, f"user {member.name}, by name"))
        else:
            found.append(Membership("role", member.name, f"everyone holding role {member.name}"))
    return found


@dataclass(frozen=True)
class DefaultPools:
    pools: list[str]
    source: str  # project | department | default

    @property
    def explanation(self) -> str:
        return {"project": "the project's own list",
                "department": "the project has none, so its department's list",
                "default": f"neither the project nor its department has one, so the {Pool.DEFAULT_NAME} pool"
                }[self.source]


def default_pools(project: Project) -> DefaultPools:
    if project.default_node_pools:
        return DefaultPools(list(project.default_node_pools), "project")
    if project.department.default_node_pools:
        return DefaultPools(list(project.department.default_node_pools), "department")
    return DefaultPools([Pool.DEFAULT_NAME], "default")
