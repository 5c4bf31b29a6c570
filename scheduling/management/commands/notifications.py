"""`./manage.py notifications show|set|clear USER`, `notifications project NAME` and `notifications sweep`: the
profile's notification choices from the command line, a project's default (staff's), and a sweep that sends
every due notification now (the beat task's work, without a worker)."""

import json

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from pools.engine import ConfigError
from pools.management.cli import CliCommand, author, clear_errors
from scheduling.decisions.notifications import TRANSITIONS
from scheduling.models import NotificationPreference
from scheduling.run import notify
from scheduling.run import notify_preferences as prefs


def _choices(parser) -> None:
    parser.add_argument("--on", help=f"Comma-separated transitions to be told about: {', '.join(TRANSITIONS)} "
                                      "('' for none).")
    parser.add_argument("--pending-minutes", type=int, help="'pending' means waiting longer than this (default 60).")
    parser.add_argument("--webhook", help="A webhook URL (http or https; '' to remove it).")
    mail = parser.add_mutually_exclusive_group()
    mail.add_argument("--email", dest="email", action="store_true", default=None, help="Also by mail.")
    mail.add_argument("--no-email", dest="email", action="store_false", help="Not by mail.")


def _data(options) -> dict:
    data = {}
    if options["on"] is not None:
        data["transitions"] = [part.strip() for part in options["on"].split(",") if part.strip()]
    if options["pending_minutes"] is not None:
        data["pending_minutes"] = options["pending_minutes"]
    if options["webhook"] is not None:
        data["webhook_url"] = options["webhook"]
    if options["email"] is not None:
        data["email"] = options["email"]
    return data


class Command(CliCommand):
    help = "Show and set a user's notification choices, a project's default, or send what is due now."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        show = sub.add_parser("show", help="A user's choices, their projects' defaults, and recent notifications "
                                           "(JSON, as GET /api/profile/notifications/ answers).")
        show.add_argument("user")
        chosen = sub.add_parser("set", help="Set a user's choices (only the options given change).")
        chosen.add_argument("user")
        _choices(chosen)
        clear = sub.add_parser("clear", help="Forget a user's choices: their projects' defaults apply.")
        clear.add_argument("user")
        project = sub.add_parser("project", help="Show or set a project's default, for members who chose nothing.")
        project.add_argument("project")
        _choices(project)
        project.add_argument("--clear", action="store_true", help="Remove the project's default.")
        project.add_argument("--author", help="Recorded as who changed it (default: this OS user).")
        sub.add_parser("sweep", help="Record 'stuck pending' notifications and send every due one now.")

    @clear_errors
    def handle(self, *args, verb, **options):
        try:
            getattr(self, f"do_{verb}")(options)
        except ConfigError as exc:
            raise CommandError(f"{exc.field + ': ' if exc.field else ''}{exc.message}") from None

    def _user(self, name: str):
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"There is no user {name!r}")
        return user

    def _print(self, data) -> None:
        self.stdout.write(json.dumps(data, indent=2, default=str))

    def do_show(self, options):
        self._print(prefs.own(self._user(options["user"])))

    def do_set(self, options):
        user = self._user(options["user"])
        row = prefs.save_own(user, _data(options), f"manage.py notifications ({author(options)})")
        self._print(prefs.describe(row))

    def do_clear(self, options):
        user = self._user(options["user"])
        cleared = prefs.forget({"user": user}, user.get_username(), "manage.py notifications")
        self.stdout.write(f"Cleared the choices of {user.get_username()}" if cleared
                          else f"{user.get_username()} had chosen nothing")

    def do_project(self, options):
        project = prefs.project_by_name(options["project"])
        data = _data(options)
        who = f"manage.py notifications ({author(options)})"
        if options["clear"]:
            prefs.forget({"project": project}, f"project/{project.name}", who)
            self._print(prefs.describe(None))
        elif data:
            self._print(prefs.describe(prefs.save_project(project, data, who)))
        else:
            self._print(prefs.describe(NotificationPreference.objects.filter(project=project).first()))

    def do_sweep(self, options):
        self._print(notify.sweep(act=True))
