"""The permission class and the page helpers, on small views declared the way new views declare them."""

import pytest
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.test import RequestFactory
from django.views import View
from rest_framework.response import Response
from rest_framework.test import APIRequestFactory, force_authenticate
from rest_framework.views import APIView

from pools.access.scoping import AccessRequiredMixin, Rule, access_required
from pools.models import ConfigKind
from tests.access.conftest import POOLS, PRINCIPALS, VISIBLE, give

pytestmark = pytest.mark.django_db


class SubmitView(APIView):
    """Like the future POST /api/pool/<pool>/workflow: readable by the signed-in, usable per pool."""

    read_access = Rule.SIGNED_IN
    write_access = Rule.POOL

    def get(self, request, pool):
        return Response({"ok": True})

    def post(self, request, pool):
        return Response({"ok": True})


class UndeclaredView(APIView):
    def get(self, request):
        return Response({"ok": True})


def call(view, user, method="post", path="/api/pool/x/workflow", **kwargs):
    request = getattr(APIRequestFactory(), method)(path)
    if user is not None:
        force_authenticate(request, user=user)
    return view.as_view()(request, **kwargs)


@pytest.mark.parametrize("principal", PRINCIPALS)
@pytest.mark.parametrize("pool", POOLS)
def test_a_pool_write_goes_through_exactly_for_those_who_may_use_the_pool(request, shared_node_pools, principal, pool):
    user = request.getfixturevalue(principal)

    response = call(SubmitView, user, path=f"/api/pool/{pool}/workflow", pool=pool)

    expected = 401 if user is None else 200 if pool in VISIBLE[principal] else 403
    assert response.status_code == expected


def test_a_refused_pool_write_says_which_pool(shared_node_pools, nobody):
    response = call(SubmitView, nobody, path="/api/pool/sim-a/workflow", pool="sim-a")

    assert "sim-a" in str(response.data["detail"])


@pytest.mark.parametrize("principal", ["nobody", "teammate", "policy_user"])
def test_a_view_that_declares_nothing_is_closed_to_all_but_staff(request, shared_node_pools, staff, principal):
    assert call(UndeclaredView, request.getfixturevalue(principal), "get", "/api/new/").status_code == 403
    assert call(UndeclaredView, staff, "get", "/api/new/").status_code == 200


def test_an_admin_role_is_a_role_whose_policies_allow_the_request(shared_node_pools, nobody):
    from pools.config import writes

    writes.import_document(ConfigKind.ROLE, {"name": "config-readers", "actions": [
        {"base": "http", "path": "/api/new/*", "method": "GET"}]})
    give(nobody, "config-readers")

    assert call(UndeclaredView, nobody, "get", "/api/new/").status_code == 200
    assert call(UndeclaredView, nobody, "get", "/api/other/").status_code == 403


def test_a_role_whose_policies_allow_config_writes_may_write_configuration(shared_node_pools, nobody, client):
    from pools.config import writes

    writes.import_document(ConfigKind.ROLE, {"name": "config-admins", "actions": [
        {"base": "http", "path": "/api/configs/*", "method": "*"},
        {"base": "http", "path": "!/api/configs/role/*", "method": "*"}]})
    give(nobody, "config-admins")
    client.force_login(nobody)

    template = client.put("/api/configs/pod_template/t1/", {"spec": {}}, content_type="application/json")
    role = client.put("/api/configs/role/r1/", {"name": "r1"}, content_type="application/json")

    assert template.status_code == 200
    assert role.status_code == 403  # the deny in the same role wins


# ---- pages ------------------------------------------------------------------------------------------

@access_required(read=Rule.SIGNED_IN, write=Rule.POOL)
def pool_page(request, pool):
    return HttpResponse(f"pool {pool}")


class PoolPage(AccessRequiredMixin, View):
    write_access = Rule.POOL

    def get(self, request, pool):
        return HttpResponse("read")

    def post(self, request, pool):
        return HttpResponse("written")


def page_request(user, method="get", pool="team-gpu-pool"):
    from django.contrib.auth.models import AnonymousUser

    http_request = getattr(RequestFactory(), method)(f"/pools/{pool}/")
    http_request.user = user or AnonymousUser()
    return http_request


@pytest.mark.parametrize("page", [pool_page, PoolPage.as_view()])
def test_pages_use_the_same_rules(shared_node_pools, teammate, nobody, page):
    assert page(page_request(teammate, "post"), pool="team-gpu-pool").status_code == 200
    assert page(page_request(nobody, "get"), pool="team-gpu-pool").status_code == 200
    with pytest.raises(PermissionDenied):
        page(page_request(nobody, "post"), pool="team-gpu-pool")
    assert page(page_request(None), pool="team-gpu-pool").status_code == 302


def test_a_signed_out_fragment_request_is_told_401_and_where_to_sign_in(client):
    """htmx swaps a fragment's answer into the page: a signed-out one gets 401 with HX-Redirect to the login page,
    never the login page inside the region (the mutation run's survivor: any other status passed)."""
    answer = client.get("/workloads/?sort=-gpu", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="workloads-table")
    assert answer.status_code == 401
    assert answer["HX-Redirect"].startswith("/accounts/login/?next=/workloads/")
