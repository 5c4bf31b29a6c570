"""`./manage.py token create|list|revoke`: personal API tokens for operators and scripts."""

import datetime as dt

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import CommandError
from django.utils import timezone

from pools.access import tokens
from pools.engine import ConfigError
from pools.management.cli import CliCommand, clear_errors
from pools.models import AccessToken


class Command(CliCommand):
    help = "Create (prints the secret once), list and revoke a user's API tokens."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        create = sub.add_parser("create", help="Create a token and print its secret (shown this once).")
        create.add_argument("user")
        create.add_argument("name")
        create.add_argument("--expires-days", type=int, default=30, help="Days until it expires (default 30).")
        create.add_argument("--role", action="append", dest="roles",
                            help="Restrict the token to this role of the user (repeat for several).")
        listing = sub.add_parser("list", help="A user's tokens (never their secrets).")
        listing.add_argument("user")
        revoke = sub.add_parser("revoke", help="Delete a token; requests using it are refused at once.")
        revoke.add_argument("user")
        revoke.add_argument("name")

    @clear_errors
    def handle(self, *args, verb, **options):
        try:
            user = get_user_model().objects.get(username=options["user"])
        except get_user_model().DoesNotExist:
            raise CommandError(f"There is no user {options['user']!r}") from None
        try:
            getattr(self, f"do_{verb}")(user, options)
        except ConfigError as exc:
            raise CommandError(exc.message) from None

    def do_create(self, user, options):
        days = options["expires_days"]
        if not 1 <= days <= settings.ACCESS_TOKEN_MAX_DAYS:
            raise CommandError(f"--expires-days must be from 1 to {settings.ACCESS_TOKEN_MAX_DAYS}")
        token, secret = tokens.create_token(user, options["name"], timezone.now() + dt.timedelta(days=days),
                                            roles=options["roles"], created_by="manage.py token")
        self.stderr.write(f"Token {token.name} for {user.get_username()}, expires {token.expires_at:%Y-%m-%d %H:%M} "
                          "UTC. Store the secret now; it cannot be shown again:")
        self.stdout.write(secret)

    def do_list(self, user, options):
        for token in AccessToken.objects.filter(user=user).prefetch_related("roles"):
            roles = "all roles" if token.all_roles else ", ".join(r.name for r in token.roles.all()) or "no roles"
            state = "EXPIRED" if token.expired else f"expires {token.expires_at:%Y-%m-%d %H:%M}"
            self.stdout.write(f"{token.name}  {token.prefix}...  {state}  {roles}")

    def do_revoke(self, user, options):
        tokens.revoke_token(user, options["name"])
        self.stdout.write(f"Revoked token {options['name']} of {user.get_username()}")
