"""`./manage.py pool list` (gpuctl's `get pools` columns)."""

from pools.fleet import usage
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table


class Command(CliCommand):
    help = "pool list: every pool with status, GPU total / used / free, free on ready nodes, and node count."

    def add_arguments(self, parser):
        add_format(parser.add_subparsers(dest="verb", required=True, metavar="VERB").add_parser("list"))

    @clear_errors
    def handle(self, *args, verb, format, **options):
        rows = usage.pool_rows()
        if format == "json":
            from pools.api.inventory import PoolRowSerializer  # DRF: loaded only for the JSON (see cli.py)

            print_json(self.stdout, PoolRowSerializer(rows, many=True).data)
            return
        print_table(self.stdout, ["POOL NAME", "STATUS", "GPU TOTAL", "GPU USED", "GPU FREE", "FREE NOT READY",
                                  "NODE COUNT"],
                    [[r["name"], r["status"], r["gpu_total"], r["gpu_used"], r["gpu_free"], r["gpu_free_not_ready"],
                      r["node_count"]] for r in rows])
