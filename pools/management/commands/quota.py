"""`./manage.py quota list`: the quota table, as `GET /api/quotas/` answers it (every row: the CLI is the
operator's; `--as-user NAME` shows what that user sees)."""

from django.contrib.auth import get_user_model

from pools.api.quotas import QuotaRowSerializer
from pools.config.history import ConfigNotFound
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Department, Pool, Project
from pools.quotas import listing
from pools.quotas.fairshare import Resource
from pools.quotas.figures import quota_tables


def limit(value) -> str:
    return "none" if value == -1 else str(value)


class Command(CliCommand):
    help = ("quota list: per pool, each department and project with its GPUs deserved, limit, over-quota weight, "
            "allocated, fair share and GPUs over quota (borrowed).")

    def add_arguments(self, parser):
        listing_parser = parser.add_subparsers(dest="verb", required=True, metavar="VERB").add_parser(
            "list", help="The quota table; --format json prints the API's rows with CPU and memory too.")
        listing_parser.add_argument("--pool", help="Only this pool.")
        listing_parser.add_argument("--project", help="Only this project's rows.")
        listing_parser.add_argument("--department", help="Only this department's rows (its own and its projects').")
        listing_parser.add_argument("--as-user", metavar="USER",
                                    help="What USER sees (as GET /api/quotas/ answers them): their projects' rows "
                                         "in the pools they may use, with the same fair shares.")
        add_format(listing_parser)

    @clear_errors
    def handle(self, *args, verb, format, pool=None, project=None, department=None, as_user=None, **options):
        user = _user(as_user) if as_user else None
        scoped = user is not None and not user.is_staff
        pools = (Pool.objects.visible_to(user) if scoped else Pool.objects.all()).order_by("name")
        if pool:
            pools = pools.filter(name=pool)
            _exists(pools, "pool", pool)
        projects = list(Project.objects.visible_to(user)) if scoped else None
        if project:
            projects = list((Project.objects.visible_to(user) if scoped else Project.objects).filter(name=project))
            _exists(projects, "project", project)
        if department:
            _exists(Department.objects.filter(name=department), "department", department)
        tables = quota_tables(list(pools), projects)
        rows = QuotaRowSerializer(listing.rows_of(tables, department), many=True).data
        if format == "json":
            print_json(self.stdout, rows)
            return
        print_table(self.stdout, ["POOL", "DEPARTMENT", "PROJECT", "GPU DESERVED", "LIMIT", "WEIGHT", "ALLOCATED",
                                  "PENDING", "FAIR SHARE", "OVER QUOTA", "STARVED"],
                    [[r["pool"], r["department"], r["project"] or "-", r["gpu"]["deserved"], limit(r["gpu"]["limit"]),
                      r["gpu"]["over_quota_weight"], r["gpu"]["allocated"], r["gpu"]["pending"],
                      r["gpu"]["fair_share"], r["gpu"]["over_quota"], "yes" if r["gpu"]["starved"] else "-"]
                     for r in rows])
        for table in tables:
            if table.over_subscribed_by[Resource.GPU]:
                self.stdout.write(f"Pool {table.pool} is over-subscribed: its departments deserve "
                                  f"{table.over_subscribed_by[Resource.GPU]} GPUs more than its "
                                  f"{table.capacity[Resource.GPU]} usable GPUs.")


def _user(name: str):
    user = get_user_model().objects.filter(username=name).first()
    if user is None:
        raise ConfigNotFound(f"There is no user named {name!r}")
    return user


def _exists(found, kind: str, name: str) -> None:
    if not found:
        raise ConfigNotFound(f"There is no {kind} named {name!r}; `./manage.py {kind} list` shows them")
