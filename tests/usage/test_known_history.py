"""Issue 27's known history: pods observed from the sync's Pod rows through a preemption, a sync outage and a
lost node, a pod of ours and one we did not submit, give GPU-hours equal to a computation by hand, per group,
on the page, in the CSV, the API and the CLI; members see only their projects' rows and their own."""

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from django.test import Client
from rest_framework.test import APIClient

from scheduling.models import EndReason, UsageInterval
from scheduling.usage import rollup
from tests.scheduling.conftest import SHARED
from tests.support.commands import run
from tests.support.usage import T0, at

pytestmark = pytest.mark.django_db


def test_the_intervals_say_how_each_one_ended(history):
    rows = list(UsageInterval.objects.order_by("pod_name", "start").values_list(
        "pod_name", "start", "end", "end_reason", "truncated", "project", "user", "ours"))
    assert rows == [
        ("p1", at(0), at(90), EndReason.OUTAGE, True, "vision", "researcher", True),
        ("p1", at(200), at(230), EndReason.NODE_LOST, True, "vision", "researcher", True),
        ("p2", at(0), at(90), EndReason.OUTAGE, True, "vision", "", False),
        ("p2", at(200), None, "", False, "vision", "", False),
        ("p3", at(0), at(60), EndReason.PREEMPTED, False, "nlp", "other", True),
    ]


BY_PROJECT = {"vision": "21.00", "nlp": "4.00"}
BY_USER = {"researcher": "16.00", "other": "4.00", "": "5.00"}
BY_POOL = {"training": "20.00", SHARED: "5.00"}


def api_rows(client, **query) -> dict:
    response = client.get("/api/usage/", {"month": "2026-11", **query})
    assert response.status_code == 200, response.content
    return {row["group"]: row for row in response.json()["rows"]}


@pytest.mark.parametrize(("group_by", "expected"), [("project", BY_PROJECT), ("user", BY_USER), ("pool", BY_POOL)])
def test_gpu_hours_equal_the_hand_computation_in_the_api_csv_page_and_cli(history, staff, admin_client, group_by,
                                                                          expected):
    api = APIClient()
    api.force_authenticate(staff)
    rows = api_rows(api, group_by=group_by)
    assert {group: f"{row['gpu_hours']:.2f}" for group, row in rows.items()} == expected
    download = admin_client.get("/usage/", {"month": "2026-11", "group_by": group_by, "export": "csv"})
    table = list(csv.reader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert table[0][:2] == [{"project": "Project", "user": "User", "pool": "Pool"}[group_by], "GPU-hours (GPU-hours)"]
    assert {("" if row[0] == "(none)" else row[0]): row[1] for row in table[1:-1]} == expected
    assert table[-1][:2] == ["Total", f"{sum(float(v) for v in expected.values()):.2f}"]
    page = admin_client.get("/usage/", {"month": "2026-11", "group_by": group_by}).content.decode()
    shown = dict(re.findall(r'data-col="group"[^>]*>(?:<[^>]+>)*([^<]*)<.*?data-col="gpu_hours"[^>]*>([^<]*)<',
                            page.split("<tbody>", 1)[1].split("</tbody>", 1)[0]))
    assert shown == {group or "(none)": hours for group, hours in expected.items()}
    printed = json.loads(run("usage", "report", "--group-by", group_by, "--month", "2026-11", "--format", "json"))
    assert {row["group"]: f"{row['gpu_hours']:.2f}" for row in printed["rows"]} == expected
    cli_csv = run("usage", "report", "--group-by", group_by, "--month", "2026-11", "--format", "csv")
    assert cli_csv.encode() == b"".join(admin_client.get("/usage/", {"month": "2026-11", "group_by": group_by,
                                                                     "export": "csv"}).streaming_content)


def test_borrowed_preempted_deserved_and_starved_follow_the_quotas(history, staff):
    api = APIClient()
    api.force_authenticate(staff)
    rows = api_rows(api, group_by="project", pool="training")
    vision, nlp = rows["vision"], rows["nlp"]
    # vision deserves 4 GPUs in training and held 8 for two hours: 4 x 2 borrowed; nlp deserves none.
    assert vision["borrowed_hours"] == 8.0 and nlp["borrowed_hours"] == 4.0
    assert nlp["preempted_hours"] == 4.0 and vision["preempted_hours"] == 0.0
    # Deserved over the recomputed hours (00:00 to 04:25): 4 GPUs x 265 minutes.
    assert vision["deserved_hours"] == pytest.approx(4 * 265 / 60, abs=0.01)
    # w3 waited 0-120 for training; vision held 8 >= 4 until 90, then nothing: starved 30 minutes.
    assert vision["starved_hours"] == 0.5 and vision["pending_hours"] == 2.0


@pytest.mark.parametrize("who", ["researcher", "other"])
def test_a_member_sees_only_their_projects_and_their_own_row(history, who):
    client = APIClient()
    client.force_authenticate(history[who])
    projects = api_rows(client, group_by="project")
    users = api_rows(client, group_by="user")
    if who == "researcher":  # a member of vision and nlp
        assert {group: row["gpu_hours"] for group, row in projects.items()} == {"vision": 21.0, "nlp": 4.0}
        assert {group: row["gpu_hours"] for group, row in users.items()} == {"researcher": 16.0}
    else:  # a member of nlp only
        assert {group: row["gpu_hours"] for group, row in projects.items()} == {"nlp": 4.0}
        assert {group: row["gpu_hours"] for group, row in users.items()} == {"other": 4.0}
    browser = Client()
    browser.force_login(history[who])
    download = b"".join(browser.get("/usage/", {"month": "2026-11", "export": "csv"}).streaming_content).decode()
    assert ("vision" in download) is (who == "researcher")


@pytest.mark.parametrize(("query", "field"), [
    ({"group_by": "team"}, "group_by"), ({"month": "2026-13"}, "month"), ({"from": "yesterday"}, "from"),
    ({"from": "2026-11-02", "to": "2026-11-01"}, "to"), ({"period": "forever"}, "period"),
    ({"from": "2000-01-01", "to": "2026-01-01"}, "from"), ({"pool": "x" * 65}, "pool"), ({"project": "a b"}, "project"),
    ({"period": "month"}, "month"),
    # Beyond the calendar datetime holds (an OverflowError or a ValueError, 500 before: issue 42)
    ({"from": "9999-12-30"}, "from"), ({"month": "9999-12"}, "month"),
    ({"from": "2026-11-01", "to": "9999-12-31"}, "to"),
    ({"from": "0001-01-01T00:00:00+05:00", "to": "0001-01-02"}, "from"), ({"from": "0001-01-01"}, "from"),
    ({"from": "9999-12-31T23:00:00-20:00"}, "from"), ({"from": "2026-11-01", "to": "9999-12-31T23:00:00-20:00"}, "to"),
])
def test_bad_parameters_answer_400_naming_the_field(history, staff, query, field):
    api = APIClient()
    api.force_authenticate(staff)
    response = api.get("/api/usage/", query)
    assert response.status_code == 400
    assert response.json()["field"] == field
    page = Client()
    page.force_login(staff)
    assert page.get("/usage/", query).status_code == 400


def test_the_reports_cost_a_fixed_number_of_queries(history, staff, django_assert_max_num_queries):
    api = APIClient()
    api.force_authenticate(staff)
    page = Client()
    page.force_login(staff)
    # The report is one statement (use, deserved and capacity by UNION ALL); the page adds the chart's aggregate
    # and the session's two reads.
    with django_assert_max_num_queries(1):
        api.get("/api/usage/", {"month": "2026-11", "group_by": "project"})
    with django_assert_max_num_queries(4):
        page.get("/usage/", {"month": "2026-11", "group_by": "user"})


def test_the_rollup_is_idempotent(history):
    from scheduling.models import UsageHour

    before = sorted(UsageHour.objects.values_list("hour", "pool", "project", "user", "gpu_seconds", "borrowed_seconds"))
    rollup.run(now=at(265), since=T0)
    rollup.run(now=at(265))
    assert sorted(UsageHour.objects.values_list("hour", "pool", "project", "user", "gpu_seconds",
                                                "borrowed_seconds")) == before


def test_capacity_counts_ready_gpus_while_the_sync_was_seen(history, staff):
    api = APIClient()
    api.force_authenticate(staff)
    # training's two 8-GPU nodes: seen 0-90 and 200-260 (16 GPUs), 8 from 260 when one went Unknown.
    pools = api_rows(api, group_by="pool")
    assert pools["training"]["capacity_share_percent"] == pytest.approx(100 * 20 / (16 * 2.5), abs=0.01)


def test_the_cli_prints_the_table_and_names_a_bad_option(history):
    printed = run("usage", "report", "--group-by", "project", "--month", "2026-11").splitlines()
    assert printed[0].split()[:2] == ["Project", "GPU-hours"]
    assert [line.split()[:2] for line in printed[1:]] == [["vision", "21.00"], ["nlp", "4.00"], ["Total", "25.00"]]
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--month"):
        run("usage", "report", "--month", "2026-13")


def test_a_silent_backend_holds_no_hour_back_from_the_next_run(history):
    from scheduling.models import RollupState

    # p2's interval is still open at the 260-minute watermark: the next run starts from that hour...
    assert RollupState.objects.get().through == at(240)
    # ...until the sync goes silent and it is closed; then nothing holds the rollup back.
    from django.conf import settings

    from scheduling.usage import observe

    observe.observe(at(260) + timedelta(seconds=settings.OSMO_BACKEND_STALE_SECONDS + 1))
    rollup.run(now=at(60 * 30))
    assert RollupState.objects.get().through == at(60 * 30)
