"""The "Effective permissions" page: the same answer as GET /api/profile/, for people."""

from django.shortcuts import render

from pools.access.api import profile
from pools.access.scoping import access_required


@access_required()
def permissions(request):
    return render(request, "access/permissions.html", {"profile": profile(request), "nav": "profile"})
