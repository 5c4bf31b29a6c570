"""What the scheduling commands share: who the submitter is, finding a workload by id, prefix or name, the
operator's view, and request files in JSON or YAML."""

import getpass
import os
import uuid
from pathlib import Path

from django.contrib.auth import get_user_model

from pools.config.history import ConfigNotFound
from pools.engine import ConfigError, read_yaml
from pools.models.visibility import Access
from scheduling.models import Workload


def read_document(path: str):
    """A request body from a JSON or YAML file (JSON is YAML)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not UTF-8 text") from None
    # Depth, numbers, NUL and lone surrogates checked as the API checks JSON (pools.engine.jsonread).
    return read_yaml(text, path, what="is neither JSON nor YAML")


def find_user(name: str | None):
    users = get_user_model().objects
    if name:
        user = users.filter(username=name).first()
        if user is None:
            raise ConfigNotFound(f"There is no user named {name!r}")
        return user
    for candidate in (os.environ.get("OSMO_USER"), login(), "admin"):
        user = users.filter(username=candidate).first() if candidate else None
        if user is not None:
            return user
    raise ConfigError("Name the submitter with --as-user USER (no user is named like this account, nor admin).")


def login() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return None


def find_workload(key: str, queryset=None) -> Workload:
    """By id, an id prefix of at least 4 characters, or a name that only one live workload has."""
    rows = (queryset if queryset is not None else Workload.objects.all()).select_related(
        "project__department", "pool")
    key = key.strip()
    if len(key) >= 4 and all(c in "0123456789abcdef-" for c in key.lower()):
        if len(key) < 36:
            found = list(rows.filter(id__startswith=key.lower())[:2])
        else:  # a whole id: hex digits and dashes may still make no UUID, and then no workload has it
            found = list(rows.filter(id=key)) if _is_uuid(key) else []
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise ConfigError(f"{key!r} starts more than one workload's id; give more characters")
    by_name = list(rows.filter(name=key).order_by("-submitted_at")[:50])
    live = [w for w in by_name if w.alive]
    if len(live) == 1 or (len(by_name) == 1 and by_name):
        return (live or by_name)[0]
    if len(by_name) > 1:
        raise ConfigError(f"{len(by_name)} workloads are named {key!r}; give the id (workload list shows it)")
    raise ConfigNotFound(f"There is no workload {key!r}; `./manage.py workload list` shows them")


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def operator_access() -> Access:
    """The operator at the CLI sees everything, as staff do."""
    class Operator:
        is_authenticated = is_active = is_staff = True
        pk = None

    return Access(Operator())


def cancel_now(actor, workload: Workload, message: str, *, operator: str = "") -> str:
    """Cancel, and delete the Job here rather than wait for a worker (the CLI needs none). One line saying what
    happened; PermissionError as `submission.cancel`."""
    from pools.cluster import ClusterError
    from scheduling.run import stopping
    from scheduling.submit import submission

    changed = submission.cancel(actor, workload, message, operator=operator)
    workload.refresh_from_db()
    label = f"Workload {workload.id} ({workload.name})"
    if not changed:
        if workload.stop_status:
            return f"{label} is already stopping (to end {workload.stop_status})."
        return f"{label} had already ended: {workload.status}."
    if not workload.stop_status:
        return f"{label} canceled."
    job = f"{workload.namespace}/{workload.job_name}"
    try:
        stopping.stop(workload.pk)
    except ClusterError as exc:
        return (f"{label}: cancel recorded, but deleting Job {job} failed ({exc.message}); the lifecycle sweep "
                "tries again.")
    return f"{label} canceled; Job {job} deleted."
