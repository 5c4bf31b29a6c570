"""`./manage.py config ...`: OSMO's `osmo config` verbs against this project's database."""

import getpass
import json
import sys
from pathlib import Path

from django.core.management.base import CommandError
from django.db import transaction

from pools.access.roles import GENERATORS, generated_role
from pools.config import history, writes
from pools.config.defaults import init_defaults
from pools.engine import ConfigError, parse_json
from pools.management.cli import CliCommand, clear_errors
from pools.models import ConfigKind, ConfigRevision

TYPES = [kind.value for kind in ConfigKind]
# Checked here, in our words: a larger number reaches the database as a LIMIT it refuses in its own.
MAX_LIMIT = 1_000_000


class Command(CliCommand):
    help = "Import, show, delete, diff and roll back configuration (pools, pod templates, resource validations, roles)."

    def add_arguments(self, parser):
        parser.add_argument("--author", help="Name recorded on revisions (default: your OS user name).")
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        sub.add_parser("init", help="Load the default configuration; objects that exist are left alone.")

        update = sub.add_parser("update", help="Import a document (the whole document or nothing).")
        update.add_argument("type", metavar="TYPE", help=" | ".join(TYPES))
        update.add_argument("name", nargs="?", help="Object name; optional for POOL documents that carry names.")
        update.add_argument("--file", "-f", required=True, help="JSON file, or - for standard input.")
        update.add_argument("--description", default="", help="Why; stored on the revision.")
        _impact_options(update)

        setter = sub.add_parser("set", help="OSMO's `config set`: import one object from a file, or generate a "
                                            "role: `set ROLE osmo-<pool> pool` (seed 000) or `set ROLE NAME admin`.")
        setter.add_argument("type", metavar="TYPE", help=" | ".join(TYPES))
        setter.add_argument("name")
        setter.add_argument("template", nargs="?", choices=GENERATORS, help="ROLE only: generate instead of -f.")
        setter.add_argument("--file", "-f", help="JSON file, or - for standard input.")
        setter.add_argument("--description", default="", help="Why; stored on the revision.")
        _impact_options(setter)

        show = sub.add_parser("show", help="Print JSON that `update` accepts back unchanged.")
        show.add_argument("type", metavar="TYPE")
        show.add_argument("name", nargs="?")
        show.add_argument("--effective", action="store_true",
                          help="POOL only: per platform, the merged template, variables, selector, tolerations, rules.")

        delete = sub.add_parser("delete", help="Delete one object (refused while it is referenced).")
        delete.add_argument("type", metavar="TYPE")
        delete.add_argument("name")
        delete.add_argument("--description", default="")

        hist = sub.add_parser("history", help="List revisions, newest first.")
        hist.add_argument("type", metavar="TYPE", nargs="?")
        hist.add_argument("name", nargs="?")
        hist.add_argument("--limit", type=int, default=50)
        hist.add_argument("--format", choices=["table", "json"], default="table")

        diff = sub.add_parser("diff", help="Unified diff of a revision against the previous one, or of two revisions.")
        diff.add_argument("type", metavar="TYPE")
        diff.add_argument("revision", type=int)
        diff.add_argument("other", type=int, nargs="?")

        rollback = sub.add_parser("rollback", help="Restore an object as it was at a revision (a new revision).")
        rollback.add_argument("type", metavar="TYPE")
        rollback.add_argument("revision", type=int)
        rollback.add_argument("--description", default="")
        rollback.add_argument("--before", action="store_true",
                              help="Restore it as it was just before REV instead; before its creation it did not "
                                   "exist, so it is deleted (a delete revision).")

    @clear_errors
    def handle(self, *args, verb, **options):
        try:
            getattr(self, f"do_{verb}")(options)
        except ConfigError as exc:
            raise CommandError(exc.message) from None

    def _author(self, options) -> str:
        if options["author"]:
            return options["author"]
        try:
            return getpass.getuser()
        except Exception:  # no passwd entry in some containers
            return "cli"

    def _print_json(self, data) -> None:
        self.stdout.write(json.dumps(data, indent=2))

    def do_init(self, options):
        results = init_defaults(author=self._author(options))
        for result in results:
            self.stdout.write(result.summary())
        if not results:
            self.stdout.write("Default configuration already present; nothing changed.")

    def do_update(self, options):
        kind = history.parse_kind(options["type"])
        source = options["file"]
        if source == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(source).read_bytes()
            except OSError as exc:
                raise CommandError(f"Cannot read {source}: {exc.strerror}") from None
        data = parse_json(text, source="standard input" if source == "-" else source)
        if options["dry_run"]:
            result = writes.validate(kind, data, name=options["name"], description=options["description"])
            self.stdout.write(f"Dry run, nothing written. {result.summary()}")
            self._print_impact(result)
            if result.impact is not None and not result.impact.moves_nodes:
                self.stdout.write(f"Nodes: {result.impact.headline()}")
            return
        with transaction.atomic():
            result = writes.import_document(kind, data, name=options["name"], author=self._author(options),
                                             description=options["description"])
            if result.impact and result.impact.nodes_shared and not options["yes"]:
                raise CommandError(  # rolls the import back
                    f"Nothing written: {result.impact.headline()[:-1]}: {'; '.join(result.impact.lines())}. "
                    "Run it again with --yes to apply it (or --dry-run to see what it does without writing).")
        self.stdout.write(result.summary())
        self._print_impact(result)

    def _print_impact(self, result) -> None:
        for line in result.impact_lines():
            self.stdout.write(line)

    def do_set(self, options):
        kind = history.parse_kind(options["type"])
        if bool(options["file"]) == bool(options["template"]):
            raise CommandError("config set needs either -f FILE or, for ROLE, a template (pool or admin)")
        if not options["template"]:
            return self.do_update(options)
        if kind != ConfigKind.ROLE:
            raise CommandError("Only ROLE objects are generated from a template")
        result = writes.import_document(kind, generated_role(options["name"], options["template"]),
                                         name=options["name"], author=self._author(options),
                                         description=options["description"] or f"Generated {options['template']} role")
        self.stdout.write(result.summary())

    def do_show(self, options):
        kind = history.parse_kind(options["type"])
        if options["effective"]:
            if kind != ConfigKind.POOL or not options["name"]:
                raise CommandError("--effective needs: config show POOL NAME --effective")
            self._print_json(writes.effective(options["name"]))
        else:
            self._print_json(writes.export(kind, options["name"]))

    def do_delete(self, options):
        kind = history.parse_kind(options["type"])
        result = writes.delete(kind, options["name"], author=self._author(options),
                                description=options["description"])
        self.stdout.write(result.summary())
        self._print_impact(result)

    def do_history(self, options):
        kind = history.parse_kind(options["type"]) if options["type"] else None
        if not 1 <= options["limit"] <= MAX_LIMIT:
            raise CommandError(f"--limit must be a whole number of revisions from 1 to {MAX_LIMIT:,} "
                               f"(not {options['limit']})")
        revisions = list(history.revisions(kind, options["name"])[: options["limit"]])
        if options["format"] == "json":
            self._print_json([history.summary(rev) for rev in revisions])
            return
        rows = [("TYPE", "REV", "NAME", "ACTION", "AUTHOR", "TIME", "DESCRIPTION")] + [
            (r.kind, str(r.number), r.name, r.action, r.author_name or "-",
             r.created_at.strftime("%Y-%m-%d %H:%M:%S"), r.description)
            for r in revisions
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        for row in rows:
            self.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False))
                              + "  " + row[-1])

    def do_diff(self, options):
        kind = history.parse_kind(options["type"])
        text = history.unified_diff(kind, options["revision"], options["other"])
        self.stdout.write(text or "No differences.", ending="" if text else "\n")

    def do_rollback(self, options):
        kind = history.parse_kind(options["type"])
        result = writes.rollback(kind, options["revision"], before=options["before"], author=self._author(options),
                                  description=options["description"])
        self.stdout.write(result.summary())
        self._print_impact(result)
        if not result.changed and not options["before"] and \
                history.get_revision(kind, options["revision"]).action == ConfigRevision.Action.CREATE:
            self.stdout.write(f"Revision {options['revision']} created it: to undo its creation (delete it), run "
                              f"`config rollback {kind} {options['revision']} --before`.")



def _impact_options(parser) -> None:
    parser.add_argument("--dry-run", action="store_true",
                        help="Check the document and print what it would change (nodes and GPUs that change pools "
                             "or become SHARED) without writing anything.")
    parser.add_argument("--yes", action="store_true",
                        help="Apply even when nodes become SHARED with pools they were not shared with (refused "
                             "without it, nothing written).")
