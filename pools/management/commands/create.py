"""`./manage.py create -f FILE`: gpuctl's pool YAML (kind: pool) makes a label-bound pool."""

from pathlib import Path

from django.core.management.base import BaseCommand

from pools.engine import ConfigError
from pools.fleet import poolfiles
from pools.management.cli import author, clear_errors


def read_pool_file(path: str) -> list[poolfiles.PoolFile]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    return poolfiles.parse_pool_file(text)


class Command(BaseCommand):
    help = "Create (or update) pools from gpuctl pool YAML and label their nodes."

    def add_arguments(self, parser):
        parser.add_argument("-f", "--file", required=True)
        parser.add_argument("--backend", help="Backend of a pool that lists no nodes.")
        parser.add_argument("--overwrite", action="store_true", help="Move nodes that are in another pool.")
        parser.add_argument("--author")

    @clear_errors
    def handle(self, *args, file, backend, overwrite, **options):
        for spec in read_pool_file(file):
            outcome = poolfiles.create_pool(spec, author=author(options), backend=backend, overwrite=overwrite)
            self.stdout.write(f"pool/{outcome.pool} {outcome.action} ({len(outcome.nodes)} nodes labeled)")
