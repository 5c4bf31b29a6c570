"""`./manage.py resource list [--pool P] [--platform X] [--status S]` (OSMO's `resource list` columns, then
each node's status and every reason it is not Ready)."""

from pools.fleet import usage
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table

GIB = 1024**3


def _gib(value: int) -> str:
    return f"{value / GIB:.0f}Gi"


def _cores(value) -> str:
    return f"{value:g}"


class Command(CliCommand):
    help = "resource list: one row per node with storage, CPU, memory and GPU as used/total, and a sum row."

    def add_arguments(self, parser):
        listing = parser.add_subparsers(dest="verb", required=True, metavar="VERB").add_parser("list")
        listing.add_argument("--pool")
        listing.add_argument("--platform", help="name, or pool/platform")
        listing.add_argument("--status", help="Ready, Unknown, Not ready, a full status, or attention (every node "
                                              "that is not Ready, Unknown included)")
        add_format(listing)

    @clear_errors
    def handle(self, *args, verb, format, pool, platform, status, **options):
        nodes = usage.filter_nodes(usage.Node.objects.all(), pool=pool, platform=platform, status=status)
        rows = list(usage.node_rows(nodes))
        if format == "json":
            from pools.api.inventory import NodeRowSerializer  # DRF: loaded only for the JSON (see cli.py)

            print_json(self.stdout, NodeRowSerializer(rows, many=True).data)
            return
        table = [[r["node"], ",".join(r["pools"]), ",".join(r["platforms"]) or "-", r["resource_type"],
                  _gib(r["storage_total"]), f"{_cores(r['cpu_used'])}/{_cores(r['cpu_total'])}",
                  f"{_gib(r['memory_used'])}/{_gib(r['memory_total'])}", f"{r['gpu_used']}/{r['gpu_total']}",
                  r["status"], "; ".join(r["reasons"]) or "-"]
                 for r in rows]
        table.append(["Total", "", "", "", _gib(sum(r["storage_total"] for r in rows)),
                      f"{_cores(sum(r['cpu_used'] for r in rows))}/{_cores(sum(r['cpu_total'] for r in rows))}",
                      f"{_gib(sum(r['memory_used'] for r in rows))}/{_gib(sum(r['memory_total'] for r in rows))}",
                      f"{sum(r['gpu_used'] for r in rows)}/{sum(r['gpu_total'] for r in rows)}", "", ""])
        print_table(self.stdout, ["Node", "Pool", "Platform", "Type", "Storage", "CPU", "Memory", "GPU", "Status",
                                  "Reason"], table)
