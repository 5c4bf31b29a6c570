"""The node page's links to workloads (`pools.pages.hooks.workload_links`): pools knows a pod's workload
only by its Job's label, so it asks here which of them the viewer may open."""

import uuid

from django.urls import reverse

from scheduling.models import Workload


def visible_workload_links(sender, request, ids, **kwargs) -> dict[str, str]:
    keys = []
    for value in ids:
        try:
            keys.append(uuid.UUID(str(value)))
        except ValueError:  # a label someone else wrote: no workload of ours
            continue
    visible = Workload.objects.visible_to(request).filter(pk__in=keys).values_list("pk", flat=True)
    return {str(pk): reverse("workloads:detail", args=[pk]) for pk in visible}
