"""`./manage.py project list`: every project, as `GET /api/projects/` answers staff."""

from pools.api.quotas import ProjectSerializer
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Project
from pools.quotas import listing


class Command(CliCommand):
    help = "project list: every project with its department, namespace, default pools and members."

    def add_arguments(self, parser):
        add_format(parser.add_subparsers(dest="verb", required=True, metavar="VERB").add_parser("list"))

    @clear_errors
    def handle(self, *args, verb, format, **options):
        rows = ProjectSerializer([listing.project_row(project, listing.OPERATOR)
                                  for project in listing.projects(Project.objects.all())], many=True).data
        if format == "json":
            print_json(self.stdout, rows)
            return
        print_table(self.stdout, ["PROJECT", "DEPARTMENT", "NAMESPACE", "DEFAULT POOLS", "USERS", "ROLES"],
                    [[r["name"], r["department"], r["namespace"], ",".join(r["default_node_pools"]) or "-",
                      ",".join(r["members"]["users"]) or "-", ",".join(r["members"]["roles"]) or "-"] for r in rows])
