"""`./manage.py backend add|list|reconcile`: register clusters to sync (each cluster once, known by the uid of its
kube-system namespace, unless split on purpose with --same-cluster-as), list them with the objects their cluster
refused, and write an engine backend's objects (KAI Queues and Topologies, Kueue's queues) now."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import CommandError
from django.db.models import Count
from django.utils import timezone
from django.utils.timesince import timesince

from pools.cluster import ClusterError
from pools.cluster.connect import connect, is_connected
from pools.engine import ConfigError, check_name
from pools.fleet.sync import shared_cluster_for
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Backend
from pools.schedulers import reconcile

RECONCILED_WIDTH = 40


def object_count(backend: Backend) -> int:
    return sum((backend.engine_objects or {}).get("objects", {}).values())


def reconciled(backend: Backend, now) -> str:
    """When the engine's objects were last written, or the current failure, in a table cell."""
    if backend.engine_error:
        text = "error: " + " ".join(backend.engine_error.split())
        return text if len(text) <= RECONCILED_WIDTH else text[: RECONCILED_WIDTH - 1] + "…"
    if backend.engine_reconciled_at is None:
        return "-" if backend.scheduler == Backend.Scheduler.DEFAULT else "never"
    if (now - backend.engine_reconciled_at).total_seconds() < 60:
        return "just now"
    return f"{timesince(backend.engine_reconciled_at, now, depth=1)} ago".replace("\xa0", " ")


def refused(backend: Backend) -> int:
    """Objects refused in the last reconcile (more than the records kept, past MAX_RECORDS)."""
    count = (backend.engine_objects or {}).get("refused")
    return count if isinstance(count, int) else len(backend.engine_refused or [])


def refusal_lines(backend: Backend) -> list[str]:
    """One line per object the cluster refused in the last reconcile, with the server's words."""
    return [f"  {r['kind']}/{'/'.join(filter(None, (r.get('namespace'), r['name'])))} ({r['action']}, since "
            f"{r['since']}): {' '.join(r['message'].split())}" for r in backend.engine_refused or []]


def cluster_uid(backend: Backend) -> tuple[str, str]:
    """(the uid of the cluster's kube-system namespace, "") or ("", why it could not be read)."""
    try:
        cluster = connect(backend, state_dir=settings.OSMO_SIMULATED_STATE_DIR)
    except ClusterError as exc:
        return "", exc.message
    except Exception as exc:  # a malformed kubeconfig raises the client's own errors
        return "", f"{type(exc).__name__}: {exc}"
    try:
        return cluster.namespace_uid("kube-system"), ""
    except ClusterError as exc:
        return "", exc.message
    finally:
        close = getattr(cluster, "close", None)
        if close is not None:
            close()


def check_registered_once(backend: Backend, uid: str, same_as: str) -> None:
    """Two backends on one cluster would each reconcile the whole of it: refused, naming the first, unless the
    admin splits it on purpose (`--same-cluster-as`)."""
    if same_as:
        partner = Backend.objects.filter(name=same_as).exclude(pk=backend.pk).first()
        if partner is None:
            raise ConfigError(f"--same-cluster-as {same_as}: there is no other backend named {same_as!r} (see "
                              "`./manage.py backend list`).")
        if uid and partner.cluster_uid and partner.cluster_uid != uid:
            raise ConfigError(f"--same-cluster-as {same_as}: backend {same_as} is another cluster (kube-system uid "
                              f"{partner.cluster_uid}, this one {uid}).")
        return
    if backend.pk and uid and backend.cluster_uid == uid:
        return  # already registered as this one (others may have been split from it since)
    first = Backend.objects.filter(cluster_uid=uid).exclude(pk=backend.pk).order_by("created_at", "pk").first() \
        if uid else None
    if first is not None:
        raise ConfigError(f"This cluster is already registered as backend {first.name} (kube-system uid {uid}). "
                          f"Use backend {first.name}, or, to split the cluster between backends on purpose (each "
                          f"with its own pools and namespaces), add --same-cluster-as {first.name}.")


class Command(CliCommand):
    help = "Register a cluster (kubeconfig, in-cluster, or the simulated demo cluster), list backends, or " \
           "reconcile an engine backend's objects."

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
        add.add_argument("--same-cluster-as", metavar="BACKEND", default="",
                         help="The cluster is already registered as BACKEND and is split between the two on purpose "
                              "(each owns only the engine objects it writes).")
        add_format(sub.add_parser("list", help="List backends with their sync state and their engine's objects."))
        again = sub.add_parser("reconcile", help="Write the engine's objects (KAI Queues and Topologies, Kueue's "
                                                 "queues) of one backend now, and say what changed.")
        again.add_argument("name")

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
        except ValidationError as exc:  # lengths and choices, each named by its option
            options_of = {"kubeconfig_path": "--kubeconfig", "kube_context": "--context",
                          "description": "--description"}
            messages = [f"{options_of[key]}: {' '.join(texts)}" if key in options_of else " ".join(texts)
                        for key, texts in exc.message_dict.items()]
            raise ConfigError(f"backend {name}: {'; '.join(messages)}") from None
        uid, why = cluster_uid(backend)
        same_as = options["same_cluster_as"] or backend.same_cluster_as  # an update keeps a split made before
        check_registered_once(backend, uid, same_as)
        backend.cluster_uid = uid or backend.cluster_uid
        backend.same_cluster_as = same_as
        try:
            backend.clean_engine()  # knowing now which cluster it is
        except ValidationError as exc:
            raise ConfigError(f"backend {name}: {'; '.join(exc.messages)}") from None
        backend.save()
        self.stdout.write(f"Backend {name} {'added' if created else 'updated'}; "
                          f"run `./manage.py sync {name} --once` to read its nodes.")
        if not uid:
            self.stdout.write(f"Could not read the cluster's identity (the uid of kube-system): {why.rstrip('.')}. "
                              f"Whether it is registered twice is checked when `backend add {name}` runs again and "
                              "it answers.")

    def do_list(self, options):
        backends = list(Backend.objects.annotate(node_total=Count("nodes")))
        rows = [{"name": b.name, "kind": b.kind, "connected": is_connected(b), "scheduler": b.scheduler,
                 "nodes": b.node_total, "last_sync_at": b.last_sync_at, "sync_error": b.sync_error,
                 "engine": b.scheduler, "engine_objects": b.engine_objects or {},
                 "engine_reconciled_at": b.engine_reconciled_at, "engine_error": b.engine_error,
                 "engine_refused": b.engine_refused or [], "cluster_uid": b.cluster_uid,
                 "same_cluster_as": b.same_cluster_as}
                for b in backends]
        if options["format"] == "json":
            print_json(self.stdout, rows)
            return
        now = timezone.now()
        print_table(self.stdout, ["BACKEND", "KIND", "ENGINE", "ENGINE OBJECTS", "RECONCILED", "REFUSED", "NODES",
                                  "LAST SYNC", "ERROR"], [
            [b.name, b.kind if r["connected"] else "unconnected", b.scheduler, object_count(b), reconciled(b, now),
             refused(b), b.node_total, b.last_sync_at.strftime("%Y-%m-%d %H:%M:%S") if b.last_sync_at else "never",
             (b.sync_error or "-")[:60]] for b, r in zip(backends, rows, strict=True)])
        for b in backends:
            idle = (b.engine_objects or {}).get("idle") if not b.engine_error else ""
            if idle:
                self.stdout.write(f"\nBackend {b.name} writes no engine objects: {idle}")
            if b.engine_refused:
                shown = len(b.engine_refused)
                more = f" ({shown} shown)" if refused(b) > shown else ""
                self.stdout.write(f"\nRefused by the cluster of {b.name} in its last reconcile, {refused(b)} "
                                  f"object{'' if refused(b) == 1 else 's'}{more} (the others were written):")
                for line in refusal_lines(b):
                    self.stdout.write(line)

    def do_reconcile(self, options):
        name = options["name"]
        backend = Backend.objects.filter(name=name).first()
        if backend is None:
            raise CommandError(f"There is no backend named {name!r} (see `./manage.py backend list`).")
        engine = backend.get_scheduler_display()
        if backend.scheduler == Backend.Scheduler.DEFAULT and not object_count(backend):
            self.stdout.write(f"Backend {name} uses the {engine}, where our own admission enforces quotas, and "
                              "holds no engine objects of ours: nothing to reconcile.")
            return
        if not is_connected(backend):
            raise CommandError(f"Backend {name} is not connected: give it a kubeconfig path or in-cluster "
                               f"configuration (./manage.py backend add {name} --kubeconfig PATH).")
        result = reconcile.run(backend, shared_cluster_for(backend))
        if result is None:
            error = Backend.objects.values_list("engine_error", flat=True).get(pk=backend.pk)
            raise CommandError(f"Backend {name} ({engine}): the reconcile failed, and the objects already written "
                               f"stay (the next run finishes the job): {' '.join(error.split())}")
        summary = result.summary()
        counts = ", ".join(f"{kind} {count}" for kind, count in summary["objects"].items()) or "none"
        text = (f"Backend {name} ({engine}) reconciled: created {summary['created']}, updated {summary['updated']}, "
                + (f"re-created {summary['recreated']}, " if summary["recreated"] else "")
                + f"deleted {summary['deleted']}, unchanged {summary['unchanged']}, "
                f"refused {summary['refused']}. Objects of ours now: {counts}.")
        if result.refused:
            text += " Refused: " + "; ".join(f"{r.label} ({r.action}): {' '.join(r.message.split())}"
                                             for r in result.refused[:20])
            text += f"; and {len(result.refused) - 20} more." if len(result.refused) > 20 else "."
        if result.idle:
            text += f" {result.idle}"
        self.stdout.write(text)
