"""`./manage.py project list`: every project, as `GET /api/projects/` answers staff; `project add-member PROJECT
USER`: onboard a person in one step (an account if they have none, membership, the project's pools), as
`POST /api/projects/{name}/members/`."""

from pools.api.quotas import ProjectSerializer
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Project
from pools.quotas import listing, onboarding


class Command(CliCommand):
    help = ("project list: every project with its department, namespace, default pools and members; "
            "project add-member PROJECT USER: onboard a person (user name or e-mail) in one step.")

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        add_format(sub.add_parser("list"))
        add = sub.add_parser("add-member", help="Make USER (a user name or e-mail address; the account is created "
                                                "if none has it) a member of PROJECT, with its pools.")
        add.add_argument("project")
        add.add_argument("user")

    @clear_errors
    def handle(self, *args, verb, **options):
        if verb == "add-member":
            done = onboarding.onboard(options["project"], options["user"], door="manage.py project add-member")
            self.stdout.write(done.summary())
            if done.password:
                self.stdout.write(f"Password of {done.user} (shown once; for password sign-in): {done.password}")
            return
        format = options["format"]
        rows = ProjectSerializer([listing.project_row(project, listing.OPERATOR)
                                  for project in listing.projects(Project.objects.all())], many=True).data
        if format == "json":
            print_json(self.stdout, rows)
            return
        print_table(self.stdout, ["PROJECT", "DEPARTMENT", "NAMESPACE", "DEFAULT POOLS", "USERS", "ROLES"],
                    [[r["name"], r["department"], r["namespace"], ",".join(r["default_node_pools"]) or "-",
                      ",".join(r["members"]["users"]) or "-", ",".join(r["members"]["roles"]) or "-"] for r in rows])
