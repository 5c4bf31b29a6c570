"""`./manage.py backend add|list`: register clusters to sync."""

from django.core.management.base import BaseCommand

from pools.cluster.connect import is_connected
from pools.engine import ConfigError, check_name
from pools.management.cli import add_format, clear_errors, print_json, print_table
from pools.models import Backend


class Command(BaseCommand):
    help = "Register a cluster (kubeconfig, in-cluster, or the simulated demo cluster), or list backends."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        add = sub.add_parser("add", help="Add a backend, or update the connection of one that exists.")
        add.add_argument("name")
        how = add.add_mutually_exclusive_group(required=True)
        how.add_argument("--kubeconfig", metavar="PATH")
        how.add_argument("--in-cluster", action="store_true", help="Use the service account of this pod.")
        how.add_argument("--simulated", action="store_true", help="The simulated demo cluster.")
        add.add_argument("--context", default="", help="kubeconfig context (default: the current one).")
        add.add_argument("--scheduler", choices=[c.value for c in Backend.Scheduler], default=None)
        add.add_argument("--toolkit-on-host", action="store_true",
                         help="The NVIDIA Container Toolkit is installed on the hosts (no toolkit pod expected).")
        add.add_argument("--description", default=None)
        add_format(sub.add_parser("list", help="List backends with their sync state."))

    @clear_errors
    def handle(self, *args, verb, **options):
        getattr(self, f"do_{verb}")(options)

    def do_add(self, options):
        name = check_name(options["name"], "backend")
        backend = Backend.objects.filter(name=name).first()
        created = backend is None
        backend = backend or Backend(name=name)
        backend.kind = Backend.Kind.SIMULATED if options["simulated"] else Backend.Kind.KUBERNETES
        backend.kubeconfig_path = options["kubeconfig"] or ""
        backend.in_cluster = options["in_cluster"]
        backend.kube_context = options["context"]
        if options["scheduler"]:
            backend.scheduler = options["scheduler"]
        if options["description"] is not None:
            backend.description = options["description"]
        backend.toolkit_on_host = options["toolkit_on_host"]
        try:
            backend.full_clean()
        except Exception as exc:
            messages = getattr(exc, "messages", [str(exc)])
            raise ConfigError(f"backend {name}: {'; '.join(messages)}") from None
        backend.save()
        self.stdout.write(f"Backend {name} {'added' if created else 'updated'}; "
                          f"run `./manage.py sync {name} --once` to read its nodes.")

    def do_list(self, options):
        rows = [{"name": b.name, "kind": b.kind, "connected": is_connected(b), "scheduler": b.scheduler,
                 "nodes": b.nodes.count(), "last_sync_at": b.last_sync_at, "sync_error": b.sync_error}
                for b in Backend.objects.all()]
        if options["format"] == "json":
            print_json(self.stdout, rows)
            return
        print_table(self.stdout, ["BACKEND", "KIND", "SCHEDULER", "NODES", "LAST SYNC", "ERROR"], [
            [r["name"], r["kind"] if r["connected"] else "unconnected", r["scheduler"], r["nodes"],
             r["last_sync_at"].strftime("%Y-%m-%d %H:%M:%S") if r["last_sync_at"] else "never",
             (r["sync_error"] or "-")[:60]] for r in rows])
