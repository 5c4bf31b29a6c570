"""Celery tasks: beat runs `admission_cycle` every OSMO_ADMISSION_INTERVAL seconds, and every submit,
cancel and finish asks for one on commit. Cycles never overlap: each holds the admission lock row."""

from celery import shared_task

from .cycle import run_cycle


@shared_task(time_limit=120, soft_time_limit=100, ignore_result=True)
def admission_cycle() -> dict:
    return run_cycle().summary()


@shared_task(time_limit=60, soft_time_limit=50, ignore_result=True)
def demo_trickle() -> dict:
    """The demo's submissions and its stand-in for dispatch (scheduling.demo); beat runs it only when
    OSMO_DEMO_TRICKLE is above 0, as `make demo` sets it."""
    from .demo import trickle

    return trickle().summary()
