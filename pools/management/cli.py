"""What the inventory commands share: author names, tables, JSON in the API's shapes, and errors as
one clear line on stderr with a non-zero exit."""

import functools
import getpass
import json
import os
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError
from rest_framework.utils.encoders import JSONEncoder

from pools.cluster import ClusterError
from pools.engine import ConfigError
from pools.models import audit
from pools.models.dbwrites import NotRecorded, is_locked


class CliCommand(BaseCommand):
    """The base of the inventory and workload commands: they skip Django's system checks, as its own `shell` and
    `dbshell` do. The checks import the whole URL configuration (every view, DRF, drf_spectacular, OIDC) and the
    template tag libraries, about a quarter of a second per command that never serves a page; `./manage.py check`,
    `migrate` and the long-running commands (serve, demo, a watching sync) still run them.

    For the same reason a command imports the API's serializers (DRF's fields, drf_spectacular, the viewsets of the
    API module: about a third of a command's start-up) inside the branch that prints JSON in the API's shapes, not at
    the top of its module: a table or CSV is made from the same rows without them."""

    requires_system_checks = []


def author(options) -> str:
    if options.get("author"):
        return options["author"]
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "cli"


def clear_errors(handle):
    """Every way a command can end becomes one paragraph on stderr and a non-zero exit (CommandError), never a
    traceback; `--traceback` still shows where an unexpected error came from. Output cut short by the reader
    (`describe pool NAME | head -1`) ends the command quietly."""

    @functools.wraps(handle)
    def wrapped(self, *args, **options):
        # The audit log's actor for what this command does (unless it names a user, as --as-user does).
        acting = audit.acting_process.set(f"manage.py {type(self).__module__.rsplit('.', 1)[-1]}")
        try:
            result = handle(self, *args, **options)
            self.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
            return result
        except BrokenPipeError:
            # The reader took what it wanted (`| head`): not an error of the command, as manage.py says too.
            _discard_stdout()
            raise SystemExit(0) from None
        except ConfigError as exc:
            raise CommandError(exc.message) from None
        except ClusterError as exc:
            raise CommandError(f"cluster error: {exc.message}") from None
        except NotRecorded as exc:
            raise CommandError(exc.message) from None
        except DatabaseError as exc:
            hint = "; another process held it too long, try again" if is_locked(exc) else ""
            raise CommandError(f"database error: {_one_line(exc)}{hint}") from exc
        except KeyboardInterrupt:
            raise CommandError("interrupted", returncode=130) from None
        except CommandError:
            raise
        except Exception as exc:
            raise CommandError(f"unexpected {type(exc).__name__}: {_one_line(exc)} (run again with --traceback "
                               "for details)") from exc
        finally:
            audit.acting_process.reset(acting)

    return wrapped


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _discard_stdout() -> None:
    """The reader has gone: send what is still buffered nowhere, so the exit flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (a test's StringIO)
        pass


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
