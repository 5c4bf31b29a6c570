"""Roles, who holds them, and personal API tokens."""

import hashlib

from django.conf import settings
from django.db import models
from django.utils import timezone

from pools.engine.policies import RoleRules

from .names import name_validator


class Role(models.Model):
    class SyncMode(models.TextChoices):
        IMPORT = "import", "import: sign-in adds the role when a mapped group is present"
        FORCE = "force", "force: sign-in adds or removes the role by the mapped groups"
        IGNORE = "ignore", "ignore: identity-provider groups never change who holds the role"

    name = models.CharField(max_length=128, unique=True, validators=[name_validator])
    description = models.TextField(blank=True)
    # [{"actions": [{"base": "http", "path": GLOB, "method": METHOD}]}], as the document wrote them.
    policies = models.JSONField(default=list, blank=True)
    immutable = models.BooleanField(default=False, help_text="Documents can neither change nor delete it.")
    sync_mode = models.CharField(max_length=8, choices=SyncMode.choices, default=SyncMode.IMPORT)
    external_roles = models.JSONField(
        null=True, blank=True,
        help_text="Identity-provider groups that map to this role; empty means the group named like the role.",
    )
    users = models.ManyToManyField(settings.AUTH_USER_MODEL, through="RoleAssignment", related_name="access_roles",
                                   blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def groups(self) -> list[str]:
        return [self.name] if self.external_roles is None else list(self.external_roles)

    def rules(self) -> RoleRules:
        return RoleRules.from_policies(self.name, self.policies)


class RoleAssignment(models.Model):
    class Source(models.TextChoices):
        MANUAL = "manual", "assigned by an administrator"
        IDP = "idp", "mapped from an identity-provider group"
        OIDC = "oidc", "mapped from an OpenID Connect groups claim"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="role_assignments")
    role = models.ForeignKey(Role, on_delete=models.CASCADE, related_name="assignments")
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.MANUAL)
    assigned_by = models.CharField(max_length=150, blank=True)
    assigned_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["role__name", "user__username"]
        constraints = [models.UniqueConstraint(fields=["user", "role"], name="role_assignment_unique")]

    def __str__(self) -> str:
        return f"{self.role.name} for {self.user}"


def token_digest(secret: str) -> str:
    # Secrets are 256 random bits, so a fast hash is enough: nobody can guess their way to a preimage.
    return hashlib.sha256(secret.encode()).hexdigest()


class AccessToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=128, validators=[name_validator])
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False, help_text="The secret's first characters.")
    # False: the token acts with `roles` only, and only while the user still holds them.
    all_roles = models.BooleanField(default=True)
    roles = models.ManyToManyField(Role, blank=True, related_name="tokens")
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="access_token_unique_per_user")]

    def __str__(self) -> str:
        return f"{self.user} / {self.name}"

    @property
    def expired(self) -> bool:
        return self.expires_at <= timezone.now()
