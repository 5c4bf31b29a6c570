"""Workflow IDs belong to their submitter (`Workflow`): OSMO's `<name>-<n>` is numbered per user, allocated
under a unique constraint (retried on a conflict), and a workload joins only a workflow of its own caller. To
anyone else, another user's workflow is an unknown name: it neither changes their numbering nor takes their
workloads. Readers who see several users' workflows of one ID (staff, project members) choose with `?user=`."""

from django.db import IntegrityError, transaction
from django.db.models import Max

from pools.engine import ConfigError
from pools.models.visibility import Access
from scheduling.models import Workflow

ATTEMPTS = 20


def _owner(access: Access):
    return access.user if access.signed_in else None


def allocate(access: Access, base: str, spec: str = "", templated_spec: str = "") -> str:
    """The caller's next `<base>-<n>`, recorded with the file it runs (call inside the transaction that saves its
    workloads)."""
    user = _owner(access)
    number = 0
    for _ in range(ATTEMPTS):
        taken = Workflow.objects.filter(submitter=user, base=base).aggregate(top=Max("number"))["top"] or 0
        number = max(taken, number) + 1
        name = f"{base}-{number}"
        try:
            with transaction.atomic():
                Workflow.objects.create(name=name, base=base, number=number, submitter=user,
                                        submitter_name=user.get_username() if user else "", spec=spec,
                                        templated_spec=templated_spec)
            return name
        except IntegrityError:
            continue  # taken meanwhile (a concurrent submission of the same name, or a joined ID): count again
    raise ConfigError(f"workflow.name: could not allocate an ID for {base}; submit again", field="workflow.name")


def join(access: Access, name: str) -> None:
    """Record `name` as the caller's workflow (a native workload naming one): the caller's own, never another
    user's, whatever that one is called."""
    user = _owner(access)
    base, _, number = name.rpartition("-")
    numbered = number.isascii() and number.isdigit() and len(number) < 9
    try:
        with transaction.atomic():
            Workflow.objects.get_or_create(submitter=user, name=name, defaults={
                "base": base if numbered else name, "number": int(number) if numbered else None,
                "submitter_name": user.get_username() if user else ""})
    except IntegrityError:
        pass  # a concurrent join made it


def owned_rows(rows: list, access: Access, user_name: str | None) -> list:
    """Of the visible workloads carrying one workflow ID, those of one owner: `user_name`'s when given, else the
    caller's own, else the one owner's. Several owners and no choice: a 400 naming `user`."""
    if user_name:
        return [w for w in rows if w.submitter_name == user_name]
    me = access.user.pk if access.signed_in else None
    own = [w for w in rows if me is not None and w.submitter_id == me]
    if own:
        return own
    owners = sorted({w.submitter_name for w in rows})
    if len({w.submitter_id for w in rows}) > 1:
        raise ConfigError(f"user: workflow {rows[0].workflow} is the name of workflows of several users "
                          f"({', '.join(owners)}); choose one with ?user=", field="user")
    return rows
