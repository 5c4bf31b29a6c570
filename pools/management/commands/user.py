"""`./manage.py user add-role|remove-role|list`: who holds which role (OSMO's `osmo user update --add-roles`).

The same rows as `/api/auth/user/{id}/roles`; the command runs with the machine's authority (it is staff's tool),
so staff users' roles may be changed too. Role documents themselves are `config` documents (`config set role`)."""

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from pools.access import assignments
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Role


def _user(name: str):
    try:
        return get_user_model().objects.get(username=name)
    except get_user_model().DoesNotExist:
        raise CommandError(f"There is no user {name!r} (`user list` shows them)") from None


def _roles(names: list[str]) -> list[Role]:
    found = {role.name: role for role in Role.objects.filter(name__in=names)}
    missing = [name for name in names if name not in found]
    if missing:
        known = ", ".join(Role.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise CommandError(f"There is no role {', '.join(map(repr, missing))} (known: {known})")
    return [found[name] for name in dict.fromkeys(names)]


class Command(CliCommand):
    help = "Give users roles, take them away, and list who holds what."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        add = sub.add_parser("add-role", help="Give USER each ROLE (a role already held is left as it is).")
        add.add_argument("user")
        add.add_argument("roles", nargs="+", metavar="ROLE")
        remove = sub.add_parser("remove-role", help="Take each ROLE from USER (refused if one is not held).")
        remove.add_argument("user")
        remove.add_argument("roles", nargs="+", metavar="ROLE")
        listing = sub.add_parser("list", help="Users and their roles.")
        listing.add_argument("--role", help="Only the holders of this role.")
        add_format(listing)

    @clear_errors
    def handle(self, *args, verb, **options):
        getattr(self, "do_" + verb.replace("-", "_"))(options)

    def do_add_role(self, options):
        user, roles = _user(options["user"]), _roles(options["roles"])
        added, held = assignments.add([(user, role) for role in roles], by="manage.py user")
        self.stdout.write(f"{user.get_username()}: " + "; ".join(
            part for part in (f"added {', '.join(role.name for _, role in added)}" if added else "",
                              f"already held {', '.join(sorted(role.name for _, role in held))}" if held else "")
            if part))

    def do_remove_role(self, options):
        user, roles = _user(options["user"]), _roles(options["roles"])
        missing = assignments.remove(user, roles)
        if missing:
            raise CommandError(f"{user.get_username()} does not hold {', '.join(missing)}; nothing removed")
        self.stdout.write(f"{user.get_username()}: removed {', '.join(role.name for role in roles)}")

    def do_list(self, options):
        users = get_user_model().objects.order_by("username")
        if options["role"]:
            _roles([options["role"]])
            users = users.filter(role_assignments__role__name=options["role"])
        rows = [assignments.describe_user(user) for user in users.distinct()]
        if options["format"] == "json":
            print_json(self.stdout, rows)
            return
        print_table(self.stdout, ["USER", "STAFF", "ACTIVE", "ROLES"], [
            [row["id"], "yes" if row["is_staff"] else "no", "yes" if row["is_active"] else "no",
             ", ".join(role["name"] for role in row["roles"]) or "-"] for row in rows])
