"""Celery tasks: beat runs `admission_cycle` every OSMO_ADMISSION_INTERVAL seconds, and every submit,
cancel and finish asks for one on commit. Cycles never overlap: each holds the admission lock row."""

from celery import shared_task

from .cycle import run_cycle


@shared_task(time_limit=120, soft_time_limit=100, ignore_result=True)
def admission_cycle() -> dict:
    return run_cycle().summary()
