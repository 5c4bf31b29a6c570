"""The log archive's boundaries (issue 42, point 7): a log whose text is exactly OSMO_LOG_ARCHIVE_BYTES is kept
whole and not marked truncated; one byte more drops its first line and says so, on every door that shows the flag
(`X-Log-Truncated`, the JSON answer's `truncated`). Through the product against the stand-in API server: the test
writes the log as the kubelet, the archive task reads it, the API answers once the pods are gone."""

import pytest

from scheduling.models import LogArchive
from scheduling.run import log_archive
from tests.scheduling.test_lifecycle import job_status, observe
from tests.scheduling.test_workload_logs import gone, kubelet_pod, logs_url, running, wired  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

LINES = [f"line {i:02d} {'x' * 8}" for i in range(8)]  # 17 bytes each with its newline: 136 in all
WHOLE = "".join(f"{line}\n" for line in LINES).encode()


def archived(researcher_api, kube, standin, budget: int, settings):
    settings.OSMO_LOG_ARCHIVE_BYTES = budget
    workload, _ = running(researcher_api, kube, standin)
    pod = kubelet_pod(standin, workload, 0, "Failed", exit_code=1)
    standin.append_log(pod, *LINES, namespace=workload.namespace)
    job_status(standin, workload, "Failed", "BackoffLimitExceeded")
    workload = observe(kube, workload)
    assert log_archive.archive(workload.pk, clusters=lambda backend: kube) == {"KEPT": 1}
    gone(standin, kube, workload)
    text = researcher_api.get(logs_url(workload))
    as_json = researcher_api.get(logs_url(workload, format="json")).json()
    assert text.status_code == 200 and text["X-Log-Source"] == "archive" and as_json["source"] == "archive"
    return text, as_json


def test_a_log_exactly_at_the_budget_is_kept_whole_and_not_marked_truncated(researcher_api, kube, wired, settings):  # noqa: F811
    text, as_json = archived(researcher_api, kube, wired, len(WHOLE), settings)
    assert text.content == WHOLE and as_json["text"] == WHOLE.decode()
    assert text["X-Log-Truncated"] == "0" and as_json["truncated"] is False
    assert LogArchive.objects.get().truncated is False


def test_a_log_one_byte_over_the_budget_loses_its_first_line_and_says_so(researcher_api, kube, wired, settings):  # noqa: F811
    text, as_json = archived(researcher_api, kube, wired, len(WHOLE) - 1, settings)
    assert text.content == WHOLE[len(LINES[0]) + 1:] and as_json["text"] == text.content.decode()
    assert text["X-Log-Truncated"] == "1" and as_json["truncated"] is True
    assert LogArchive.objects.get().truncated is True
