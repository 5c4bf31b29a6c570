"""core/v1 Events listed and watched by field selector: the real client against the stand-in API server (every
namespace, and one namespace's collection), and the simulated cluster, whose Job controller never refuses."""

import json
import urllib.request

import pytest

from pools.cluster.simulated import SimulatedCluster
from tests.cluster.test_kube_cluster import take
from tests.kube_standin import HANG

SELECTOR = "involvedObject.kind=Job,reason=FailedCreate"


def event(name: str, namespace: str, reason: str = "FailedCreate", kind: str = "Job") -> dict:
    return {"metadata": {"name": name, "namespace": namespace}, "reason": reason, "type": "Warning",
            "involvedObject": {"kind": kind, "namespace": namespace, "name": name.split(".")[0]},
            "message": f"Error creating: {name}"}


@pytest.fixture
def events(standin):
    standin.add_event(event("job-a.1", "team-0"))
    standin.add_event(event("job-b.1", "team-1"))
    standin.add_event(event("job-a.2", "team-0", reason="SuccessfulCreate"))
    standin.add_event(event("pod-a.1", "team-0", kind="Pod"))
    return standin


def test_the_real_client_lists_only_the_selected_events_of_every_namespace(events, kube):
    page = kube.list_events(SELECTOR)

    assert sorted(item["metadata"]["name"] for item in page.items) == ["job-a.1", "job-b.1"]
    assert [r.query["fieldSelector"] for r in events.requests_to("/api/v1/events")] == [SELECTOR]


def test_a_watch_from_the_lists_version_sees_the_selected_events_only(events, kube):
    version = kube.list_events(SELECTOR).resource_version
    events.add_event(event("job-c.1", "team-1", reason="SuccessfulCreate"))
    events.add_event(event("job-c.2", "team-1"))

    (seen,) = take(kube.watch_events(SELECTOR, version, timeout_seconds=HANG), 1)

    assert (seen.type, seen.object["metadata"]["name"]) == ("ADDED", "job-c.2")


def test_one_namespaces_events_are_served_at_its_collection(events):
    url = f"{events.url}/api/v1/namespaces/team-0/events?fieldSelector=reason%3DFailedCreate"
    with urllib.request.urlopen(url, timeout=HANG) as answer:
        listed = json.load(answer)
    with urllib.request.urlopen(f"{url}&watch=true&timeoutSeconds=1", timeout=HANG) as answer:
        watched = [json.loads(line) for line in answer.read().splitlines() if line.strip()]

    assert listed["kind"] == "EventList" and [i["metadata"]["name"] for i in listed["items"]] == ["job-a.1", "pod-a.1"]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in watched] == [("ADDED", "job-a.1"),
                                                                              ("ADDED", "pod-a.1")]


def test_the_simulated_cluster_serves_no_events_and_a_watch_that_ends(tmp_path):
    cluster = SimulatedCluster("default", tmp_path, clock=lambda: 0.0, sleep=lambda seconds: None)

    page = cluster.list_events(SELECTOR)

    assert page.items == [] and page.resource_version
    assert all(e.type == "BOOKMARK" for e in cluster.watch_events(SELECTOR, page.resource_version, timeout_seconds=1))
