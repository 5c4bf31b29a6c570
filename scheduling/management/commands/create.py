"""`./manage.py create -f FILE`: gpuctl's YAML. `kind: pool` makes a label-bound pool (pools.fleet.poolfiles);
`kind: training` submits a job as a workload (scheduling.specs.formats.gpuctl_request), as `--as-user USER`."""

from pathlib import Path

from pools.engine import ConfigError, read_yaml_all
from pools.fleet import poolfiles
from pools.management.cli import CliCommand, author, clear_errors
from scheduling.management.cli import find_user
from scheduling.models import Source
from scheduling.specs.formats import gpuctl_request
from scheduling.submit import submission

JOB_KINDS = ("training", "inference", "notebook", "compute")


def read_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None


def read_pool_file(path: str) -> list[poolfiles.PoolFile]:
    return poolfiles.parse_pool_file(read_file(path))


def kind_of(text: str) -> str | None:
    """The `kind` of the file's first document, or None when it cannot be read (the parser then says why)."""
    try:
        first = next((doc for doc in read_yaml_all(text) if doc is not None), None)
    except ConfigError:
        return None
    return first.get("kind") if isinstance(first, dict) else None


class Command(CliCommand):
    help = ("Create from gpuctl YAML: `kind: pool` creates (or updates) a pool and labels its nodes; "
            "`kind: training` submits the job as a workload.")

    def add_arguments(self, parser):
        parser.add_argument("-f", "--file", required=True)
        parser.add_argument("--backend", help="Backend of a pool that lists no nodes.")
        parser.add_argument("--overwrite", action="store_true", help="Move nodes that are in another pool.")
        parser.add_argument("--author")
        parser.add_argument("--as-user", metavar="USER", help="The job's submitter (default: the user named like "
                                                              "this account, else admin).")
        parser.add_argument("--project", help="The job's project (else the file's job.project, else the submitter's "
                                              "default project).")

    @clear_errors
    def handle(self, *args, file, backend, overwrite, as_user, project, **options):
        text = read_file(file)
        if kind_of(text) in JOB_KINDS:
            self.create_job(text, as_user, project)
            return
        if project:
            raise ConfigError("--project names a job's project; a pool file has none")
        for spec in poolfiles.parse_pool_file(text):
            outcome = poolfiles.create_pool(spec, author=author(options), backend=backend, overwrite=overwrite)
            self.stdout.write(f"pool/{outcome.pool} {outcome.action} ({len(outcome.nodes)} nodes labeled)")

    def create_job(self, text: str, as_user: str | None, project: str | None = None) -> None:
        request = gpuctl_request(text, project)
        try:
            result = submission.submit(find_user(as_user), request, source=Source.GPUCTL)
        except submission.SubmissionRefused as exc:
            lines = [f"  {v.pool}: {v.message}" for v in exc.verdicts]
            raise ConfigError("\n".join([f"job/{request.name} refused: no candidate pool can take it.", *lines])) \
                from None
        workload = result.workload
        self.stdout.write(f"job/{workload.name} created (workload {workload.short_id}, project "
                          f"{workload.project.name}, pools {', '.join(workload.pools)}): {workload.status}")
