"""The audit log: one row per action with its actor and address, none for a refused or rolled-back write; rows
that cannot be changed through the ORM or the admin; a hash chain whose raw-SQL edit `audit verify` names;
retention; and the page, API and CLI, scoped to what each reader may see."""

import base64
import datetime as dt
import threading

import pytest
from django.core.management.base import CommandError
from django.db import connection, transaction
from django.utils import timezone
from rest_framework.test import APIClient

from pools.access import assignments, tokens
from pools.config import writes
from pools.models import AuditEvent, ConfigKind, Role
from pools.models.audit import AppendOnly, chain_hash, prune, record, verify
from tests.support.commands import run
from tests.support.journey import config

pytestmark = pytest.mark.django_db

FUTURE = (timezone.now() + dt.timedelta(days=3)).isoformat()


def rows(**filters) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(**filters).order_by("id"))


def one(**filters) -> AuditEvent:
    found = rows(**filters)
    assert len(found) == 1, [(e.kind, e.object, e.action, e.actor) for e in AuditEvent.objects.order_by("id")]
    return found[0]


@pytest.fixture
def session_api(staff):
    """Staff signed in by session (not force-authenticated, as `api` is), from 10.1.2.3: the address the audit rows
    record."""
    client = APIClient(REMOTE_ADDR="10.1.2.3")
    client.force_login(staff)
    return client


def test_a_configuration_write_and_its_rollback_leave_a_row_each_with_actor_and_address(defaults, session_api):
    before = AuditEvent.objects.count()
    document = {"pools": {"p9": {"backend": "default", "platforms": {"x": {}}, "description": "first"}}}
    assert session_api.put("/api/configs/pool/", document, format="json").status_code == 200

    created = one(kind="config", object="POOL/p9", action="create")
    assert (created.actor, created.actor_kind, created.address) == ("ops", "user", "10.1.2.3")
    assert created.request_id and created.summary.startswith("revision ")
    number = int(created.summary.split()[1].rstrip(":"))

    document["pools"]["p9"]["description"] = "second"
    assert session_api.put("/api/configs/pool/", document, format="json").status_code == 200
    answer = session_api.post("/api/configs/history/rollback/", {"type": "pool", "revision": number}, format="json")
    assert answer.status_code == 200, answer.content
    assert one(kind="config", object="POOL/p9", action="update").actor == "ops"
    assert one(kind="config", object="POOL/p9", action="rollback").address == "10.1.2.3"
    assert AuditEvent.objects.count() == before + 3


def test_a_refused_or_rolled_back_write_leaves_no_row(defaults, session_api):
    before = AuditEvent.objects.count()
    refused = session_api.put("/api/configs/pool/", {"pools": {"p9": {"backend": "default", "platforms": 7}}},
                            format="json")
    assert refused.status_code == 400
    dry = session_api.put("/api/configs/pool/?dry_run=1", {"pools": {"p8": {"backend": "default"}}}, format="json")
    assert dry.status_code == 200
    with pytest.raises(RuntimeError), transaction.atomic():
        writes.import_document(ConfigKind.POOL, {"pools": {"p7": {"backend": "default"}}}, author="tests")
        raise RuntimeError("the caller's transaction fails after the write")
    assert AuditEvent.objects.count() == before


def test_role_grants_and_revokes_by_the_api_and_the_cli_leave_a_row_each(defaults, session_api, django_user_model):
    user = django_user_model.objects.create_user("grace")
    config("ROLE", {"name": "osmo-ml"})
    assert session_api.post("/api/auth/user/grace/roles", {"role_name": "osmo-ml"}, format="json").status_code in (
        200, 201)
    granted = one(kind="role", action="grant")
    assert (granted.object, granted.actor, granted.address) == ("role/osmo-ml", "ops", "10.1.2.3")
    assert "grace holds osmo-ml" in granted.summary
    assert session_api.delete("/api/auth/user/grace/roles/osmo-ml").status_code in (200, 204)
    assert one(kind="role", action="revoke").summary == "grace no longer holds osmo-ml"

    run("user", "add-role", "grace", "osmo-ml")
    by_cli = rows(kind="role", action="grant")[-1]
    assert by_cli.actor_kind == "system" and by_cli.actor == "manage.py user" and by_cli.address is None
    assert assignments.remove(user, [Role.objects.get(name="osmo-ml")]) == []
    assert len(rows(kind="role", action="revoke")) == 2


def test_tokens_created_and_revoked_leave_a_row_each_and_a_token_is_named_as_the_actor(member):
    client = APIClient(REMOTE_ADDR="192.0.2.7")
    client.force_login(member)
    assert client.post("/api/auth/access_token/laptop", {"expires_at": FUTURE}, format="json").status_code == 201
    created = one(kind="token", action="create")
    assert (created.object, created.actor, created.address) == ("token/researcher/laptop", "researcher", "192.0.2.7")

    _, secret = tokens.create_token(member, "ci", timezone.now() + dt.timedelta(days=1))
    with_token = APIClient(REMOTE_ADDR="192.0.2.8", HTTP_AUTHORIZATION=f"Bearer {secret}")
    assert with_token.delete("/api/auth/access_token/laptop").status_code == 204
    revoked = one(kind="token", action="revoke")
    assert (revoked.actor, revoked.token, revoked.actor_kind, revoked.address) == ("researcher", "ci", "token",
                                                                                   "192.0.2.8")


def test_sign_ins_succeed_fail_and_lock_out_each_with_a_row(client, member, settings):
    settings.OSMO_LOGIN_MAX_FAILURES = 2
    assert client.post("/accounts/login/", {"username": "researcher", "password": "pw-res-123"}).status_code == 302
    success = one(kind="signin", action="success")
    assert (success.actor, success.object, success.address) == ("researcher", "user/researcher", "127.0.0.1")
    assert success.summary == "signed in by password"
    client.post("/accounts/logout/")
    for _ in range(2):
        client.post("/accounts/login/", {"username": "researcher", "password": "wrong"})
    failures = rows(kind="signin", action="failure")
    assert len(failures) == 2 and all(f.actor_kind == "anonymous" and f.object == "user/researcher"
                                      for f in failures)
    for _ in range(3):  # refused while locked out: one lockout row, however many tries
        assert client.post("/accounts/login/", {"username": "researcher", "password": "pw-res-123"}).status_code == 429
    assert "Too many failed sign-ins" in one(kind="signin", action="lockout").summary


def test_a_failed_sign_in_names_the_user_as_the_sign_in_limit_counts_it_its_first_150_characters(db):
    """HTTP Basic passes any length of user name to authenticate(); the row names what a user name can be (150
    characters, Django's and the sign-in limit's), not more and not less."""
    name = "n" * 149 + "xyz"
    basic = base64.b64encode(f"{name}:wrong".encode()).decode()
    assert APIClient(HTTP_AUTHORIZATION=f"Basic {basic}").get("/api/profile/").status_code == 401
    assert one(kind="signin", action="failure").object == f"user/{name[:150]}"


def test_rows_cannot_be_changed_or_deleted_through_the_orm_or_the_admin(client, staff):
    event = record("config", "POOL/x", "update", "a")
    event.summary = "b"  # by hand, the writes below: they are what is refused (no door changes a row)
    with pytest.raises(AppendOnly):
        event.save()
    with pytest.raises(AppendOnly):
        event.delete()
    with pytest.raises(AppendOnly):
        AuditEvent.objects.filter(pk=event.pk).update(summary="b")
    with pytest.raises(AppendOnly):
        AuditEvent.objects.all().delete()
    client.force_login(staff)
    assert client.get(f"/admin/pools/auditevent/{event.pk}/change/").status_code == 200  # a read-only view
    assert client.post(f"/admin/pools/auditevent/{event.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/pools/auditevent/add/").status_code == 403
    assert AuditEvent.objects.get(pk=event.pk).summary == "a"


def test_verify_names_the_row_a_raw_sql_edit_changed_or_removed():
    events = [record("node", f"node/n{i}", "cordon") for i in range(5)]
    assert verify() == (5, None)
    assert "5 audit rows verified" in run("audit", "verify")

    with connection.cursor() as cursor:
        cursor.execute("UPDATE pools_auditevent SET actor = 'someone-else' WHERE id = %s", [events[2].pk])
    checked, broken = verify()
    assert (checked, broken.id) == (2, events[2].pk) and "content" in broken.reason
    with pytest.raises(CommandError, match=f"audit row {events[2].pk} is broken"):
        run("audit", "verify")

    with connection.cursor() as cursor:  # put it back, then remove a row instead
        cursor.execute("UPDATE pools_auditevent SET actor = %s WHERE id = %s", [events[2].actor, events[2].pk])
        cursor.execute("DELETE FROM pools_auditevent WHERE id = %s", [events[3].pk])
    checked, broken = verify()
    assert broken.id == events[4].pk and "previous" in broken.reason


def test_a_row_chained_by_the_database_hashes_as_python_does():
    """On PostgreSQL one row's hash is computed in the insert (pools.models.audit._insert_chained): user text with
    quotes, backslashes, non-ASCII and control characters hashes exactly as `chain_hash` does."""
    first = record("workload", "workload/ü-1", "submit", 'naïve "quoted" \\ back\\slash \t tab ✓ 日本 \u2028')
    second = record("node", "node/n1", "cordon", "")
    assert second.previous_hash == first.hash
    assert first.hash == chain_hash(first.previous_hash, AuditEvent.objects.get(pk=first.pk).content())
    assert verify() == (2, None)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_never_fork_the_chain():
    def write(index: int):
        try:
            for n in range(20):
                record("workload", f"workload/{index}-{n}", "submit")
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert verify() == (120, None)


def test_prune_keeps_the_retention_and_leaves_a_row_and_an_intact_chain():
    old = [record("node", f"node/n{i}", "label") for i in range(3)]
    kept = record("node", "node/kept", "label")
    assert prune(days=365) == 0
    assert prune(now=timezone.now() + dt.timedelta(days=2), days=1) == 4
    assert not AuditEvent.objects.filter(pk__in=[e.pk for e in [*old, kept]]).exists()
    pruned = one(kind="audit", action="prune")
    assert pruned.summary.startswith("4 rows older than 1 days removed")
    assert verify() == (1, None)


def test_the_api_page_and_cli_filter_and_scope_the_rows(client, staff, member, django_user_model):
    other = django_user_model.objects.create_user("other")
    for user, name in ((member, "a"), (other, "b")):
        own_client = APIClient()
        own_client.force_authenticate(user)
        assert own_client.post(f"/api/auth/access_token/{name}", {"expires_at": FUTURE},
                               format="json").status_code == 201
    # By hand: a cordon needs the node in a cluster; the journey cordons one through the API
    # (tests/test_figures_journey.py), and here only the row's filtering and scoping are read.
    record("node", "node/h100-001", "cordon", actor=staff)

    staff_client = APIClient()
    staff_client.force_authenticate(staff)  # a session sign-in would be a row of its own
    everything = staff_client.get("/api/audit/").json()
    # The three accounts' creation rows (kind user), then these three.
    assert everything["count"] == 6 and everything["results"][0]["object"] == "node/h100-001"
    assert staff_client.get("/api/audit/?kind=user").json()["count"] == 3
    assert staff_client.get("/api/audit/?kind=token&user=other").json()["results"][0]["object"] == "token/other/b"
    assert staff_client.get("/api/audit/?object=h100").json()["count"] == 1
    assert staff_client.get("/api/audit/?kind=nope").json()["field"] == "kind"
    assert staff_client.get("/api/audit/?from=yesterday").json()["field"] == "from"
    assert staff_client.get("/api/audit/?to=2026-01-01T00:00:00").json()["field"] == "to"
    assert staff_client.get("/api/audit/?limit=0").json()["field"] == "limit"
    tomorrow = (timezone.now() + dt.timedelta(days=1)).date().isoformat()
    assert staff_client.get(f"/api/audit/?from={tomorrow}").json()["count"] == 0

    mine = APIClient()
    mine.force_authenticate(member)
    own = mine.get("/api/audit/").json()
    assert [row["object"] for row in own["results"]] == ["token/researcher/a"]
    assert mine.get("/api/audit/?user=other").status_code == 400
    assert APIClient().get("/api/audit/").status_code in (401, 403)

    client.force_login(member)
    page = client.get("/audit/").content.decode()
    assert "token/researcher/a" in page and "token/other/b" not in page and "h100-001" not in page
    assert 'id="filter-user"' not in page  # one's own rows only
    profile = client.get("/profile/permissions/").content.decode()
    assert "token/researcher/a" in profile and 'id="all-own-actions"' in profile
    client.force_login(staff)
    page = client.get("/audit/?kind=token").content.decode()
    assert "token/other/b" in page and "h100-001" not in page
    exported = b"".join(client.get("/audit/?export=csv&kind=token").streaming_content).decode()
    assert exported.splitlines()[0].startswith("Time,Who,Kind,Object,Action,Change,From")
    assert len(exported.strip().splitlines()) == 3

    listed = run("audit", "list", "--kind", "token")
    assert "token/other/b" in listed and "node/h100-001" not in listed
    assert '"object": "node/h100-001"' in run("audit", "list", "--format", "json")
    assert run("audit", "list", "--format", "csv", "--kind", "token").count("\n") == 3


def test_user_text_in_a_row_is_escaped_in_the_page_and_neutralised_in_the_csv(client, staff):
    record("workload", "workload/1", "submit", "<script>alert(1)</script> =HYPERLINK(\"x\")")
    client.force_login(staff)
    page = client.get("/audit/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page
    exported = b"".join(client.get("/audit/?export=csv&cols=summary").streaming_content).decode()
    assert "\n=HYPERLINK" not in exported and ",=HYPERLINK" not in exported


def test_a_proxy_sign_in_leaves_a_sign_in_row_and_its_group_grants(client, settings):
    settings.ACCESS_HEADER_LOGIN = True
    settings.ACCESS_TRUSTED_PROXIES = ["127.0.0.1"]
    config("ROLE", {"name": "osmo-ml", "external_roles": ["ml"]})
    # A page: the proxy's sign-in opens a session there (under /api/ each request is signed in on its own, with no
    # session, and leaves no sign-in row per call).
    assert client.get("/profile/", HTTP_X_FORWARDED_USER="lin", HTTP_X_FORWARDED_GROUPS="ml").status_code == 200
    signed_in = one(kind="signin", action="success")
    assert (signed_in.actor, signed_in.summary, signed_in.address) == ("lin", "signed in by authenticating proxy",
                                                                       "127.0.0.1")
    granted = one(kind="role", action="grant")
    assert granted.object == "role/osmo-ml" and "mapped from an identity-provider group" in granted.summary
    assert (granted.actor, granted.address) == ("lin", "127.0.0.1")


def test_verify_reads_the_chain_across_batches_and_finds_a_break_at_a_batch_boundary():
    """Batches of 2 over 5 rows (issue 42, point 7): an intact chain is intact however it is paged, and a row
    removed where one batch ends and the next begins is still found (the link carries across batches)."""
    events = [record("node", f"node/n{i}", "cordon") for i in range(5)]
    for batch in (1, 2, 3, 5, 20_000):
        assert verify(batch=batch) == (5, None), batch
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM pools_auditevent WHERE id = %s", [events[2].pk])  # the first of the 2nd batch
    checked, broken = verify(batch=2)
    assert (checked, broken.id) == (2, events[3].pk) and "previous" in broken.reason
