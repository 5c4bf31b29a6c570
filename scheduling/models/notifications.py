"""Notifications (issue 26 point 5): what each user wants to be told about their workloads and where, staff's
defaults per project for members who chose nothing, and one row per (workload, recipient, attempt, transition,
channel), written in the transaction that records the transition and sent afterwards (`scheduling.run.notify`).
The row is the outbox: its unique constraint makes a transition notified once, its claim makes one sender at a
time try it, and `sent_at` says it went."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q

from pools.models import Project

from .workloads import Workload


class Transition(models.TextChoices):
    STARTED = "started"
    COMPLETED = "completed"
    FAILED = "failed"
    PREEMPTED = "preempted"
    PENDING = "pending", "stuck pending"
    IDLE = "idle", "about to be stopped by an idle rule"


class Channel(models.TextChoices):
    WEBHOOK = "webhook"
    EMAIL = "email"


class NotificationPreference(models.Model):
    """A user's own choice (`user`), or staff's default for a project's members who made none (`project`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="notification_preference")
    project = models.OneToOneField(Project, null=True, blank=True, on_delete=models.CASCADE,
                                   related_name="notification_default")
    transitions = models.JSONField(default=list, blank=True, help_text="Transition values to be told about.")
    pending_minutes = models.PositiveIntegerField(default=60, help_text="'Stuck pending' after this long.")
    webhook_url = models.CharField(max_length=2000, blank=True)
    email = models.BooleanField(default=False, help_text="Also mail the user's address.")
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True)

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(user__isnull=True) ^ Q(project__isnull=True),
                                              name="notification_preference_user_xor_project")]

    def __str__(self) -> str:
        return f"notifications of {self.user_id or 'project ' + str(self.project_id)}"


class Notification(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workload = models.ForeignKey(Workload, on_delete=models.CASCADE, related_name="notifications")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    attempt = models.PositiveIntegerField()
    transition = models.CharField(max_length=16, choices=Transition.choices)
    channel = models.CharField(max_length=8, choices=Channel.choices)
    target = models.CharField(max_length=2000, help_text="The webhook URL or mail address, as chosen then.")
    subject = models.CharField(max_length=300)
    text = models.TextField()
    payload = models.JSONField(default=dict, help_text="The structured fields sent beside the text.")
    created_at = models.DateTimeField()
    due_at = models.DateTimeField(help_text="When the sweep may (re)send it.")
    # A sender's claim: set (committed) before it sends, so a second sender skips the row until the claim is
    # older than OSMO_NOTIFY_CLAIM_SECONDS (its sender died: the sweep takes it over).
    claimed_at = models.DateTimeField(null=True, blank=True)
    claim = models.UUIDField(null=True, blank=True)
    tries = models.PositiveIntegerField(default=0)
    sent_at = models.DateTimeField(null=True, blank=True)
    gave_up_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [models.UniqueConstraint(fields=["workload", "user", "attempt", "transition", "channel"],
                                               name="notification_once_per_transition")]
        indexes = [models.Index(fields=["due_at"], condition=Q(sent_at__isnull=True, gave_up_at__isnull=True),
                                name="notification_unsent")]

    def __str__(self) -> str:
        return f"{self.transition} of {self.workload_id} by {self.channel}"
