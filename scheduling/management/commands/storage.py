"""`./manage.py storage set POOL --endpoint URL --bucket B [--prefix P] [--region R] --access-key-id ID
--access-key-file PATH`, `storage list`, `storage delete POOL`: a pool's data store for its OSMO workflows' data (task
outputs passed to later tasks, datasets, and the endpoint of `s3://` inputs and outputs). The secret key is read from
a file (or `-` for stdin), never from the command line, kept sealed (a key derived from SECRET_KEY), and never
printed: `list` shows endpoints, buckets and prefixes."""

import sys

from django.db import transaction

from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.management.cli import CliCommand, author, clear_errors
from pools.models import Pool, audit
from scheduling.models import DataStore
from scheduling.models.credentials import seal
from scheduling.specs import data


class Command(CliCommand):
    help = "Set, list or delete the data store of a pool (an S3-compatible endpoint, a bucket and its keys)."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["set", "list", "delete"])
        parser.add_argument("pool", nargs="?")
        parser.add_argument("--endpoint", help="The S3 API endpoint, e.g. https://s3.us-east-1.amazonaws.com.")
        parser.add_argument("--bucket")
        parser.add_argument("--prefix", default="")
        parser.add_argument("--region", default="us-east-1")
        parser.add_argument("--access-key-id")
        parser.add_argument("--access-key-file", help="A file holding the secret access key ('-': standard input).")
        parser.add_argument("--author")

    @clear_errors
    def handle(self, *args, action, pool=None, **options):
        if action == "list":
            for row in DataStore.objects.select_related("pool").order_by("pool__name"):
                self.stdout.write(f"{row.pool.name}\t{row.endpoint}\ts3://{row.bucket}/{row.prefix}\t{row.region}")
            return
        if not pool:
            raise ConfigError(f"storage {action}: name the pool")
        target = Pool.objects.filter(name=pool).first()
        if target is None:
            raise ConfigNotFound(f"pool {pool} does not exist")
        if action == "delete":
            with transaction.atomic():
                deleted, _ = DataStore.objects.filter(pool=target).delete()
                if not deleted:
                    raise ConfigNotFound(f"pool {pool} has no data store")
                audit.record("config", f"storage/{pool}", "delete", f"data store of pool {pool}",
                             actor=author(options))
            self.stdout.write(f"Data store of pool {pool} deleted.")
            return
        self.set(target, options)

    def set(self, pool: Pool, options) -> None:
        endpoint, bucket = options.get("endpoint") or "", options.get("bucket") or ""
        if not endpoint.startswith(("http://", "https://")) or len(endpoint) > 1024:
            raise ConfigError("--endpoint: an http:// or https:// URL of the S3 API is required")
        data.check_url(f"s3://{bucket}", "--bucket")
        prefix = (options.get("prefix") or "").strip("/")
        if ".." in prefix.split("/") or len(prefix) > 512:
            raise ConfigError("--prefix: a key prefix without '..', up to 512 characters")
        region = options.get("region") or "us-east-1"
        if len(region) > 64 or not region.replace("-", "").isalnum():
            raise ConfigError("--region: a region name such as us-east-1 (letters, digits and '-', up to 64)")
        key_id, key_file = options.get("access_key_id") or "", options.get("access_key_file") or ""
        if not key_id or not key_file:
            raise ConfigError("--access-key-id and --access-key-file are required (the key is read from the file, "
                              "never from the command line)")
        with (sys.stdin if key_file == "-" else open(key_file, encoding="utf-8")) as handle:
            secret = handle.read(4097).strip()
        if not secret or len(secret) > 4096:
            raise ConfigError("--access-key-file: expected the secret access key (up to 4096 characters)")
        with transaction.atomic():
            DataStore.objects.update_or_create(pool=pool, defaults={
                "endpoint": endpoint, "bucket": bucket, "prefix": prefix,
                "region": region,
                "sealed": seal({"access_key_id": key_id, "access_key": secret})})
            audit.record("config", f"storage/{pool.name}", "update",
                         f"data store of pool {pool.name}: {endpoint} s3://{bucket}/{prefix}", actor=author(options))
        self.stdout.write(f"Data store of pool {pool.name}: {endpoint} s3://{bucket}/{prefix}.")
