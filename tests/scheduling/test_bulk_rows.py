"""`pools.models.bulk.update_rows`, which the admission cycle writes with: each row its own values, JSON,
foreign keys, times and uuids; rows not named untouched; the count of rows written."""

import pytest
from django.utils import timezone

from pools.models import Pool
from pools.models.bulk import update_rows
from scheduling.models import Status, Workload
from tests.scheduling.conftest import body

pytestmark = pytest.mark.django_db


def test_each_row_gets_its_own_values_and_the_others_are_untouched(researcher_api):
    ids = [researcher_api.post("/api/workloads/", body(name=f"w{i}"), format="json").json()["id"] for i in range(3)]
    training = Pool.objects.get(name="training")
    now = timezone.now()
    rows = [{"id": ids[0], "status": Status.ADMITTED, "pool_id": training.pk, "placement": {"h100-0001": 1},
             "admitted_at": now, "reasons": []},
            {"id": ids[1], "status": Status.PENDING, "pool_id": None, "placement": {},
             "admitted_at": None, "reasons": [{"pool": "training", "code": "QUOTA", "message": "it's \"full\""}]}]
    before = Workload.objects.get(pk=ids[2])

    written = update_rows(Workload, rows, ["status", "pool_id", "placement", "admitted_at", "reasons"])

    assert written == 2
    first, second, third = (Workload.objects.get(pk=pk) for pk in ids)
    assert (first.status, first.pool, first.placement, first.admitted_at, first.reasons) == (
        Status.ADMITTED, training, {"h100-0001": 1}, now, [])
    assert second.reasons == [{"pool": "training", "code": "QUOTA", "message": "it's \"full\""}]
    assert second.pool is None and second.admitted_at is None
    assert (third.status, third.reasons, third.updated_at) == (before.status, before.reasons, before.updated_at)
    assert update_rows(Workload, [], ["status"]) == 0


def test_update_rows_json_sends_the_values_every_row_shares_once(researcher_api):
    from pools.models.bulk import update_rows_json

    ids = [researcher_api.post("/api/workloads/", body(name=f"s{i}"), format="json").json()["id"] for i in range(3)]
    training = Pool.objects.get(name="training")
    now = timezone.now()
    rows = [{"id": ids[0], "pool_id": training.pk, "placement": {"h100-0001": 1}},
            {"id": ids[1], "pool_id": training.pk, "placement": {"h100-0002": 2}}]
    before = Workload.objects.get(pk=ids[2])

    written = update_rows_json(Workload, rows, ["pool_id", "placement"], same={
        "status": Status.ADMITTED, "admitted_at": now, "reasons": [], "positions": {"training": 0}})

    assert written == 2
    first, second, third = (Workload.objects.get(pk=pk) for pk in ids)
    assert (first.placement, second.placement) == ({"h100-0001": 1}, {"h100-0002": 2})
    for row in (first, second):
        assert (row.status, row.pool, row.admitted_at, row.reasons, row.positions) == (
            Status.ADMITTED, training, now, [], {"training": 0})
    assert (third.status, third.pool_id, third.admitted_at) == (before.status, None, None)
