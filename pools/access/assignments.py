"""Who holds which role: the one place that gives and takes roles away, for `manage.py user`, the admin's
user page, `/api/auth/*` and the identity provider's groups at sign-in."""

from collections.abc import Iterable

from django.db import transaction

from pools.models import Role, RoleAssignment, audit


def add(pairs: Iterable[tuple], by: str, source: str = RoleAssignment.Source.MANUAL, *,
        actor=None) -> tuple[list[tuple], list[tuple]]:
    """Give each (user, role) pair, recorded as given by `by` through `source`; answers (added, already held),
    each in the order given. A pair held already is left as it is (its source and who assigned it are kept)."""
    pairs = list(dict.fromkeys((user, role) for user, role in pairs))
    held = set(RoleAssignment.objects.filter(user__in={user.pk for user, _ in pairs},
                                             role__in={role.pk for _, role in pairs})
               .values_list("user_id", "role_id"))
    new = [(user, role) for user, role in pairs if (user.pk, role.pk) not in held]
    with transaction.atomic():
        RoleAssignment.objects.bulk_create([RoleAssignment(user=user, role=role, assigned_by=by, source=source)
                                            for user, role in new], ignore_conflicts=True)
        audit.record_many([("role", f"role/{role.name}", "grant", f"{user.get_username()} holds {role.name} "
                            f"({RoleAssignment.Source(source).label}, by {by})") for user, role in new],
                          actor=actor)
    return new, [(user, role) for user, role in pairs if (user.pk, role.pk) in held]


def remove(user, roles: Iterable[Role], *, actor=None) -> list[str]:
    """Take each role from `user`, all or none: answers the names of those not held (and then removes none)."""
    roles = list(roles)
    with transaction.atomic():
        held = set(RoleAssignment.objects.select_for_update().filter(user=user, role__in=roles)
                   .values_list("role__name", flat=True))
        missing = [role.name for role in roles if role.name not in held]
        if not missing:
            RoleAssignment.objects.filter(user=user, role__in=roles).delete()
            revoked(user, [role.name for role in roles], actor=actor)
    return missing


def revoked(user, names: Iterable[str], *, actor=None) -> None:
    """The audit rows of roles taken from `user` (in the transaction that took them); `actor` as audit.record's."""
    audit.record_many([("role", f"role/{name}", "revoke", f"{user.get_username()} no longer holds {name}")
                       for name in names], actor=actor)


def replace(user, roles: Iterable[Role], by: str) -> tuple[list[str], list[str]]:
    """Make `roles` exactly the roles `user` holds; answers the names (added, removed)."""
    wanted = {role.pk: role for role in roles}
    with transaction.atomic():
        current = dict(RoleAssignment.objects.filter(user=user).values_list("role_id", "role__name"))
        added, _ = add([(user, role) for pk, role in wanted.items() if pk not in current], by)
        gone = [pk for pk in current if pk not in wanted]
        RoleAssignment.objects.filter(user=user, role_id__in=gone).delete()
        revoked(user, [current[pk] for pk in gone])
    return sorted(role.name for _, role in added), sorted(current[pk] for pk in gone)


def describe_user(user) -> dict:
    """A user and the roles they hold, as the user API answers (`/api/auth/user/...`) and `manage.py user` prints."""
    held = RoleAssignment.objects.filter(user=user).select_related("role").order_by("role__name")
    return {
        "id": user.get_username(),
        "is_staff": user.is_staff,
        "is_active": user.is_active,
        "date_joined": user.date_joined.isoformat(),
        "roles": [{"name": a.role.name, "source": a.source, "assigned_by": a.assigned_by,
                   "assigned_at": a.assigned_at.isoformat()} for a in held],
    }
