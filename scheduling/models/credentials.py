"""Credentials: what a user stores with `osmo credential set` (a name, a type, key-value pairs), and the object
store an admin gives a pool for its workflows' data. A payload is never kept in clear: it is sealed (Fernet:
AES-128-CBC and HMAC-SHA256) with a key derived from SECRET_KEY, opened only by dispatch to write the Kubernetes
Secret of the attempt that uses it (scheduling.run.task_data). Rows show names, types and key names, never values;
nothing that prints a row (admin, audit, pages, API) reads `sealed`."""

import base64
import json

from django.conf import settings
from django.db import models

from pools.models import Pool


def _fernet():
    # cryptography is imported here, by the few processes that seal or open a payload, not by every one that
    # loads the models (each `manage.py` command).
    from cryptography.fernet import Fernet
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
               info=b"osmo-pools credentials").derive(settings.SECRET_KEY.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def seal(payload: dict[str, str]) -> str:
    return _fernet().encrypt(json.dumps(payload, sort_keys=True).encode()).decode()


def unseal(token: str) -> dict[str, str]:
    """The payload; {} when it cannot be opened (SECRET_KEY changed: the user sets it again)."""
    from cryptography.fernet import InvalidToken

    try:
        return json.loads(_fernet().decrypt(token.encode()))
    except (InvalidToken, ValueError):
        return {}


class Credential(models.Model):
    class Type(models.TextChoices):
        REGISTRY = "REGISTRY"
        DATA = "DATA"
        GENERIC = "GENERIC"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credentials")
    name = models.CharField(max_length=63)
    cred_type = models.CharField(max_length=8, choices=Type.choices, default=Type.GENERIC)
    # OSMO's `profile`: a DATA credential's endpoint, a REGISTRY credential's registry ("" for GENERIC).
    profile = models.CharField(max_length=1024, blank=True)
    keys = models.JSONField(default=list, help_text="The payload's key names (never their values).")
    sealed = models.TextField(help_text="The payload, sealed with a key derived from SECRET_KEY.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user", "name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="credential_unique_per_user")]

    def __str__(self) -> str:
        return f"{self.name} ({self.cred_type})"

    def payload(self) -> dict[str, str]:
        return unseal(self.sealed)


class DataStore(models.Model):
    """A pool's object store for its workflows' data: task outputs passed to other tasks, datasets, and the
    endpoint `s3://` URLs are copied through. Set by an admin (`manage.py storage set`)."""

    pool = models.OneToOneField(Pool, on_delete=models.CASCADE, related_name="data_store")
    endpoint = models.URLField(max_length=1024, help_text="The S3 API endpoint, e.g. https://s3.us-east-1.amazonaws.com")
    bucket = models.CharField(max_length=63)
    prefix = models.CharField(max_length=512, blank=True)
    region = models.CharField(max_length=64, default="us-east-1")
    sealed = models.TextField(help_text="access_key_id and access_key, sealed with a key derived from SECRET_KEY.")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.pool.name}: {self.endpoint} {self.bucket}"

    def payload(self) -> dict[str, str]:
        return unseal(self.sealed)
