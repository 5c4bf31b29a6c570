"""`./manage.py describe pool NAME` (gpuctl's `describe pool`)."""

from django.core.management.base import BaseCommand

from pools.api.inventory import PoolDetailSerializer
from pools.config.history import ConfigNotFound
from pools.fleet import usage
from pools.management.cli import add_format, clear_errors, print_json, print_table
from pools.models import Pool


class Command(BaseCommand):
    help = ("describe pool NAME: the pool's figures, its platforms with node counts and GPUs (total, used, free, "
            "free on Ready nodes, unhealthy), and its nodes.")

    def add_arguments(self, parser):
        parser.add_argument("kind", choices=["pool"])
        parser.add_argument("name")
        add_format(parser)

    @clear_errors
    def handle(self, *args, kind, name, format, **options):
        pool = Pool.objects.filter(name=name).first()
        if pool is None:
            raise ConfigNotFound(f"There is no pool named {name!r}")
        detail = PoolDetailSerializer(usage.pool_detail(pool)).data
        if format == "json":
            print_json(self.stdout, detail)
            return
        out = self.stdout
        for label, key in [("Name", "name"), ("Description", "description"), ("Status", "status"),
                           ("Backend", "backend"), ("Nodes", "node_count")]:
            out.write(f"{label + ':':<14}{detail[key]}")
        out.write(f"{'GPUs:':<14}{detail['gpu_used']} used / {detail['gpu_total']} total, {detail['gpu_free']} free, "
                  f"{detail['gpu_unhealthy']} unhealthy")
        out.write(f"{'CPU:':<14}{detail['cpu_used']} / {detail['cpu_total']} cores requested")
        out.write(f"{'Memory:':<14}{detail['memory_used'] / 1024**3:.0f}Gi / {detail['memory_total'] / 1024**3:.0f}Gi"
                  " requested")
        out.write("Platforms:")
        if detail["platforms"]:
            print_table(out, ["  PLATFORM", "NODES", "GPU TOTAL", "USED", "FREE", "FREE READY", "UNHEALTHY"],
                        [[f"  {p['name']}", p["node_count"], p["gpu_total"], p["gpu_used"], p["gpu_free"],
                          p["gpu_free_ready"], p["gpu_unhealthy"]] for p in detail["platforms"]])
        else:
            out.write("  (none)")
        out.write("Nodes:")
        print_table(out, ["  NODE", "STATUS", "GPU TYPE", "GPU USED/TOTAL", "PLATFORMS"],
                    [[f"  {n['node']}", n["status"], n["gpu_product"] or "-", f"{n['gpu_used']}/{n['gpu_total']}",
                      ",".join(n["platforms"]) or "-"] for n in detail["nodes"]])
