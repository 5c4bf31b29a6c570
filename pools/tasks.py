from celery import shared_task
from django.utils import timezone

from .models import Backend


@shared_task(time_limit=30, soft_time_limit=25)
def heartbeat_simulated_backends() -> int:
    """The simulated demo cluster is always reachable; keep its pools ONLINE."""
    return Backend.objects.filter(kind=Backend.Kind.SIMULATED).update(last_heartbeat=timezone.now())
