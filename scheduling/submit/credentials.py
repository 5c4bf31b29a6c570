"""A user's stored credentials (`osmo credential set/list/delete`, `/profile/`): kept sealed
(`scheduling.models.credentials`), listed by name, type and profile, never by value; each is the caller's own, so
another user's credential is, to a caller, a name that does not exist. A submission naming a credential checks it
here (it exists, it has the keys the task asks for) so that a typo is a 400 rather than a pod that never starts."""

from django.db import transaction

from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.models import audit
from pools.models.visibility import Access
from scheduling.models import Credential
from scheduling.models.credentials import seal
from scheduling.specs import data
from scheduling.specs.requests import WorkloadRequest

MAX_PER_USER = 200


def shown(credential: Credential) -> dict:
    """A credential as OSMO's CLI lists it: no value, ever."""
    return {"cred_name": credential.name, "cred_type": credential.cred_type, "profile": credential.profile,
            "keys": list(credential.keys)}


def listing(user) -> list[dict]:
    return [shown(c) for c in Credential.objects.filter(user=user).order_by("name")]


def store(user, name: str, body) -> Credential:
    """Create or replace the caller's credential `name` (a 400 naming the field for a bad name or body)."""
    data.check_credential_name(name, "name")
    given = data.credential_body(body)
    with transaction.atomic():
        existing = Credential.objects.select_for_update().filter(user=user, name=name).first()
        if existing is None and Credential.objects.filter(user=user).count() >= MAX_PER_USER:
            raise ConfigError(f"name: you have {MAX_PER_USER} credentials, the most one user may keep; delete one "
                              "first", field="name")
        credential = existing or Credential(user=user, name=name)
        credential.cred_type, credential.profile = given.cred_type, given.profile
        credential.keys, credential.sealed = sorted(given.payload), seal(given.payload)
        credential.save()
        # The audit names the credential and its type, never a value.
        audit.record("credential", f"credential/{user.get_username()}/{name}", "update" if existing else "create",
                     f"{given.cred_type} credential {name} of {user.get_username()} (keys: "
                     f"{', '.join(sorted(given.payload))})", actor=user)
    return credential


def remove(user, name: str) -> Credential:
    with transaction.atomic():
        credential = Credential.objects.filter(user=user, name=name).first()
        if credential is None:
            raise ConfigNotFound(f"You have no credential named {name}.")
        credential.delete()
        audit.record("credential", f"credential/{user.get_username()}/{name}", "delete",
                     f"{credential.cred_type} credential {name} of {user.get_username()}", actor=user)
    return credential


def check_uses(access: Access, request: WorkloadRequest, field: str = "") -> None:
    """Every credential the request names is the caller's and has the keys it asks for."""
    if not request.credentials:
        return
    prefix = f"{field}." if field else ""
    owned = {c.name: c for c in Credential.objects.filter(
        user=access.user if access.signed_in else None, name__in=[u.name for u in request.credentials])} \
        if access.signed_in else {}
    for use in request.credentials:
        where = f"{prefix}credentials.{use.name}"
        credential = owned.get(use.name)
        if credential is None:
            raise ConfigError(f"{where}: you have no credential named {use.name} (set it with `osmo credential set "
                              f"{use.name} --payload KEY=VALUE`, or on your profile page)", field=where)
        for env, key in use.env.items():
            if key not in credential.keys:
                raise ConfigError(f"{where}.{env}: credential {use.name} has no key {key!r}; its keys: "
                                  f"{', '.join(credential.keys)}", field=f"{where}.{env}")
