"""`./manage.py get jobs [--pool P]`, `get labels NODE [--key KEY]` and `get pools` (gpuctl's `get`)."""

from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Q
from django.utils import timezone

from pools.fleet import labels
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Pool
from pools.models.visibility import Access
from scheduling.listing import bodies
from scheduling.management.cli import find_user, operator_access
from scheduling.models import Workload
from scheduling.run import estimates

# gpuctl's STATUS is the pod phase; ours is the workload's, in gpuctl's words where one fits.
PHASES = {"PENDING": "Pending", "ADMITTED": "Admitted", "PREEMPTING": "Preempting", "SCHEDULING": "Pending",
          "RUNNING": "Running", "COMPLETED": "Succeeded", "FAILED_IMAGE_PULL": "ImagePullBackOff"}


def age(since, now) -> str:
    seconds = int((now - since).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def nodes_summary(nodes: list[str]) -> str:
    """gpuctl's NODE column for a gang: the first node and how many more (`h100-001 +16`), so one wide job
    does not pad every row; the JSON output keeps every name."""
    if not nodes:
        return "<none>"
    return nodes[0] if len(nodes) == 1 else f"{nodes[0]} +{len(nodes) - 1}"


def job_rows(pool: str | None, now=None, user=None) -> list[dict]:
    """Every workload as the operator sees it, or what `user` may see."""
    now = now or timezone.now()
    rows = (Workload.objects.visible_to(user) if user else Workload.objects.all()).select_related(
        "project__department", "pool").light().order_by("-submitted_at")
    if pool:
        rows = rows.filter(Q(pool__name=pool) | Q(pool__isnull=True, pools__0=pool))
    access = Access(user) if user else operator_access()
    workloads = list(rows)
    runs = bodies.current_runs(workloads)
    forecasts = estimates.forecasts(workloads, now)
    result = []
    for workload in workloads:
        row = bodies.row(workload, access, forecasts.get(str(workload.id)))
        # Where the pods are, as the sync last saw them (not admission's plan: the kube-scheduler binds them).
        pods = [pod for pod in (runs[str(workload.id)].pods if str(workload.id) in runs else {}).values()
                if not pod.get("deleted")]
        nodes = sorted({pod["node"] for pod in pods if pod.get("node")})
        ips = sorted({pod["ip"] for pod in pods if pod.get("ip")})
        # READY as kubectl counts it: pods of the current attempt Running with every container ready (a pending,
        # finished or deleted pod is not); facts synced before `ready` was kept count a Running pod.
        ready = sum(1 for pod in pods if pod.get("ready", pod.get("phase") == "Running"))
        namespace = workload.project.namespace if workload.project_id else workload.namespace
        result.append({"job_id": str(workload.id), "name": workload.name, "namespace": namespace,
                       "kind": "training", "status": PHASES.get(workload.status, workload.status.title()),
                       "ready": f"{ready}/{workload.replicas}", "node": nodes_summary(nodes), "nodes": nodes,
                       "ip": nodes_summary(ips), "ips": ips, "age": age(workload.submitted_at, now),
                       "pool": row["pool"] or (row["pools"] or [""])[0], "estimated_start": row["estimated_start"],
                       "estimate_basis": row["estimate_basis"], "start": bodies.expected_start(row) or "-"})
    return result


class Command(CliCommand):
    help = "get jobs [--pool P]: workloads as gpuctl lists jobs; get labels NODE [--key KEY]; get pools."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True, metavar="WHAT")
        jobs = sub.add_parser("jobs", help="Workloads with gpuctl's columns.")
        jobs.add_argument("--pool", help="Admitted to this pool, or waiting with it as first choice.")
        jobs.add_argument("--as-user", metavar="USER", help="Only what USER may see.")
        add_format(jobs)
        node_labels = sub.add_parser("labels", help="A node's labels as last synced.")
        node_labels.add_argument("node")
        node_labels.add_argument("--key", help="Only this label.")
        node_labels.add_argument("--backend")
        add_format(node_labels)
        add_format(sub.add_parser("pools", help="Pools with status and GPU counts."))

    @clear_errors
    def handle(self, *args, what, **options):
        if what == "pools":
            call_command("pool", "list", "--format", options["format"], stdout=self.stdout)
            return
        if what == "jobs":
            if options["pool"] and not Pool.objects.filter(name=options["pool"]).exists():
                raise CommandError(f"There is no pool {options['pool']!r}; `./manage.py get pools` lists them")
            rows = job_rows(options["pool"], user=find_user(options["as_user"]) if options["as_user"] else None)
            if options["format"] == "json":
                print_json(self.stdout, rows)
                return
            print_table(self.stdout, ["JOB ID", "NAME", "NAMESPACE", "KIND", "STATUS", "READY", "NODE", "IP", "AGE",
                                      "POOL", "START (EST.)"],
                        [[r["job_id"][:8], r["name"], r["namespace"], r["kind"], r["status"], r["ready"], r["node"],
                          r["ip"], r["age"], r["pool"] or "-", r["start"]] for r in rows])
            return
        node = labels.find_node(options["node"], options["backend"])
        shown = dict(sorted(node.labels.items()))
        if options["key"]:
            if options["key"] not in shown:
                raise labels.LabelError(f"node {node.name} has no label {options['key']!r}", field="key")
            shown = {options["key"]: shown[options["key"]]}
        if options["format"] == "json":
            print_json(self.stdout, shown)
        else:
            print_table(self.stdout, ["KEY", "VALUE"], [[key, value] for key, value in shown.items()])
