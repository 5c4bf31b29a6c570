"""The column chooser: saved per user, in the order chosen, used by the table, its fragment and its CSV."""

import re

import pytest

from pools.models import TablePreference
from pools.pages.tables import NODES
from tests.pages.conftest import body, fragment
from tests.support.fleet import ALPHA, make_nodes

pytestmark = pytest.mark.django_db


def headers(text: str) -> list[str]:
    return re.findall(r'<th scope="col" data-col="([^"]+)"', text)


def test_it_remembers_the_chosen_columns_for_the_user(staff_client, staff, fleet):
    make_nodes(1, [ALPHA])

    response = staff_client.post("/tables/nodes/columns/", {"columns": ["node", "labels", "gpu_free"],
                                                            "next": f"/nodes/?pool={ALPHA}&cols=node"})

    assert response.status_code == 302
    assert response["Location"] == f"/nodes/?pool={ALPHA}"  # cols= would hide the saved choice
    assert TablePreference.objects.get(user=staff, table="nodes").columns == ["node", "labels", "gpu_free"]
    assert headers(body(staff_client.get("/nodes/"))) == ["node", "labels", "gpu_free"]
    assert headers(body(fragment(staff_client, "/nodes/"))) == ["node", "labels", "gpu_free"]
    assert body(staff_client.get("/nodes/?export=csv")).splitlines()[0] == "Node,Labels,GPU free"


def test_one_users_columns_do_not_change_anothers(client, staff, alpha_member, fleet):
    make_nodes(1, [ALPHA])
    client.force_login(staff)
    client.post("/tables/nodes/columns/", {"columns": ["node", "gpu_free"]})

    client.force_login(alpha_member)
    member_headers = headers(body(client.get("/nodes/")))

    assert len(member_headers) == 16 and member_headers[:2] == ["node", "status"]
    client.force_login(staff)
    assert headers(body(client.get("/nodes/"))) == ["node", "gpu_free"]


def test_the_chooser_lists_shown_columns_first_in_their_order(staff_client, fleet):
    staff_client.post("/tables/nodes/columns/", {"columns": ["gpu_free", "node"]})

    text = body(staff_client.get("/nodes/"))

    boxes = re.findall(r'id="col-nodes-([a-z_]+)" name="columns" value="[a-z_]+"( checked)?', text)
    assert boxes[:3] == [("gpu_free", " checked"), ("node", " checked"), ("status", "")]
    assert len(boxes) == 22


def test_reset_restores_the_default_columns(staff_client, staff, fleet):
    make_nodes(1, [ALPHA])
    staff_client.post("/tables/nodes/columns/", {"columns": ["node"]})

    staff_client.post("/tables/nodes/columns/", {"reset": "1", "columns": ["node"]})

    assert not TablePreference.objects.filter(user=staff).exists()
    assert len(headers(body(staff_client.get("/nodes/")))) == 16


def test_choosing_no_known_column_means_the_defaults(staff_client, staff, fleet):
    staff_client.post("/tables/pools/columns/", {"columns": ["nope"]})

    assert TablePreference.objects.get(user=staff, table="pools").columns[:3] == ["name", "description", "status"]


def test_it_redirects_only_to_this_site(staff_client, fleet):
    response = staff_client.post("/tables/nodes/columns/", {"columns": ["node"], "next": "https://evil.example/"})

    assert response["Location"] == "/nodes/"


def test_an_unknown_table_is_404_and_get_is_not_allowed(staff_client, fleet):
    assert staff_client.post("/tables/nope/columns/", {"columns": ["node"]}).status_code == 404
    assert staff_client.get("/tables/nodes/columns/").status_code == 405


def test_the_chooser_needs_the_csrf_token(client, staff, fleet):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(staff)

    assert csrf_client.post("/tables/nodes/columns/", {"columns": ["node"]}).status_code == 403


def test_the_pools_table_has_its_own_choice(staff_client, fleet):
    staff_client.post("/tables/pools/columns/", {"columns": ["name", "platforms", "gpu_free"]})

    text = body(staff_client.get("/"))

    assert headers(text) == ["name", "platforms", "gpu_free"]
    assert "h100" in text


def test_a_move_button_moves_one_column_and_saves_the_ticked_ones_in_that_order(staff_client, staff, fleet):
    make_nodes(1, [ALPHA])
    order = ["node", "status", "gpu_free", "pools", "labels"]
    form = {"columns": ["node", "status", "gpu_free", "labels"], "order": order, "next": "/nodes/"}

    response = staff_client.post("/tables/nodes/columns/", {**form, "move": "gpu_free:up"})

    assert response.status_code == 302 and response["Location"] == "/nodes/"
    assert TablePreference.objects.get(user=staff, table="nodes").columns == ["node", "gpu_free", "status", "labels"]
    text = body(staff_client.get("/nodes/"))
    assert headers(text) == ["node", "gpu_free", "status", "labels"]
    assert "GPU free moved up; showing 4 columns." in text
    assert re.search(r'<details class="column-chooser dropdown-panel" id="nodes-columns" open>', text)  # for the next
    assert body(staff_client.get("/nodes/?export=csv")).splitlines()[0] == "Node,GPU free,Status,Labels"
    assert not re.search(r'id="nodes-columns" open', body(staff_client.get("/nodes/")))  # once only

    staff_client.post("/tables/nodes/columns/", {**form, "move": "labels:down"})  # the last stays last
    assert TablePreference.objects.get(user=staff, table="nodes").columns == ["node", "status", "gpu_free", "labels"]
    staff_client.post("/tables/nodes/columns/", {**form, "move": "node:down"})
    assert TablePreference.objects.get(user=staff, table="nodes").columns == ["status", "node", "gpu_free", "labels"]


@pytest.mark.parametrize("move", ["gpu_free:left", "nonsense:up", "sharing:up", ""])
def test_a_move_that_names_no_column_of_the_form_is_refused_naming_the_field(staff_client, staff, fleet, move):
    form = {"columns": ["node", "gpu_free"], "order": ["node", "gpu_free"], "move": move or "gpu_free"}

    response = staff_client.post("/tables/nodes/columns/", form)

    assert response.status_code == 400 and response.json()["field"] == "move"
    assert not TablePreference.objects.filter(user=staff).exists()


def test_the_chooser_offers_to_move_each_column_but_not_past_either_end(staff_client, fleet):
    text = body(staff_client.get("/nodes/"))

    moves = re.findall(r'name="move" value="([a-z_]+:(?:up|down))"[^>]*?( disabled)?>', text)
    assert len(moves) == 2 * len(NODES.columns)
    assert moves[0] == ("node:up", " disabled") and moves[1] == ("node:down", "")
    last = NODES.columns[-1].key
    assert moves[-1] == (f"{last}:down", " disabled") and moves[-2] == (f"{last}:up", "")
