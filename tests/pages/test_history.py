"""`/config/history/`: the list, side-by-side diffs, and rollback (staff, confirmed, POST with CSRF)."""

import re

import pytest
from django.test import Client

from pools.config import writes
from pools.models import ConfigKind, ConfigRevision, Pool
from tests.pages.conftest import body
from tests.support.fleet import ALPHA, pool_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_revisions(fleet):
    first = ConfigRevision.objects.get(kind=ConfigKind.POOL, name=ALPHA)
    writes.import_document(ConfigKind.POOL, {"pools": {ALPHA: pool_document(description="Changed <i>later</i>")}},
                            author="tests")
    second = ConfigRevision.objects.filter(kind=ConfigKind.POOL, name=ALPHA).order_by("-number").first()
    return first, second


def test_the_history_lists_revisions_newest_first_with_diff_links(staff_client, two_revisions):
    first, second = two_revisions

    text = body(staff_client.get("/config/history/?type=pool"))

    keys = re.findall(r'<tr data-key="([^"]+)"', text)
    assert keys[0] == f"POOL-{second.number}"
    assert f"POOL-{first.number}" in keys
    assert all(key.startswith("POOL-") for key in keys)
    assert f'href="/config/history/diff/?type=pool&amp;revision={second.number}">Diff</a>' in text
    assert f'href="/config/history/rollback/?type=pool&amp;revision={first.number}">Restore this version…</a>' in text
    undo = f"/config/history/rollback/?type=pool&amp;revision={first.number}&amp;before=1"
    assert f'href="{undo}">Undo this change…</a>' in text


def test_members_get_no_rollback_links(member_client, two_revisions):
    text = body(member_client.get("/config/history/"))
    assert "Undo this change" not in text and "Restore this version" not in text


def test_the_history_filters_by_name(staff_client, two_revisions):
    text = body(staff_client.get("/config/history/?name=default_"))

    names = set(re.findall(r'<td data-col="name">\s*([^<\s]+)', text))
    assert names and all(name.startswith("default_") for name in names)


def test_the_diff_shows_both_revisions_side_by_side(staff_client, two_revisions):
    first, second = two_revisions

    text = body(staff_client.get(f"/config/history/diff/?type=pool&revision={first.number}&other={second.number}"))

    assert f"r{first.number} → r{second.number}" in text
    assert '<tr class="diff-replace">' in text
    assert '&quot;description&quot;: &quot;Alpha &lt;b&gt;team&lt;/b&gt;&quot;,' in text
    assert '&quot;description&quot;: &quot;Changed &lt;i&gt;later&lt;/i&gt;&quot;,' in text
    assert "unchanged lines" in text  # context only, until asked for the whole documents
    assert "unchanged lines" not in body(staff_client.get(
        f"/config/history/diff/?type=pool&revision={first.number}&other={second.number}&full=1"))


def test_one_revision_is_compared_with_the_one_before_it(staff_client, two_revisions):
    first, second = two_revisions

    text = body(staff_client.get(f"/config/history/diff/?type=pool&revision={second.number}"))

    assert f"r{first.number} → r{second.number}" in text


def test_a_first_revision_is_compared_with_nothing(staff_client, two_revisions):
    first, _ = two_revisions

    text = body(staff_client.get(f"/config/history/diff/?type=pool&revision={first.number}"))

    assert f"nothing → r{first.number}" in text and "diff-replace" not in text


@pytest.mark.parametrize("query", ["type=pool&revision=999", "type=nope&revision=1", "type=pool&revision=x",
                                   "type=pool"])
def test_a_bad_diff_request_is_404(staff_client, fleet, query):
    assert staff_client.get(f"/config/history/diff/?{query}").status_code == 404


def test_rollback_asks_for_confirmation_first_and_changes_nothing_on_get(staff_client, two_revisions):
    first, _ = two_revisions
    before = ConfigRevision.objects.count()

    text = body(staff_client.get(f"/config/history/rollback/?type=pool&revision={first.number}"))

    assert ConfigRevision.objects.count() == before
    assert f"to revision {first.number}?" in text
    assert 'id="rollback-confirm" type="checkbox" name="confirm" value="yes" required' in text
    assert 'name="csrfmiddlewaretoken"' in text
    assert "Changed &lt;i&gt;later&lt;/i&gt;" in text  # what it undoes


def test_rollback_without_the_confirmation_changes_nothing(staff_client, two_revisions):
    first, _ = two_revisions
    before = ConfigRevision.objects.count()

    response = staff_client.post("/config/history/rollback/", {"type": "pool", "revision": first.number})

    assert response.status_code == 400
    assert "Tick the confirmation box" in body(response)
    assert ConfigRevision.objects.count() == before


def test_a_confirmed_rollback_restores_the_revision_as_a_new_one(staff_client, staff, two_revisions):
    first, second = two_revisions

    response = staff_client.post("/config/history/rollback/", {"type": "pool", "revision": first.number,
                                                               "confirm": "yes", "description": "undo"})

    assert response.status_code == 302
    assert response["Location"] == f"/config/history/?type=pool&name={ALPHA}"
    assert Pool.objects.get(name=ALPHA).description == "Alpha <b>team</b>"
    latest = ConfigRevision.objects.filter(kind=ConfigKind.POOL, name=ALPHA).order_by("-number").first()
    assert latest.number > second.number and latest.author == staff and latest.description == "undo"
    assert "revision" in body(staff_client.get(response["Location"]))  # the success message


def test_members_may_not_roll_back(member_client, two_revisions):
    first, _ = two_revisions
    before = ConfigRevision.objects.count()

    assert member_client.get(f"/config/history/rollback/?type=pool&revision={first.number}").status_code == 403
    response = member_client.post("/config/history/rollback/", {"type": "pool", "revision": first.number,
                                                                "confirm": "yes"})
    assert response.status_code == 403
    assert ConfigRevision.objects.count() == before


def test_rollback_needs_the_csrf_token(staff, two_revisions):
    first, _ = two_revisions
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)

    response = client.post("/config/history/rollback/", {"type": "pool", "revision": first.number, "confirm": "yes"})

    assert response.status_code == 403
    assert Pool.objects.get(name=ALPHA).description == "Changed <i>later</i>"


def test_a_refused_rollback_shows_why(staff_client, two_revisions):
    first, _ = two_revisions
    writes.import_document(ConfigKind.RESOURCE_VALIDATION, {"default_cpu": []}, author="tests")
    from pools.models import ResourceValidation

    # The revision names a validation that no longer exists, so the import refuses it whole (by hand: the doors
    # refuse to delete a validation a pool names).
    Pool.objects.filter(name=ALPHA).update(common_resource_validations=[])
    ResourceValidation.objects.filter(name="default_memory").delete()

    response = staff_client.post("/config/history/rollback/", {"type": "pool", "revision": first.number,
                                                               "confirm": "yes"})

    assert response.status_code == 400
    assert 'role="alert"' in body(response) and "default_memory" in body(response)
