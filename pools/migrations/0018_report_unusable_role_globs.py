"""Roles stored before globs were checked on import may hold one that no regex dialect can read (`[b--]`): every
page that filters pools through such a role fails for its holders. This migration names them and changes
nothing; an admin fixes each one (`config show ROLE NAME`, edit, `config update`)."""

import logging

from django.db import migrations

from pools.engine.policies import glob_problem, normalize_path

log = logging.getLogger("pools.migrations")


def unusable_globs(policies) -> list[tuple[str, str]]:
    """(path as written, why) for every action of `policies` whose glob the rules cannot use."""
    found = []
    for policy in policies or []:
        for action in policy.get("actions", []) if isinstance(policy, dict) else []:
            path = str(action.get("path", "")) if isinstance(action, dict) else ""
            if problem := glob_problem(normalize_path(path)[1]):
                found.append((path, problem))
    return found


def report(apps, schema_editor):
    for role in apps.get_model("pools", "Role").objects.order_by("name"):
        for path, problem in unusable_globs(role.policies):
            message = f"Role {role.name!r} holds the path {path!r}, which no rule can use: {problem}. Fix it."
            log.warning(message)
            print(f"\n  {message}", end="")


class Migration(migrations.Migration):

    dependencies = [
        ('pools', '0017_backend_engine_refused_cluster_uid'),
    ]

    operations = [
        migrations.RunPython(report, migrations.RunPython.noop),
    ]
