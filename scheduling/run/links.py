"""Where a notebook or inference is opened (issue 43, docs/admin/links.md): the Ingress address its pool's or
backend's link template makes, else the `kubectl port-forward` line to its Service. Only its submitter and staff
are shown either (`link_for`)."""

import json
from functools import lru_cache

from django.conf import settings

from pools.models.visibility import Access
from scheduling.models import Workload
from scheduling.run.workload_objects import port_of, workload_values
from scheduling.specs import deployments, ingress


@lru_cache(maxsize=4)
def _parsed(text: str) -> dict[str, ingress.LinkTemplate]:
    return ingress.parse_templates(json.loads(text))


def templates() -> dict[str, ingress.LinkTemplate]:
    """OSMO_LINK_TEMPLATES, checked (a ConfigError names the key at fault)."""
    return _parsed(json.dumps(settings.OSMO_LINK_TEMPLATES, sort_keys=True))


def template_for(workload: Workload) -> ingress.LinkTemplate | None:
    if workload.pool is None:
        return None
    return ingress.for_workload(templates(), workload.pool.name, workload.pool.backend.name)


def may_see(access: Access, workload: Workload) -> bool:
    """Its submitter and staff: a teammate sees the workload, never its address."""
    return access.is_staff or (access.signed_in and workload.submitter_id is not None
                               and workload.submitter_id == access.user.pk)


def link_for(access: Access, workload: Workload) -> dict | None:
    """{"url" (the Ingress's, or ""), "port_forward" (kubectl's line)} of a dispatched notebook or inference, for
    a viewer (`access`) who may see it; None when it has no port, is not dispatched, or the viewer may not."""
    port = port_of(workload)
    if port is None or not workload.job_name or not workload.alive or not may_see(access, workload):
        return None
    found = {"url": "", "port_forward": deployments.port_forward_line(workload.namespace, workload.job_name, port)}
    template = template_for(workload)
    if template is not None:
        values = workload_values(workload)
        if not ingress.host_problem(ingress.link_host(template, values)):
            found["url"] = ingress.link_url(template, values)
    return found
