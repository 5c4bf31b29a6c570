"""Failed password sign-ins, one row each, counted per user name and per address by pools.access.signin_limit.
Rows live in the database so that every web process (gunicorn workers, hosts) counts the same failures."""

from django.db import models


class SignInFailure(models.Model):
    username = models.CharField(max_length=150)
    address = models.GenericIPAddressField(null=True, blank=True)
    at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["username", "at"], name="signin_failure_user_at"),
            models.Index(fields=["address", "at"], name="signin_failure_address_at"),
            models.Index(fields=["at"], name="signin_failure_at"),
        ]

    def __str__(self) -> str:
        return f"{self.username} from {self.address or 'unknown address'} at {self.at:%Y-%m-%d %H:%M:%S}"
