"""`./manage.py department list`: every department, as `GET /api/departments/` answers staff."""

from pools.api.quotas import DepartmentSerializer
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Department, Project
from pools.quotas import listing


class Command(CliCommand):
    help = "department list: every department with its projects and default pools."

    def add_arguments(self, parser):
        add_format(parser.add_subparsers(dest="verb", required=True, metavar="VERB").add_parser("list"))

    @clear_errors
    def handle(self, *args, verb, format, **options):
        departments = listing.departments(Department.objects.all(), Project.objects.all())
        rows = DepartmentSerializer([listing.department_row(d, listing.OPERATOR) for d in departments],
                                    many=True).data
        if format == "json":
            print_json(self.stdout, rows)
            return
        print_table(self.stdout, ["DEPARTMENT", "PROJECTS", "DEFAULT POOLS", "DESCRIPTION"],
                    [[r["name"], ",".join(r["projects"]) or "-", ",".join(r["default_node_pools"]) or "-",
                      r["description"] or "-"] for r in rows])
