"""What a submission reads, as SQL written out (issue 25, point 9).

Each of these was an ORM query whose compiling cost more CPU than PostgreSQL took to answer it: the project (with
its visibility rule and live counts) 2.2 ms to compile against 0.07 ms to run, and a submission made six such
queries. The rules stay where they are decided: which projects a user may see is `Project.objects.visible_to`
(its one-row twin, `pools.models.quotas.may_see_project`, decides here); the columns are the models'. Plain SQL that
SQLite and PostgreSQL both run; every value is a parameter."""

from django.db import connection

from pools.models import Department, Node, NodeMembership, Pool, Project, ProjectMember, Quota
from pools.models.quotas import may_see_project
from pools.models.visibility import Access
from scheduling.models import ALIVE, Workload

ALIVE_STATUSES = tuple(sorted(str(status) for status in ALIVE))


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _placeholders(values) -> str:
    return ", ".join(["%s"] * len(values))


def project(access: Access, name: str) -> Project | None:
    """Project `name` with its department, if `access` may see it, else None; with `live_project` (its live
    workloads) and `live_user` (the caller's, 0 for no one) for the limits. One query."""
    user = access.user if access.signed_in else None
    if user is None and not access.is_staff:
        return None
    roles = access.role_names if user is not None else []
    alive = _placeholders(ALIVE_STATUSES)
    role_term = f" OR (m.kind = %s AND m.name IN ({_placeholders(roles)}))" if roles else ""
    sql = (
        f"SELECT p.id, p.name, p.department_id, p.description, p.namespace, p.default_node_pools, p.pool_id, "
        f"p.limits, p.created_at, p.updated_at, d.name, d.default_node_pools, pl.name, "
        f"(SELECT count(*) FROM {_table(Workload)} w WHERE w.project_id = p.id AND w.status IN ({alive})), "
        f"(SELECT count(*) FROM {_table(Workload)} w WHERE w.submitter_id = %s AND w.status IN ({alive})), "
        f"EXISTS (SELECT 1 FROM {_table(ProjectMember)} m WHERE m.project_id = p.id "
        f"AND ((m.kind = %s AND m.name = %s){role_term})) "
        f"FROM {_table(Project)} p JOIN {_table(Department)} d ON d.id = p.department_id "
        f"LEFT JOIN {_table(Pool)} pl ON pl.id = p.pool_id WHERE p.name = %s")
    params = [*ALIVE_STATUSES, user.pk if user is not None else None, *ALIVE_STATUSES,
              ProjectMember.Kind.USER.value, user.get_username() if user is not None else "",
              *([ProjectMember.Kind.ROLE.value, *roles] if roles else []), name]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    (pk, name, department_id, description, namespace, default_pools, pool_id, limits, created_at, updated_at,
     department_name, department_pools, own_pool, live_project, live_user, member) = row
    if not may_see_project(access, name, member=bool(member), own_pool=own_pool):
        return None
    found = Project(id=pk, name=name, department_id=department_id, description=description, namespace=namespace,
                    default_node_pools=_json(Project, "default_node_pools", default_pools), pool_id=pool_id,
                    limits=_json(Project, "limits", limits), created_at=created_at, updated_at=updated_at)
    found.department = Department(id=department_id, name=department_name,
                                  default_node_pools=_json(Department, "default_node_pools", department_pools))
    found._state.adding, found._state.db = False, connection.alias
    found.live_project, found.live_user = live_project, live_user if user is not None else 0
    return found


def _json(model, field: str, value):
    """A JSON column as the model reads it (PostgreSQL's driver decodes jsonb; SQLite's gives the text)."""
    return model._meta.get_field(field).from_db_value(value, None, connection)


def node_shapes(pool_id: int, gpu_label: str) -> list[tuple[list[str], int, int, int, int, str, str, str]]:
    """The pool's nodes grouped by (platforms, allocatable CPU, GPU, memory, storage, GPU product, value of label
    `gpu_label`), each group named by its first node: (platforms, millicores, gpu, memory, storage, gpu product,
    name, label value or ""), by name."""
    label = "n.labels ->> %s" if connection.vendor == "postgresql" else "json_extract(n.labels, %s)"
    key = gpu_label if connection.vendor == "postgresql" else '$."' + gpu_label.replace('"', '') + '"'
    sql = (f"SELECT nm.platforms, n.cpu_allocatable, n.gpu_allocatable, n.memory_allocatable, "
           f"n.storage_allocatable, n.gpu_product, {label}, MIN(n.name) FROM {_table(NodeMembership)} nm "
           f"JOIN {_table(Node)} n ON n.id = nm.node_id WHERE nm.pool_id = %s GROUP BY 1, 2, 3, 4, 5, 6, 7")
    with connection.cursor() as cursor:
        cursor.execute(sql, [key, pool_id])
        rows = cursor.fetchall()
    return sorted(((_json(NodeMembership, "platforms", row[0]), *row[1:6], row[7], row[6] or "") for row in rows),
                  key=lambda row: row[6])


QUOTA_COLUMNS = ("id", "department_id", "project_id", "pool_id", "gpu_deserved", "cpu_deserved", "memory_deserved")


def department_quotas(pool_id: int, department_id: int) -> list[Quota]:
    """The quota rows of a department in a pool: its own and each of its projects' (only the deserved amounts
    are read)."""
    columns = ", ".join(f"q.{column}" for column in QUOTA_COLUMNS)
    sql = (f"SELECT {columns} FROM {_table(Quota)} q LEFT JOIN {_table(Project)} p ON p.id = q.project_id "
           f"WHERE q.pool_id = %s AND (q.department_id = %s OR p.department_id = %s)")
    with connection.cursor() as cursor:
        cursor.execute(sql, [pool_id, department_id, department_id])
        rows = cursor.fetchall()
    field = Quota._meta.get_field("gpu_deserved")
    quotas = []
    for row in rows:
        quota = Quota(**dict(zip(QUOTA_COLUMNS, row, strict=True)))
        quota.gpu_deserved = field.to_python(quota.gpu_deserved)  # SQLite's driver gives a float or text
        quotas.append(quota)
    return quotas
