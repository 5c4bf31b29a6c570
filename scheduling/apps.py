from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    """Workloads, admission and dispatch: the "what runs where" half (filled by the scheduling issues)."""

    name = "scheduling"
