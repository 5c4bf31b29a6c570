"""Jobs listed and watched by label selector with the real client against the stand-in API server: pages
with continue tokens, only the selected Jobs, changes after a resourceVersion, and 410 once it is gone."""

import pytest

from pools.cluster import Expired, NotFound
from tests.cluster.test_kube_cluster import take
from tests.kube_standin import HANG

OURS = "runwhere.ai/workload"


def job(name: str, workload: str | None = None) -> dict:
    labels = {OURS: workload} if workload else {"app": "someone-else"}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"template": {"spec": {"containers": [{"name": "user", "image": "busybox"}],
                                           "restartPolicy": "Never"}}}}


@pytest.fixture
def jobs(kube):
    for i in range(5):
        kube.create_job(f"team-{i % 2}", job(f"wl-{i}", str(i)))
    kube.create_job("team-0", job("theirs"))
    return kube


def test_it_lists_only_the_selected_jobs_of_every_namespace_page_by_page(jobs):
    names, token, pages = [], None, 0
    while True:
        page = jobs.list_jobs(OURS, limit=2, continue_token=token)
        names += [(item["metadata"]["namespace"], item["metadata"]["name"]) for item in page.items]
        pages += 1
        token = page.continue_token
        if not token:
            break
    assert pages == 3
    assert sorted(names) == [("team-0", "wl-0"), ("team-0", "wl-2"), ("team-0", "wl-4"), ("team-1", "wl-1"),
                             ("team-1", "wl-3")]
    assert [item["metadata"]["name"] for item in jobs.list_jobs(f"{OURS}=3").items] == ["wl-3"]
    assert [item["metadata"]["name"] for item in jobs.list_jobs(f"!{OURS}").items] == ["theirs"]


def test_a_watch_from_the_lists_version_sees_changes_of_the_selected_jobs_only(standin, jobs):
    version = jobs.list_jobs(OURS).resource_version
    standin.modify_job("wl-1", {"status": {"active": 1}}, namespace="team-1")
    jobs.create_job("team-0", job("theirs-2"))
    jobs.delete_job("team-0", "wl-2")
    jobs.create_job("team-1", job("wl-9", "9"))

    events = take(jobs.watch_jobs(OURS, version, timeout_seconds=HANG), 3)

    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("MODIFIED", "wl-1"), ("DELETED", "wl-2"), ("ADDED", "wl-9")]
    assert events[0].object["status"] == {"active": 1}
    assert int(events[-1].resource_version) > int(version)


def test_a_watch_from_a_compacted_version_raises_expired(standin, jobs):
    version = jobs.list_jobs(OURS).resource_version
    jobs.create_job("team-0", job("wl-7", "7"))
    standin.compact()

    with pytest.raises(Expired):
        list(jobs.watch_jobs(OURS, version, timeout_seconds=HANG))
    # A new list is the way back: it holds the Job created before the compaction.
    assert "wl-7" in [item["metadata"]["name"] for item in jobs.list_jobs(OURS).items]


def test_a_namespace_is_created_once_with_its_labels_and_an_existing_one_is_left_alone(standin, kube):
    assert kube.ensure_namespace("vision", {"runwhere.ai/managed-by": "osmo-pools"}) is True
    assert kube.ensure_namespace("vision", {"other": "labels"}) is False
    assert standin.namespace("vision")["metadata"]["labels"] == {"runwhere.ai/managed-by": "osmo-pools"}
    standin.strict_namespaces = True
    with pytest.raises(NotFound):
        kube.create_job("nowhere", job("wl-1", "1"))
    assert kube.create_job("vision", job("wl-1", "1"))["metadata"]["namespace"] == "vision"
