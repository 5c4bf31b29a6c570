"""GPU utilization in the usage rows (issue 27 point 5): the rollup reads our pods' hourly DCGM averages from
Prometheus (tests/prometheus_standin.py, a real HTTP server) in one range query, and every report shows the
GPU-seconds-weighted average per row and in the totals, "not measured" where nothing was; a failing Prometheus
leaves the figures unmeasured and the rollup whole."""

import csv
import io
import json

import pytest
from rest_framework.test import APIClient

from scheduling.models import UsageHour
from tests.support.commands import run
from tests.support.usage import at, known_history

pytestmark = pytest.mark.django_db


def samples(end_minute: float, minutes: int, value: float) -> list[tuple[float, float]]:
    """One sample a minute over the `minutes` before `at(end_minute)`, all `value`."""
    end = at(end_minute).timestamp()
    return [(end - s, value) for s in range(0, minutes * 60, 60)]


def measure(prometheus) -> None:
    """The known history's pods of ours: p1 (8 GPUs) ran 0-90 and 200-230 min, p3 (4 GPUs) 0-60; p2 is not ours."""
    prometheus.gpu("proj-vision", "p1", 0, [*samples(60, 60, 60), *samples(90, 30, 40), *samples(230, 30, 10)])
    prometheus.gpu("proj-nlp", "p3", 0, samples(60, 60, 90))


# By hand, utilization x GPU-seconds over measured GPU-seconds:
# p1: hour 0 60 % x 8 x 3600, hour 1 40 % x 8 x 1800, hour 3 10 % x 8 x 1800 = 2,448,000 over 57,600 = 42.5 %;
# p3: hour 0 90 % x 4 x 3600 = 1,296,000 over 14,400 = 90 %; both: 3,744,000 over 72,000 = 52.0 %.
# p2 (not ours) and hour 4 (not ended when the rollup ran, at 265 min) are not measured.
BY_USER = {"researcher": 42.5, "other": 90.0, "": None}
BY_PROJECT = {"vision": 42.5, "nlp": 90.0}


def api_report(staff, **query) -> dict:
    api = APIClient()
    api.force_authenticate(staff)
    response = api.get("/api/usage/", {"month": "2026-11", **query})
    assert response.status_code == 200, response.content
    return response.json()


def test_the_rollup_stores_weighted_utilization_from_one_range_query(prometheus, world, staff):
    measure(prometheus)
    known_history(world)
    assert [query["path"] for query in prometheus.queries] == ["/api/v1/query_range"]
    assert "proj-vision" in prometheus.queries[0]["query"] and "proj-nlp" in prometheus.queries[0]["query"]
    hourly = {(row.hour, row.user): (row.gpu_util_seconds, row.gpu_measured_seconds)
              for row in UsageHour.objects.filter(grain="h", project="vision", user="researcher")}
    assert hourly == {(at(0), "researcher"): (60 * 8 * 3600, 8 * 3600),
                      (at(60), "researcher"): (40 * 8 * 1800, 8 * 1800),
                      (at(180), "researcher"): (10 * 8 * 1800, 8 * 1800)}
    report = api_report(staff, group_by="user")
    assert {row["group"]: row["gpu_util_percent"] for row in report["rows"]} == BY_USER
    assert report["totals"]["gpu_util_percent"] == report["gpu_util_percent"] == 52.0
    projects = api_report(staff, group_by="project")["rows"]
    assert {row["group"]: row["gpu_util_percent"] for row in projects} == BY_PROJECT
    # The daily rows carry the same sums: a long period reads them and says the same.
    long = api_report(staff, **{"from": "2026-10-01", "to": "2026-11-30", "month": ""})
    assert long["totals"]["gpu_util_percent"] == 52.0


def test_the_page_csv_and_cli_show_the_figures_or_not_measured(prometheus, world, staff, admin_client):
    measure(prometheus)
    known_history(world)
    download = admin_client.get("/usage/", {"month": "2026-11", "group_by": "user", "export": "csv"})
    table = list(csv.reader(io.StringIO(b"".join(download.streaming_content).decode())))
    column = table[0].index("GPU util % (%)")
    assert {row[0]: row[column] for row in table[1:]} == {"researcher": "42.5", "other": "90.0",
                                                           "(none)": "not measured", "Total": "52.0"}
    page = admin_client.get("/usage/", {"month": "2026-11", "group_by": "user"}).content.decode()
    assert "GPU util %" in page and "not measured" in page and "GPU utilization: 52.0 %" in page
    printed = json.loads(run("usage", "report", "--group-by", "user", "--month", "2026-11", "--format", "json"))
    assert {row["group"]: row["gpu_util_percent"] for row in printed["rows"]} == BY_USER
    text = run("usage", "report", "--group-by", "user", "--month", "2026-11")
    assert "GPU util %" in text and "not measured" in text and "42.5" in text


def test_a_failing_prometheus_leaves_not_measured_and_the_rollup_whole(prometheus, world, staff):
    measure(prometheus)
    prometheus.fault = "error"
    known_history(world)
    report = api_report(staff, group_by="project")
    assert {row["group"]: row["gpu_hours"] for row in report["rows"]} == {"vision": 21.0, "nlp": 4.0}
    assert {row["group"]: row["gpu_util_percent"] for row in report["rows"]} == {"vision": None, "nlp": None}
    assert report["gpu_util_percent"] is None


def test_without_the_setting_no_query_and_not_measured(prometheus, world, staff, settings):
    settings.OSMO_PROMETHEUS_URL = ""
    measure(prometheus)
    known_history(world)
    assert prometheus.queries == []
    assert api_report(staff, group_by="user")["totals"]["gpu_util_percent"] is None
