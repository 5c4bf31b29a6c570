"""What the inventory commands share: author names, tables, JSON in the API's shapes, and errors as
one clear line on stderr with a non-zero exit."""

import functools
import getpass
import json

from django.core.management.base import CommandError
from rest_framework.utils.encoders import JSONEncoder

from pools.cluster import ClusterError
from pools.engine import ConfigError


def author(options) -> str:
    if options.get("author"):
        return options["author"]
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "cli"


def clear_errors(handle):
    @functools.wraps(handle)
    def wrapped(self, *args, **options):
        try:
            return handle(self, *args, **options)
        except ConfigError as exc:
            raise CommandError(exc.message) from None
        except ClusterError as exc:
            raise CommandError(f"cluster error: {exc.message}") from None

    return wrapped


def print_json(stdout, data) -> None:
    stdout.write(json.dumps(data, indent=2, cls=JSONEncoder))


def print_table(stdout, header: list[str], rows: list[list]) -> None:
    cells = [header] + [[str(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


def add_format(parser) -> None:
    parser.add_argument("--format", choices=["table", "json"], default="table",
                        help="json prints the same rows as the API.")
