"""What each user chose to see on the pages."""

from django.conf import settings
from django.db import models


class TablePreference(models.Model):
    """The columns a user chose for one table of the pages, in the order shown."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="table_preferences")
    table = models.CharField(max_length=64)
    columns = models.JSONField(default=list)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "table"], name="table_preference_unique")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.table}"


class Profile(models.Model):
    """A user's settings beyond the pages: the project and the pool a submission names when it names none."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="osmo_profile")
    default_project = models.ForeignKey("pools.Project", null=True, blank=True, on_delete=models.SET_NULL,
                                        related_name="+", help_text="Used when a submission names no project.")
    default_pool = models.ForeignKey("pools.Pool", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
                                     help_text="Used when a submission names no pool (OSMO's profile pool).")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.user_id} profile"
