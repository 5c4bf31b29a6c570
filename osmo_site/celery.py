import os

from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_init, worker_process_init

from .logs import request_id

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo_site.settings")

app = Celery("osmo_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@task_prerun.connect
def _task_id_on_log_lines(task_id=None, task=None, **_):
    from pools.models.audit import acting_task

    task.request.osmo_log_token = request_id.set(f"task:{task_id}")
    task.request.osmo_audit_token = acting_task.set(f"task:{task_id}")  # the audit rows the task writes


@task_postrun.connect
def _task_log_lines_done(task=None, **_):
    from pools.models.audit import acting_task

    token = getattr(task.request, "osmo_log_token", None)
    if token is not None:
        request_id.reset(token)
    token = getattr(task.request, "osmo_audit_token", None)
    if token is not None:
        acting_task.reset(token)


@worker_process_init.connect
def _own_connection_pools(**_):
    """A forked worker child must not use the parent's database connection pool (its sockets and its
    threads are the parent's): forget it, and the child opens a pool of its own on first use."""
    from django.db import connections

    for alias in connections.settings:
        wrapper = connections[alias]
        pools = getattr(type(wrapper), "_connection_pools", None)
        if pools is not None:
            pools.pop(wrapper.alias, None)


@worker_init.connect
def _load_the_cluster_client(**_):
    """The worker's main process loads the Kubernetes client (`pools.cluster.kube`: the kubernetes package, about a
    second of CPU on a loaded machine) before it forks its pool, so each child has it from its start: a child's
    first dispatch, stop or sync no longer waits for the import, nor does the first after a child is replaced."""
    import pools.cluster.kube  # noqa: F401
