"""The "Effective permissions" page: the same answer as GET /api/profile/, for people."""

from django.shortcuts import render

from pools.access.api import profile
from pools.access.scoping import access_required
from pools.models import AuditEvent
from pools.models.visibility import access_for

RECENT_ACTIONS = 10


@access_required()
def permissions(request):
    access = access_for(request)
    own = AuditEvent.objects.visible_to(access).filter(actor=access.user.get_username()).only(
        "at", "kind", "object", "action", "summary", "address", "token")[:RECENT_ACTIONS]
    return render(request, "access/permissions.html", {"profile": profile(request), "nav": "profile",
                                                       "actions": list(own)})
