"""`./manage.py schedule [--once]`: admission cycles in the foreground, for operators and tests, each followed by
the lifecycle sweep acting in place: every ADMITTED workload dispatched, stops carried out, timeouts enforced,
dispatched workloads re-read from the synced Jobs. Each cycle holds the admission lock and each dispatch or stop
its row's, so this may run beside the workers. SIGTERM, SIGHUP and Ctrl-C stop it between or within a cycle (whose
transaction rolls back, releasing the lock)."""

import time

from django.core.management.base import CommandError
from django.db import OperationalError, connections

from pools.management.cli import CliCommand, clear_errors, print_json
from pools.management.stopping import interrupt_on_stop_signals
from scheduling.run.cycle import CycleResult, run_cycle
from scheduling.run.sweeps import SweepResult, sweep

MAX_INTERVAL = 86_400  # a day; time.sleep refuses infinity, and NaN or a negative would mean 0.1 s


class Command(CliCommand):
    help = ("Run admission cycles, each followed by dispatch of every ADMITTED workload and the lifecycle sweep "
            "(stops, timeouts, status from the cluster): --once runs one, prints what it admitted, dispatched and "
            "why the rest wait, and exits 0; without it, one every --interval seconds until Ctrl-C.")

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="One cycle, then exit.")
        parser.add_argument("--interval", type=float, default=5.0, help="Seconds between cycles (default 5).")
        parser.add_argument("--format", choices=["text", "json"], default="text")

    @clear_errors
    def handle(self, *args, once, interval, format, **options):
        if not 0 < interval <= MAX_INTERVAL:  # NaN fails this too
            raise CommandError(f"--interval must be a number of seconds above 0 and at most {MAX_INTERVAL:g} "
                               f"(not {interval:g})")
        with interrupt_on_stop_signals():
            try:
                self.cycles(once, interval, format)
            except KeyboardInterrupt:  # a cycle cut short rolls back with its transaction, and its lock with it
                self.stdout.write("Stopped.")

    def cycles(self, once: bool, interval: float, format: str) -> None:
        while True:
            try:
                result = run_cycle(details=once)
                swept = sweep(act=True)
            except OperationalError as exc:
                if once:
                    raise
                # A lost connection or a server restart: say so and try again at the next interval.
                self.stderr.write(f"Cycle failed, retrying in {interval:g} s: {' '.join(str(exc).split())}")
                connections.close_all()
                time.sleep(max(0.1, interval))
                continue
            if format == "json":
                print_json(self.stdout, {**result.summary(), "admitted": result.admitted,
                                         "preempted": result.preempted, "pending": result.pending,
                                         "sweep": swept.summary()})
            else:
                self.report(result, verbose=once)
                self.report_sweep(swept)
            if once:
                return
            time.sleep(max(0.1, interval))

    def report(self, result: CycleResult, verbose: bool) -> None:
        s = result.summary()
        self.stdout.write(f"Cycle: {s['considered']} pending considered, {s['admitted']} admitted, "
                          f"{s['preempted']} preempted, {s['pending']} still pending "
                          f"({s['rows_written']} rows written, {s['seconds']:.3f} s).")
        if not verbose:
            return
        for item in result.admitted:
            nodes = ", ".join(f"{node}x{n}" if n > 1 else node for node, n in sorted(item["placement"].items()))
            self.stdout.write(f"ADMITTED   {item['id'][:8]} {item['name']}: pool {item['pool']}, platform "
                              f"{item['platform']}, planned on {nodes}")
        for item in result.preempted:
            self.stdout.write(f"PREEMPTING {item['id'][:8]} {item['name']}: {item['why']}")
        for item in result.pending:
            self.stdout.write(f"PENDING    {item['id'][:8]} {item['name']}:")
            for reason in item["reasons"]:
                position = item["positions"].get(reason["pool"])
                where = f" (#{position} in queue)" if position else ""
                self.stdout.write(f"    {reason['pool']}{where}: {reason['code']}: {reason['message']}")

    def report_sweep(self, swept: SweepResult) -> None:
        def counts(values: dict[str, int]) -> str:
            return ", ".join(f"{n} {what}" for what, n in sorted(values.items())) or "none"

        self.stdout.write(f"Sweep: dispatch {counts(swept.dispatched)}; stop {counts(swept.stopped)}; "
                          f"{len(swept.timed_out)} timed out; status moved: {counts(swept.followed)}.")
        for error in swept.errors:
            self.stdout.write(f"ERROR      {error}")
