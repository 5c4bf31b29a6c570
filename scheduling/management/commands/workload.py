"""`./manage.py workload submit|list|describe|logs|cancel`: the workload API from the CLI, in its shapes
(`--format json` prints what the API answers). The CLI is the operator's: list, describe and cancel see every
workload unless `--as-user USER` asks for what USER sees; submit needs a submitter (`--as-user`, else the
user named like the account running the command, else `admin`)."""

from django.http import QueryDict

from pools.engine import ConfigError
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models.visibility import Access
from scheduling.listing import bodies
from scheduling.listing.filters import WorkloadFilterSet
from scheduling.management.cli import (
    cancel_now,
    find_user,
    find_workload,
    login,
    operator_access,
    read_document,
    readable_by,
)
from scheduling.management.logs import add_log_arguments, print_log
from scheduling.models import Source, Workload
from scheduling.run import estimates, utilization
from scheduling.submit import submission


class Command(CliCommand):
    help = "Submit, list, describe and cancel workloads (the /api/workloads/ API from the command line)."

    def add_arguments(self, parser):
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        submit = verbs.add_parser("submit", help="Submit the request in FILE (JSON or YAML, the body of "
                                                 "POST /api/workloads/).")
        submit.add_argument("-f", "--file", required=True)
        submit.add_argument("--dry-run", action="store_true",
                            help="Run the pipeline and print each candidate pool's verdict; save nothing.")
        submit.add_argument("--as-user", metavar="USER", help="The submitter (default: the user named like this "
                                                              "account, else admin).")
        add_format(submit)
        listing = verbs.add_parser("list", help="Workloads, newest first.")
        for name in ("pool", "project", "user", "priority"):
            listing.add_argument(f"--{name}")
        listing.add_argument("--kind", help="training, notebook, inference or compute.")
        listing.add_argument("--status", action="append", help="Repeat for several (PENDING, ADMITTED, ...).")
        listing.add_argument("--as-user", metavar="USER", help="Only what USER may see.")
        add_format(listing)
        describe = verbs.add_parser("describe", help="Status, reasons per pool with queue positions, and events.")
        describe.add_argument("id", help="Id, id prefix (4+ characters) or unique name.")
        describe.add_argument("--as-user", metavar="USER")
        add_format(describe)
        logs = verbs.add_parser("logs", help="Print a replica's log (-f to follow; the archive once its pods are "
                                             "gone).")
        logs.add_argument("id", help="Id, id prefix (4+ characters) or unique name.")
        add_log_arguments(logs)
        logs.add_argument("--as-user", metavar="USER", help="Only what USER may read.")
        cancel = verbs.add_parser("cancel", help="Cancel a live workload (its Job, if any, is deleted).")
        cancel.add_argument("id")
        cancel.add_argument("--message", default="")
        cancel.add_argument("--as-user", metavar="USER", help="Cancel as USER (the submitter or staff).")

    @clear_errors
    def handle(self, *args, verb, **options):
        getattr(self, verb)(**options)

    # ---- verbs ----

    def submit(self, file, dry_run, as_user, format, **_):
        user = find_user(as_user)
        data = read_document(file)
        try:
            result = submission.submit(user, data, source=Source.CLI, dry_run=dry_run)
        except submission.SubmissionRefused as exc:
            lines = [f"  {v.pool}: {v.message}" for v in exc.verdicts]
            raise ConfigError("\n".join(["Refused: no candidate pool can take this workload.", *lines])) from None
        if format == "json":
            if dry_run:
                print_json(self.stdout, {"candidates": [v.as_dict() for v in result.shown],
                                         "admission": result.preview})
            else:
                print_json(self.stdout, bodies.detail(result.workload, Access(user)))
            return
        for verdict in result.shown:
            verb = "accepts" if verdict.accepted else f"refuses ({verdict.code})"
            where = f", platform {verdict.platform}" if verdict.platform else ""
            detail = "" if verdict.accepted else f": {verdict.message}"
            self.stdout.write(f"Pool {verdict.pool}{where} {verb}{detail}")
        if dry_run:
            preview = result.preview
            if preview.get("would_admit"):
                self.stdout.write(f"Dry run: would be admitted now to pool {preview['pool']}, platform "
                                  f"{preview['platform']}. Nothing was saved.")
            else:
                self.stdout.write("Dry run: would wait. Nothing was saved.")
                for reason in preview.get("reasons", []):
                    self.stdout.write(f"  {reason['pool']}: {reason['code']}: {reason['message']}")
            return
        workload = result.workload
        self.stdout.write(f"Workload {workload.id} ({workload.name}) submitted to project {workload.project.name}: "
                          f"PENDING, candidate pools {', '.join(workload.pools)}.")

    def list(self, as_user, format, status=None, **filters):
        user = find_user(as_user) if as_user else None
        access = Access(user) if user else operator_access()
        rows = (Workload.objects.visible_to(user) if user else Workload.objects.all()).light()
        params = {key: value for key, value in filters.items() if key in ("pool", "project", "user", "priority", "kind")
                  and value}
        query = QueryDict(mutable=True)
        query.update(params)
        query.setlist("status", [s.upper() for s in status or []])
        filterset = WorkloadFilterSet(query, queryset=rows.select_related("project__department", "pool"))
        if not filterset.is_valid():
            field, errors = next(iter(filterset.errors.items()))
            raise ConfigError(f"--{field}: {' '.join(errors)}")
        workloads = list(filterset.qs)
        forecasts = estimates.forecasts(workloads)
        data = [bodies.row(w, access, forecasts.get(str(w.id))) for w in workloads]
        if format == "json":
            print_json(self.stdout, data)
            return
        print_table(self.stdout, ["ID", "NAME", "PROJECT", "USER", "PRIORITY", "STATUS", "POOL", "GPUS", "REPLICAS",
                                  "POSITION", "START (EST.)", "REASON"],
                    [[r["id"][:8], r["name"], r["project"], r["submitter"] or "-", r["priority"], r["status"],
                      r["pool"] or ",".join(r["pools"]), r["gpu"], r["replicas"], r["position"] or "-",
                      bodies.expected_start(r) or "-", (r["reason"] or {}).get("code", "-")] for r in data])

    def describe(self, id, as_user, format, **_):
        user = find_user(as_user) if as_user else None
        workload = find_workload(id, Workload.objects.visible_to(user) if user else None)
        body = bodies.detail(workload, Access(user) if user else operator_access())
        body["utilization"] = utilization.body(workload)  # as the API answers it
        if format == "json":
            print_json(self.stdout, body)
            return
        out = self.stdout.write
        out(f"Workload {body['id']} ({body['name']})")
        out(f"  Status:     {body['status_word']}" + (f" ({body['ready']} ready)" if body["ready"] else ""))
        out(f"  Kind:       {body['kind']}")
        if body["link"]:
            out(f"  Link:       {body['link']['url'] or '(no link template for its pool or backend)'}")
            out(f"  Forward:    {body['link']['port_forward']}")
        out(f"  Project:    {body['project']} (department {body['department']}), submitted by "
            f"{body['submitter'] or '-'} via {body['source']}")
        out(f"  Priority:   {body['priority']}{' (preemptible)' if body['preemptible'] else ''}")
        r = body["resources"]
        out(f"  Resources:  {body['replicas']} replica(s) x {r['gpu']} GPU, {r['cpu']} CPU, "
            f"{_gib(r['memory'])} memory, {_gib(r['storage'])} storage")
        out(f"  Pools:      {', '.join(body['pools'])}")
        if body["pool"]:
            planned = ", ".join(f"{n} x{k}" for n, k in sorted(body["planned_nodes"].items()))
            out(f"  Admitted:   pool {body['pool']}, platform {body['platform']} at "
                f"{body['admitted_at']:%Y-%m-%d %H:%M:%S}" + (f", planned on {planned}" if planned else ""))
            placed = ", ".join(f"{n} x{k}" for n, k in sorted(body["placement"].items()))
            out(f"  Placed on:  {placed or 'no node yet (no pod bound)'}")
        if body["job"]:
            job = body["job"]
            out(f"  Job:        {job['namespace']}/{job['name']} (attempt {body['attempt']}"
                + (f", stopping to end {body['stopping']}" if body["stopping"] else "") + ")")
            for pod in job["pods"]:
                code = f", exit {pod['exit_code']}" if pod["exit_code"] is not None else ""
                why = f" ({pod['reason']})" if pod["reason"] else ""
                ip = f" ({pod['ip']})" if pod["ip"] else ""
                out(f"    pod {pod['name']} on {pod['node'] or '-'}{ip}: {pod['phase']}{code}{why}")
        if body["replica_pods"]:
            out("  Replicas:   (where each ran, from its pods)")
            for place in body["replica_pods"]:
                code = f", exit {place['exit_code']}" if place["exit_code"] is not None else ""
                out(f"    attempt {place['attempt']} replica {place['replica']}: pod {place['pod']} on node "
                    f"{place['node'] or '-'}, IP {place['ip'] or '-'}: {place['phase'] or '-'}{code}; log "
                    f"{place['log'] or 'none'}")
        if body["gpu"]:
            figures = body["utilization"]
            if figures["measured"]:
                idle = f", idle since {figures['idle_since']:%Y-%m-%d %H:%M}" if figures["idle"] else ""
                out(f"  GPU util:   {figures['average_percent']:.1f} % over the last {figures['window_minutes']} "
                    f"minutes{idle}" + (f" ({figures['note']})" if figures["note"] else ""))
            else:
                out(f"  GPU util:   {figures['note']}")
        for item in body["attempts"]:
            code = f", exit code {item['exit_code']}" if item["exit_code"] is not None else ""
            out(f"  Attempt {item['attempt']}:  {item['status']}{code} ({item['job'] or 'not dispatched'}): "
                f"{item['message']}")
        if body["status"] == "PENDING":
            when = f"{body['estimated_start']:%Y-%m-%d %H:%M} UTC, " if body["estimated_start"] else ""
            out(f"  Start:      {when}{body['estimate_basis']} (an estimate)")
            if len(body["estimates"]) > 1:
                for item in body["estimates"]:
                    at = f"{item['estimated_start']:%Y-%m-%d %H:%M} UTC, " if item["estimated_start"] else ""
                    out(f"    {item['pool']} (#{item['position'] or '-'}): {at}{item['basis']}")
        if body["reasons"]:
            out("  Waiting because:")
            for reason in body["reasons"]:
                position = body["positions"].get(reason["pool"])
                where = f" (#{position} in its queue)" if position else ""
                out(f"    {reason['pool']}{where}: {reason['code']}: {reason['message']}")
        out("  Events:")
        for event in body["events"]:
            out(f"    {event['at']:%Y-%m-%d %H:%M:%S}  {event['status']:<16} {event['message']}")

    def logs(self, id, as_user, **options):
        user = find_user(as_user) if as_user else None
        workload = readable_by(user, find_workload(id, Workload.objects.visible_to(user) if user else None))

        def write(text: str) -> None:
            self.stdout.write(text, ending="")
            self.stdout.flush()

        print_log(write, workload, **{key: options[key] for key in (
            "follow", "replica", "attempt", "tail", "container", "previous")})

    def cancel(self, id, message, as_user, **_):
        user = find_user(as_user) if as_user else None
        workload = find_workload(id, Workload.objects.visible_to(user) if user else None)
        try:
            line = cancel_now(user, workload, message) if user else \
                cancel_now(None, workload, message, operator=login() or "cli")
        except PermissionError as exc:
            raise ConfigError(str(exc)) from None
        self.stdout.write(line)

def _gib(value: int) -> str:
    return f"{value / 1024 ** 3:g}Gi"
