"""Rolling back to before an object existed deletes it (on the page, in the API and the CLI), as a delete
revision; a rollback is recorded as `rollback`; the history list names each revision with its kind."""

import io

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from pools.config import writes
from pools.models import ConfigKind, ConfigRevision, Node, Pool
from tests.pages.conftest import body
from tests.support.fleet import ALPHA, make_nodes, pool_document

pytestmark = pytest.mark.django_db
NEW = "pasted-pool"


@pytest.fixture
def pasted(fleet):
    """A pool just created, unchanged since: rolling back to its creation revision writes nothing."""
    writes.import_document(ConfigKind.POOL, {"pools": {NEW: pool_document(description="Pasted by mistake")}},
                            author="tests")
    return ConfigRevision.objects.get(kind=ConfigKind.POOL, name=NEW)


def latest(name: str) -> ConfigRevision:
    return ConfigRevision.objects.filter(kind=ConfigKind.POOL, name=name).order_by("-number").first()


def test_a_refused_rollback_says_why_before_anyone_confirms(staff_client, fleet):
    created = ConfigRevision.objects.get(kind=ConfigKind.POOL, name="default", action="create")

    text = body(staff_client.get(f"/config/history/rollback/?type=pool&revision={created.number}&before=1"))

    assert 'id="rollback-error"' in text and "it is the default pool" in text
    assert Pool.objects.filter(name="default").exists()


def test_the_rollback_page_of_a_creation_offers_to_delete_the_object(staff_client, pasted):
    text = body(staff_client.get(f"/config/history/rollback/?type=pool&revision={pasted.number}"))

    assert "restoring it writes nothing" in text
    link = f"/config/history/rollback/?type=pool&amp;revision={pasted.number}&amp;before=1"
    assert f'<a id="rollback-other" href="{link}">Undo this change instead: {NEW} as it was before revision' in text


def test_rolling_back_to_before_a_creation_asks_then_deletes_it_as_a_delete_revision(staff_client, staff, pasted):
    asked = body(staff_client.get(f"/config/history/rollback/?type=pool&revision={pasted.number}&before=1"))

    assert f"Undo revision {pasted.number} of pool {NEW}?" in asked and f"undoing it deletes {NEW}" in asked
    assert f">Delete {NEW}</button>" in asked and 'name="before" value="1"' in asked
    assert "Pasted by mistake" in asked  # the document it removes, in the diff
    assert Pool.objects.filter(name=NEW).exists()

    done = staff_client.post("/config/history/rollback/", {"type": "pool", "revision": pasted.number, "before": "1",
                                                           "confirm": "yes"})

    assert done.status_code == 302
    assert not Pool.objects.filter(name=NEW).exists()
    deletion = latest(NEW)
    assert (deletion.action, deletion.author, deletion.description) == (
        "delete", staff, f"Rollback to before revision {pasted.number}")
    assert deletion.document["description"] == "Pasted by mistake"  # so it can be rolled back in turn


def test_a_rolled_back_deletion_can_be_undone_and_is_recorded_as_rollback(pasted):
    writes.rollback(ConfigKind.POOL, pasted.number, before=True, author="tests")
    deletion = latest(NEW)

    writes.rollback(ConfigKind.POOL, pasted.number, author="tests")

    assert Pool.objects.get(name=NEW).description == "Pasted by mistake"
    restored = latest(NEW)
    assert restored.number > deletion.number and restored.action == "rollback"
    assert "rollback" in dict(ConfigRevision.Action.choices)


def test_before_an_update_is_the_previous_revision(fleet):
    writes.import_document(ConfigKind.POOL, {"pools": {ALPHA: pool_document(description="second")}}, author="tests")
    second = latest(ALPHA)

    result = writes.rollback(ConfigKind.POOL, second.number, before=True, author="tests")

    assert result.updated == [ALPHA] and Pool.objects.get(name=ALPHA).description == "Alpha <b>team</b>"
    assert latest(ALPHA).action == "rollback"


def test_deleting_by_rollback_reports_the_nodes_it_moves_before_and_after(staff_client, pasted):
    make_nodes(3, [NEW], prefix="pasted")
    # No platform of any pool selects them (by hand: make_nodes' rows have no cluster for `label node` to write).
    Node.objects.filter(name__startswith="pasted").update(labels={})

    asked = body(staff_client.get(f"/config/history/rollback/?type=pool&revision={pasted.number}&before=1"))

    assert "Nodes: 3 nodes (24 GPUs) change pools." in asked
    assert f"<li>pool {NEW}: -3 nodes, -24 GPUs (3 -&gt; 0 nodes, 24 -&gt; 0 GPUs)</li>" in asked
    assert Pool.objects.filter(name=NEW).exists() and latest(NEW) == pasted  # the preview wrote nothing

    result = writes.rollback(ConfigKind.POOL, pasted.number, before=True, author="tests")

    assert result.deleted == [NEW]
    assert result.impact.nodes_moved == 3 and result.impact.lines()[0].startswith("pool default: +3 nodes")


def test_the_cli_points_at_before_and_deletes_with_it(pasted):
    out = io.StringIO()
    call_command("config", "--author", "tests", "rollback", "POOL", str(pasted.number), stdout=out)
    assert out.getvalue() == (f"POOL: unchanged {NEW}\nRevision {pasted.number} created it: to undo its creation "
                              f"(delete it), run `config rollback POOL {pasted.number} --before`.\n")

    out = io.StringIO()
    call_command("config", "--author", "tests", "rollback", "POOL", str(pasted.number), "--before", stdout=out)

    assert out.getvalue().startswith(f"POOL: deleted {NEW} (revision ")
    assert not Pool.objects.filter(name=NEW).exists()


def test_the_api_rolls_back_to_before_a_creation(pasted, staff):
    api = APIClient()
    api.force_authenticate(staff)

    answer = api.post("/api/configs/history/rollback/", {"type": "pool", "revision": pasted.number, "before": True},
                      format="json")

    assert answer.status_code == 200, answer.content
    assert answer.json()["deleted"] == [NEW] and answer.json()["impact"]["nodes_moved"] == 0
    assert not Pool.objects.filter(name=NEW).exists()
    refused = api.post("/api/configs/history/rollback/", {"type": "pool", "revision": pasted.number, "before": "yes"},
                       format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "before"


def test_the_history_names_each_revision_with_its_kind(staff_client, pasted):
    text = body(staff_client.get("/config/history/"))

    assert f'data-col="number">pool r{pasted.number}<' in text
    template = ConfigRevision.objects.filter(kind=ConfigKind.POD_TEMPLATE).first()
    assert f'data-col="number">pod template r{template.number}<' in text


def test_the_admin_action_rolls_back_to_before_a_creation(staff_client, pasted):
    response = staff_client.post("/admin/pools/configrevision/", {
        "action": "roll_back_before", "_selected_action": [pasted.pk], "index": 0})

    assert response.status_code == 302
    assert not Pool.objects.filter(name=NEW).exists() and latest(NEW).action == "delete"


def test_each_revision_offers_undo_and_restore_and_undo_returns_to_the_state_before_it(staff_client, pasted):
    """Undo this change: the state before the revision (here, the description before the edit), never "already
    matches" on the newest revision; Restore this version: the state it made."""
    document = writes.export(ConfigKind.POOL, NEW)["pools"][NEW]
    writes.import_document(ConfigKind.POOL, {"pools": {NEW: {**document, "description": "Edited"}}}, author="tests")
    edit = latest(NEW)
    listing = body(staff_client.get(f"/config/history/?type=pool&name={NEW}"))
    undo = f"/config/history/rollback/?type=pool&amp;revision={edit.number}&amp;before=1"
    assert f'href="{undo}">Undo this change…</a>' in listing
    assert f'href="/config/history/rollback/?type=pool&amp;revision={edit.number}">Restore this version…</a>' in listing

    asked = body(staff_client.get(undo.replace("&amp;", "&")))
    assert f"returns to the state before revision {edit.number}, as it was at revision {pasted.number}" in asked
    assert ">Undo this change</button>" in asked and "Edited" in asked and "already matches" not in asked
    restore = body(staff_client.get(f"/config/history/rollback/?type=pool&revision={edit.number}"))
    assert "already matches revision" in restore and ">Restore this version</button>" in restore

    staff_client.post("/config/history/rollback/", {"type": "pool", "revision": edit.number, "before": "1",
                                                    "confirm": "yes"})
    assert Pool.objects.get(name=NEW).description == "Pasted by mistake"
