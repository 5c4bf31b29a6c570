"""Sign-in and scoping: every page, fragment and download takes its rows from visible_to."""

import csv
import io

import pytest
from django.urls import reverse

from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db

PAGES = ["/", "/nodes/", f"/pools/{ALPHA}/", "/config/history/", "/config/history/diff/?type=pool&revision=1",
         "/config/history/rollback/?type=pool&revision=1"]


@pytest.mark.parametrize("url", PAGES)
def test_it_sends_anonymous_visitors_to_the_login_page(client, fleet, url):
    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


@pytest.mark.parametrize("url", ["/", "/nodes/", "/config/history/"])
def test_it_answers_an_anonymous_htmx_refresh_with_401_and_a_redirect_header(client, fleet, url):
    response = fragment(client, url)

    assert response.status_code == 401
    assert response["HX-Redirect"].startswith(reverse("login"))


@pytest.mark.parametrize("url", ["/?export=csv", "/nodes/?export=csv", "/config/history/?export=csv"])
def test_it_refuses_downloads_to_anonymous_visitors(client, fleet, url):
    assert client.get(url).status_code == 302


def test_it_refuses_the_column_chooser_to_anonymous_visitors(client, fleet):
    response = client.post("/tables/nodes/columns/", {"columns": ["node"]})

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.fixture
def mixed_fleet(fleet):
    make_nodes(3, [ALPHA], prefix="alpha-node")
    make_nodes(3, [BRAVO], prefix="bravo-node")
    make_nodes(1, [ALPHA, BRAVO], prefix="shared-node")


def _leaks(text: str) -> list[str]:
    return [word for word in (BRAVO, "bravo-node", "Secret") if word in text]


@pytest.mark.parametrize("url", ["/", "/nodes/", f"/pools/{ALPHA}/", "/config/history/", "/nodes/?q=bravo",
                                 "/nodes/?sort=-gpu_free&cols=node,pools,platforms,labels"])
def test_a_member_of_pool_a_never_sees_pool_b_on_a_page(member_client, mixed_fleet, url):
    response = member_client.get(url)

    assert response.status_code == 200
    assert not _leaks(body(response))


@pytest.mark.parametrize("url", ["/", "/nodes/", "/config/history/"])
def test_a_member_of_pool_a_never_sees_pool_b_in_a_fragment(member_client, mixed_fleet, url):
    response = fragment(member_client, url)

    assert response.status_code == 200
    assert not _leaks(body(response))


@pytest.mark.parametrize("url", ["/?export=csv", "/nodes/?export=csv&cols=node,pools,platforms,labels",
                                 "/config/history/?export=csv", f"/pools/{ALPHA}/?export=csv"])
def test_a_member_of_pool_a_never_sees_pool_b_in_a_download(member_client, mixed_fleet, url):
    response = member_client.get(url)

    assert response.status_code == 200
    assert not _leaks(body(response))


def test_a_member_sees_the_nodes_of_their_pool_and_a_shared_node_without_its_other_pool(member_client, mixed_fleet):
    rows = list(csv.DictReader(io.StringIO(body(member_client.get("/nodes/?export=csv&cols=node,pools")))))

    assert [row["Node"] for row in rows] == ["alpha-node-0000", "alpha-node-0001", "alpha-node-0002",
                                             "shared-node-0000"]
    assert {row["Pools"] for row in rows} == {ALPHA}


def test_a_member_cannot_open_or_filter_by_a_pool_they_may_not_use(member_client, mixed_fleet):
    assert member_client.get(f"/pools/{BRAVO}/").status_code == 404
    response = member_client.get(f"/nodes/?pool={BRAVO}")
    assert "shared-node" not in body(response)
    assert "Select a valid choice" in body(response)
    assert "Select a valid choice" not in body(member_client.get(f"/nodes/?pool={ALPHA}"))


def test_staff_see_every_pool_and_node(staff_client, mixed_fleet):
    text = body(staff_client.get("/nodes/?cols=node,pools"))

    assert "bravo-node-0000" in text and BRAVO in text
    assert staff_client.get(f"/pools/{BRAVO}/").status_code == 200


def test_a_member_sees_only_the_revisions_of_their_pools(member_client, mixed_fleet):
    text = body(member_client.get("/config/history/"))

    assert ALPHA in text
    assert "default_ctrl" not in text  # pod templates are for admins, as in the API
    assert "osmo-alpha" not in text  # and so are roles


def test_a_member_cannot_open_the_diff_of_a_revision_outside_their_pools(member_client, mixed_fleet):
    from pools.models import ConfigRevision

    bravo = ConfigRevision.objects.get(kind="POOL", name=BRAVO)
    alpha = ConfigRevision.objects.get(kind="POOL", name=ALPHA)

    assert member_client.get(f"/config/history/diff/?type=pool&revision={bravo.number}").status_code == 404
    assert member_client.get("/config/history/diff/?type=pod_template&revision=1").status_code == 404
    assert member_client.get(f"/config/history/diff/?type=pool&revision={alpha.number}").status_code == 200
    assert member_client.get(
        f"/config/history/diff/?type=pool&revision={alpha.number}&other={bravo.number}").status_code == 404
