"""OSMO's public cookbook through our OSMO door (issue 41): how many of its workflow files `POST
/api/pool/{pool}/workflow?dry_run=true` accepts, and why each refused one is refused.

Usage, from the project root, with a checkout of NVIDIA's OSMO repository (Apache-2.0; its `cookbook/` holds the
workflow files):

    git clone --depth 1 https://github.com/NVIDIA/OSMO /tmp/OSMO
    .venv/bin/python benchmarks/osmo_cookbook.py --cookbook /tmp/OSMO/cookbook [--set K=V ...] [--keep]
        [--database NAME]

Each `.yaml`/`.yml` file under the directory whose YAML holds `workflow:` is sent as OSMO's CLI sends a file before
it submits (`osmo workflow submit` does a dry run first when the file is templated): the text as written (its
`localpath` files unread, as in that dry run), priority NORMAL, `?project=vision`, to pool `training` (platform
h100, 4 nodes of 8 H100s, a project that deserves every GPU: benchmarks/submit.py's world), with the `--set`
variables the cookbook's READMEs tell their users to give (by default `storage_url=s3://my-bucket/osmo-data`;
`--set` replaces the list, `--set` alone sends none). Files that are not workflows (a Helm values file, a dataset
manifest) are counted apart. Database: a scratch PostgreSQL database as benchmarks/submit.py makes it (dropped at
the end unless --keep).

Three counts: the site as it comes; then as the cookbook's READMEs tell an OSMO user to prepare it: the pool given a
data store (`manage.py storage set`) and the researcher holding every credential the files name (`osmo credential
set NAME --payload KEY=...` as the READMEs write it, else one key; here `POST /api/credentials/NAME` with placeholder
values); then with pool training also serving the platforms the files name (`ovx-a40`, `agx-orin-jp6`, ...: the
files say "Update platform if necessary"; an admin adds them to the pool's configuration, and each gets 2 nodes of 8
GPUs, as benchmarks/submit.py's nodes are rows).
"""

import argparse
import os
import re
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import pages as bench  # benchmarks/pages.py: the scratch database helpers
import submit as world  # benchmarks/submit.py: the world (pool training, project vision, a researcher's token)

bench.BENCH_DB = "osmo_bench_cookbook"
BASE_DIR = Path(__file__).resolve().parent.parent


def workflow_files(root: Path) -> tuple[list[Path], list[Path]]:
    """The workflow files under `root` and the other YAML files."""
    found, others = [], []
    for path in sorted([*root.rglob("*.yaml"), *root.rglob("*.yml")]):
        (found if re.search(r"^workflow:", path.read_text(encoding="utf-8"), re.M) else others).append(path)
    return found, others


def reason(answer: dict) -> str:
    """A refusal in a line: the field it names and the start of its message."""
    text = str(answer.get("detail") or answer)
    return " ".join(text.split())[:220]


def dry_runs(client, files: list[Path], args) -> dict[str, str]:
    """Each file as a dry run; the refused ones and why."""
    refused: dict[str, str] = {}
    for path in files:
        response = client.post("/api/pool/training/workflow?dry_run=true&project=vision",
                               {"file": path.read_text(encoding="utf-8"), "set_variables": args.variables},
                               content_type="application/json")
        if response.status_code != 200:
            refused[str(path.relative_to(args.cookbook))] = f"{response.status_code}: {reason(response.json())}"
    return refused


def add_platforms(names: list[str]) -> None:
    """Pool training with these platforms too (no pod template of their own: any node of theirs), 2 nodes each."""
    from django.utils import timezone

    from pools.config import writes
    from pools.models import Backend, ConfigKind, Node, NodeMembership, Pool

    document = writes.export(ConfigKind.POOL)
    document["pools"]["training"]["platforms"].update({name: {} for name in names})
    writes.import_document(ConfigKind.POOL, document, author="bench")
    backend, pool = Backend.objects.get(name="default"), Pool.objects.get(name="training")
    for name in names:
        created = Node.objects.bulk_create(Node(
            backend=backend, name=f"{name.lower().replace('_', '-')}-{i}", gpu_total=8, gpu_allocatable=8, gpu_free=8,
            cpu_allocatable=190_000, memory_allocatable=2000 * 1024 ** 3, storage_allocatable=2000 * 1024 ** 3,
            status="Ready", pool_names=["training"], platform_names=[f"training/{name}"], last_seen=timezone.now())
            for i in range(2))
        NodeMembership.objects.bulk_create(NodeMembership(node=node, pool=pool, platforms=[name]) for node in created)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cookbook", required=True, type=Path, help="the cookbook/ directory of an OSMO checkout")
    parser.add_argument("--set", nargs="*", default=["storage_url=s3://my-bucket/osmo-data"], dest="variables",
                        help="KEY=VALUE variables sent with every file, as `osmo workflow submit --set` sends them")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--database", default=bench.BENCH_DB, help="the scratch database's name")
    args = parser.parse_args()
    bench.BENCH_DB = args.database
    files, others = workflow_files(args.cookbook)
    if not files:
        raise SystemExit(f"no workflow file under {args.cookbook}")

    os.chdir(BASE_DIR)
    sys.path.insert(0, str(BASE_DIR))
    bench.create_database()
    os.environ.update({"DATABASE_URL": f"{bench.server_url()}/{bench.BENCH_DB}",
                       "DJANGO_SETTINGS_MODULE": "osmo_site.settings", "DEBUG": "0", "ALLOWED_HOSTS": "testserver",
                       "OSMO_ADMISSION_ON_COMMIT": "0", "LOG_LEVEL": "ERROR", **world.LIMITS_OFF})
    os.environ.setdefault("SECRET_KEY", "benchmark-only-secret-key")
    try:
        import django

        django.setup()
        from django.core.management import call_command
        from django.test import Client

        call_command("migrate", verbosity=0)
        client = Client(HTTP_AUTHORIZATION=f"Bearer {world.build_world(4)}")
        print(f"{args.cookbook}: {len(files)} workflow files ({len(others)} other YAML files not sent)")
        bare = len(files) - len(dry_runs(client, files, args))
        print(f"accepted as a dry run by the site as it comes (--set {' '.join(args.variables) or 'nothing'}): "
              f"{bare} of {len(files)}")
        key = Path(os.environ.get("TMPDIR", "/tmp")) / "osmo-cookbook-key"
        key.write_text("placeholder-secret-key")
        call_command("storage", "set", "training", "--endpoint", "https://s3.example.org", "--bucket", "osmo-data",
                     "--access-key-id", "placeholder", "--access-key-file", str(key), verbosity=0)
        key.unlink()
        names = sorted({name for path in files for name in re.findall(
            r"^\s+credentials:\s*\n\s+([A-Za-z0-9_.-]+):", path.read_text(encoding="utf-8"), re.M)})
        payloads = {name: {"key": "placeholder"} for name in names}
        for readme in args.cookbook.rglob("*.md"):  # as the READMEs say: `osmo credential set NAME ... --payload k=v`
            for name, items in re.findall(r"osmo credential set (\S+) --type GENERIC --payload (.+)",
                                          readme.read_text(encoding="utf-8")):
                payloads[name] = {item.strip('"').split("=", 1)[0]: "placeholder" for item in items.split()}
        for name, payload in payloads.items():
            client.post(f"/api/credentials/{name}", {"generic_credential": {"credential": payload}},
                        content_type="application/json")
        refused = dry_runs(client, files, args)
        print(f"accepted once the pool has a data store and the researcher the credentials {', '.join(payloads)}: "
              f"{len(files) - len(refused)} of {len(files)}")
        for name, why in refused.items():
            print(f"  refused {name}\n    {why}")
        platforms = sorted({name for path in files for name in re.findall(
            r"^\s+platform:\s*([A-Za-z0-9_.-]+)\s*$", path.read_text(encoding="utf-8"), re.M)} - {"h100"})
        add_platforms(platforms)
        refused = dry_runs(client, files, args)
        print(f"accepted once pool training also serves the platforms {', '.join(platforms)}: "
              f"{len(files) - len(refused)} of {len(files)}")
        for name, why in refused.items():
            print(f"  refused {name}\n    {why}")
        kinds = Counter(re.sub(r"[\[\]0-9]+", "", why.split(": ", 2)[1].split(":")[0]) for why in refused.values())
        print("refusals by field: " + ", ".join(f"{field} {count}" for field, count in kinds.most_common()))
    finally:
        if not args.keep:
            bench.drop_database()


if __name__ == "__main__":
    main()
