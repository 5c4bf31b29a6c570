"""One step to onboard a researcher (the project page's "Add a member", `POST /api/projects/{name}/members/`,
`manage.py project add-member`): the person, named by user name or e-mail, gets an account if they have none, is
made a member of the project by name (a revision of the project's document, as any other edit), and so may use
the pools where the project has a quota (unless OSMO_PROJECT_MEMBERS_USE_POOLS is off: then by role only).

A new account gets a generated password, answered once, for sites that sign in with passwords; on a site that
signs in through an identity provider the person signs in there under the same user name and the password is
never needed. Everything is one transaction: a refusal leaves neither an account nor a membership.
"""

import secrets
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction

from pools.config import writes
from pools.config.history import ConfigNotFound
from pools.engine import ConfigError
from pools.models import ConfigKind, Project, Quota

WHO_MAX_LENGTH = 150  # the user name column's


@dataclass
class Onboarded:
    project: str
    user: str
    created: bool  # a new account
    added: bool  # not a member by name before
    pools: list[str] = field(default_factory=list)  # where the project has a quota
    password: str | None = None  # a new account's, said once

    @property
    def pools_by_membership(self) -> bool:
        return settings.OSMO_PROJECT_MEMBERS_USE_POOLS

    def summary(self) -> str:
        who = f"Account {self.user} created and added" if self.created else (
            f"{self.user} added" if self.added else f"{self.user} was already a member")
        if not self.pools:
            pools = "The project has no quota in any pool yet, so membership grants no pool."
        elif self.pools_by_membership:
            pools = f"As a member they may use pool{'s' if len(self.pools) > 1 else ''} {', '.join(self.pools)}."
        else:
            pools = (f"Members are not given the project's pools on this site (OSMO_PROJECT_MEMBERS_USE_POOLS is "
                     f"off): give them a role that grants {', '.join(self.pools)}.")
        return f"{who}{'' if not self.added and not self.created else ' to project ' + self.project}. {pools}"

    def as_dict(self) -> dict:
        return {"project": self.project, "user": self.user, "created": self.created, "added": self.added,
                "pools": self.pools, "password": self.password, "summary": self.summary()}


def _find_or_create(who: str) -> tuple:
    """(user, created, password): the account named `who` (a user name, or an e-mail address held by exactly
    one account); a new one under that name when there is none."""
    users = get_user_model().objects
    text = (who or "").strip() if isinstance(who, str) else ""
    if not text:
        raise ConfigError("user: give a user name or an e-mail address", field="user")
    if len(text) > WHO_MAX_LENGTH:
        raise ConfigError(f"user: at most {WHO_MAX_LENGTH} characters", field="user")
    if "@" in text:
        try:
            validate_email(text)
        except ValidationError:
            raise ConfigError(f"user: {text!r} is not an e-mail address", field="user") from None
        held = list(users.filter(email__iexact=text)[:2]) or list(users.filter(username=text)[:1])
        if len(held) > 1:
            raise ConfigError(f"user: several accounts have the e-mail address {text}; name the user instead",
                              field="user")
    else:
        try:
            UnicodeUsernameValidator()(text)
        except ValidationError:
            raise ConfigError(f"user: {text!r} is not a user name (letters, digits and @ . + - _ only)",
                              field="user") from None
        held = list(users.filter(username=text)[:1])
    if held:
        return held[0], False, None
    password = secrets.token_urlsafe(12)
    user = users.create_user(username=text, email=text if "@" in text else "", password=password)
    return user, True, password


def onboard(project_name: str, who: str, *, author=None, door: str = "") -> Onboarded:
    """Make `who` a member of `project_name`, creating their account if needed. ConfigError (nothing written)
    when refused; ConfigNotFound when the project does not exist."""
    project = Project.objects.select_related("pool").filter(name=project_name).first() \
        if isinstance(project_name, str) else None
    if project is None:
        raise ConfigNotFound(f"There is no project named {project_name!r}", field="project")
    if project.pool_id is not None:
        raise ConfigError(f"Project {project.name} is pool {project.pool.name}'s own project: its members are "
                          f"everyone who may use that pool; give the person a role that grants it", field="project")
    with transaction.atomic():
        user, created, password = _find_or_create(who)
        name = user.get_username()
        document = writes.export(ConfigKind.PROJECT, project.name)
        added = name not in document["members"]["users"]
        if added:
            document["members"]["users"].append(name)
            writes.import_document(ConfigKind.PROJECT, document, name=project.name, author=author,
                                   description=f"{name} added as a member" + (f" ({door})" if door else ""))
    pools = sorted(Quota.objects.filter(project=project).values_list("pool__name", flat=True))
    return Onboarded(project.name, name, created, added, pools, password)
