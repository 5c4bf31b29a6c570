"""`./manage.py describe pool NAME` (gpuctl's `describe pool`) and `describe node NAME` (what `kubectl
describe node` tells, in this control plane's terms: the node page's facts as text)."""

from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.fleet import usage
from pools.fleet.node_pods import pods_on
from pools.management.cli import CliCommand, add_format, clear_errors, print_json, print_table
from pools.models import Node, Pool
from pools.pages.formatting import size

GIB = 1024**3


def _gib(value: int) -> str:
    return f"{value / GIB:.0f}Gi"


class Command(CliCommand):
    help = ("describe pool NAME: the pool's figures, its platforms with node counts and GPUs (total, used, free, "
            "free on Ready nodes, unhealthy), and its nodes. describe node NAME: its status and reasons, conditions, "
            "recent events, taints, labels, pools and the pods on it.")

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=["pool", "node"])
        parser.add_argument("name")
        parser.add_argument("--backend", help="describe node: needed only when several backends have a node of "
                                              "that name.")
        add_format(parser)

    @clear_errors
    def handle(self, *args, kind, name, format, backend, **options):
        if kind == "node":
            self.describe_node(name, backend, format)
        else:
            self.describe_pool(name, format)

    def describe_pool(self, name: str, format: str) -> None:
        pool = Pool.objects.filter(name=name).first()
        if pool is None:
            raise ConfigNotFound(f"There is no pool named {name!r}")
        from pools.api.inventory import PoolDetailSerializer  # DRF: loaded only when needed (see cli.py)

        detail = PoolDetailSerializer(usage.pool_detail(pool)).data
        if format == "json":
            print_json(self.stdout, detail)
            return
        out = self.stdout
        for label, key in [("Name", "name"), ("Description", "description"), ("Status", "status"),
                           ("Backend", "backend"), ("Nodes", "node_count")]:
            out.write(f"{label + ':':<14}{detail[key]}")
        out.write(f"{'GPUs:':<14}{detail['gpu_used']} used / {detail['gpu_total']} total, {detail['gpu_free']} free "
                  f"(and {detail['gpu_free_not_ready']} on nodes not ready), {detail['gpu_unhealthy']} unhealthy")
        out.write(f"{'CPU:':<14}{detail['cpu_used']} / {detail['cpu_total']} cores requested")
        out.write(f"{'Memory:':<14}{detail['memory_used'] / 1024**3:.0f}Gi / {detail['memory_total'] / 1024**3:.0f}Gi"
                  " requested")
        out.write("Platforms:")
        if detail["platforms"]:
            print_table(out, ["  PLATFORM", "NODES", "GPU TOTAL", "USED", "FREE", "FREE NOT READY", "UNHEALTHY"],
                        [[f"  {p['name']}", p["node_count"], p["gpu_total"], p["gpu_used"], p["gpu_free"],
                          p["gpu_free_not_ready"], p["gpu_unhealthy"]] for p in detail["platforms"]])
        else:
            out.write("  (none)")
        out.write("Nodes:")
        print_table(out, ["  NODE", "STATUS", "GPU TYPE", "GPU USED/TOTAL", "PLATFORMS"],
                    [[f"  {n['node']}", n["status"], n["gpu_product"] or "-", f"{n['gpu_used']}/{n['gpu_total']}",
                      ",".join(n["platforms"]) or "-"] for n in detail["nodes"]])

    def describe_node(self, name: str, backend: str | None, format: str) -> None:
        nodes = Node.objects.select_related("backend").filter(name=name)
        if backend:
            nodes = nodes.filter(backend__name=backend)
        found = list(nodes[:2])
        if not found:
            raise ConfigNotFound(f"There is no node named {name!r}" + (f" on backend {backend!r}" if backend else ""))
        if len(found) > 1:
            raise ConfigError(f"node {name!r} exists on several backends; name one with --backend", field="backend")
        node = found[0]
        detail = usage.node_detail(node)
        if format == "json":
            from pools.api.inventory import NodeDetailSerializer  # DRF: loaded only for the JSON (see cli.py)

            print_json(self.stdout, NodeDetailSerializer(detail).data)
            return
        out = self.stdout
        facts = [("Name", node.name), ("Backend", node.backend.name), ("Status", node.status),
                 ("Reasons", "; ".join(node.reasons) or "-"),
                 ("Schedulable", "no (cordoned)" if node.unschedulable else "yes"),
                 ("Pools", ", ".join(node.pool_names) or "-"), ("Platforms", ", ".join(node.platform_names) or "-"),
                 ("Sharing", node.sharing), ("GPU type", node.gpu_product or "-"),
                 ("GPUs", f"{node.gpu_used} used / {node.gpu_total} total, {node.gpu_free} free, "
                          f"{node.gpu_unhealthy} unhealthy"),
                 ("CPU", f"{usage.cores(node.cpu_requested):g} / {usage.cores(node.cpu_allocatable):g} cores "
                         "requested"),
                 ("Memory", f"{_gib(node.memory_requested)} / {_gib(node.memory_allocatable)} requested"),
                 ("Last seen", node.last_seen.isoformat() if node.last_seen else "never"),
                 ("Last change", node.updated_at.isoformat() if node.updated_at else "never")]
        for label, value in facts:
            out.write(f"{label + ':':<14}{value}")
        out.write("Conditions:")
        print_table(out, ["  TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"],
                    [[f"  {c.get('type', '')}", c.get("status", ""), c.get("reason") or "-",
                      c.get("last_transition_time") or "-", c.get("message") or "-"] for c in node.conditions])
        out.write("Events:")
        if detail["events"]:
            print_table(out, ["  AT", "KIND", "EVENT"], [[f"  {e['at'].isoformat(timespec='seconds')}", e["kind"],
                                                          e["event"]] for e in detail["events"]])
        else:
            out.write("  (none recorded)")
        out.write("Taints:")
        for taint in node.taints:
            value = f"={taint['value']}" if taint.get("value") else ""
            out.write(f"  {taint.get('key', '')}{value}:{taint.get('effect', '')}")
        if not node.taints:
            out.write("  (none)")
        out.write("Pods:")
        pods = pods_on(node).pods
        print_table(out, ["  POD", "PHASE", "GPU", "CPU", "MEMORY", "WORKLOAD"],
                    [[f"  {pod.namespace}/{pod.name}", pod.phase, pod.gpu, f"{pod.cpu:g}", size(pod.memory),
                      pod.workload or (f"(GPU operator: {pod.component})" if pod.component else "-")]
                     for pod in pods])
        out.write("Labels:")
        for key, value in sorted(node.labels.items()):
            out.write(f"  {key}={value}")
