"""`/nodes/<name>/`: the node's status and reasons, conditions, taints, labels, pods with their workloads, its
pools and platforms; scoped like the nodes table (a member sees a node of their pools only, and no name of a
pool they may not see); linked from every node name."""

import datetime as dt
import json
import re
import uuid

import pytest
from django.utils import timezone

from pools.fleet import node_history
from pools.models import Backend, ManagedJob, Node, Pod, Project
from scheduling.models import Workload
from tests.pages.conftest import body
from tests.support.fleet import ALPHA, BRAVO, make_nodes

pytestmark = pytest.mark.django_db

CONDITIONS = [
    {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
     "last_transition_time": "2026-01-02T03:04:05Z"},
    {"type": "DiskPressure", "status": "True", "reason": "KubeletHasDiskPressure",
     "message": "<b>disk</b> is 97% full", "last_transition_time": ""},
]


def broken_node(pools, name="broken"):
    return make_nodes(1, pools, prefix=name, conditions=CONDITIONS,
                      components={"container-toolkit": "running", "dcgm-exporter": "missing"})[0]


def pod(node, name, *, pool="", gpu=0, cpu=500, memory=2**30, namespace="team", component=""):
    """A pod row as the sync writes it, on make_nodes' rows (no cluster behind them); the stand-in's pods read by
    the sync are the journeys' (tests/test_figures_journey.py)."""
    return Pod.objects.create(backend=node.backend, uid=str(uuid.uuid4()), namespace=namespace, name=name,
                              node_name=node.name, phase="Running", gpu=gpu, cpu=cpu, memory=memory, pool=pool,
                              component=component)


def workload_of(pod_row, submitter, name="train"):
    """The workload a pod row belongs to, with its Job's record, as submission and dispatch leave them: by hand,
    since the pod is a row with no cluster to dispatch to."""
    workload = Workload.objects.create(
        name=name, project=Project.objects.get(name=Project.DEFAULT_NAME), submitter=submitter,
        submitter_name=submitter.get_username(), source="api", request={"name": name}, pools=[ALPHA], gpu=1,
        submitted_at=timezone.now())
    ManagedJob.objects.create(backend=pod_row.backend, namespace=pod_row.namespace, name=f"{name}-job",
                              workload=str(workload.pk), pods={pod_row.name: {"node": pod_row.node_name}},
                              updated_at=timezone.now())
    return workload


def test_it_shows_status_reasons_conditions_taints_labels_figures_and_pools(staff_client, fleet):
    node = broken_node([ALPHA, BRAVO])

    text = body(staff_client.get(f"/nodes/{node.name}/"))

    assert '<span class="status status-bad" id="node-status">Not ready (Disk pressure)</span>' in text
    assert re.findall(r'<li data-testid="reason">([^<]+)</li>', text) == ["Disk pressure", "Memory pressure"]
    assert re.findall(r'data-testid="condition" data-type="([^"]+)"', text) == ["Ready", "DiskPressure"]
    assert "kubelet is posting ready status" in text and "KubeletHasDiskPressure" in text
    assert "&lt;b&gt;disk&lt;/b&gt; is 97% full" in text and "<b>disk</b>" not in text
    assert '<time datetime="2026-01-02T03:04:05+00:00"' in text
    assert "nvidia.com/gpu=present:NoSchedule" in text and "rack=r0" in text
    assert "dcgm-exporter missing" in text
    assert f'href="/pools/{ALPHA}/"' in text and f'href="/pools/{BRAVO}/#platforms-region"' in text
    assert 'data-col="gpu_free"><dt>GPU free</dt><dd>8</dd>' in text
    assert f'href="/admin/pools/node/{node.pk}/change/"' in text
    assert 'id="cordon-button"' in text and 'name="csrfmiddlewaretoken"' in text


def test_it_lists_the_pods_with_requests_and_links_the_workloads_the_viewer_may_open(client, alpha_member, staff,
                                                                                      fleet, settings):
    settings.OSMO_DEFAULT_PROJECT_OPEN = False
    node = broken_node([ALPHA])
    mine = workload_of(pod(node, "train-0", pool=ALPHA, gpu=4, cpu=8_000, memory=16 * 2**30), alpha_member)
    theirs = workload_of(pod(node, "eval-0", pool=ALPHA, gpu=2, cpu=1_500), staff, name="eval")
    pod(node, "toolkit-x", namespace="gpu-operator", component="toolkit", cpu=10, memory=64 * 2**20)
    pod(node, "notebook-0", namespace="other-team", gpu=1)  # no pool label: another team's, counted only
    client.force_login(alpha_member)

    text = body(client.get(f"/nodes/{node.name}/"))

    rows = re.findall(r'<tr data-testid="pod">(.*?)</tr>', text, re.S)
    assert [re.search(r'<th scope="row">([^<]+)</th>', row).group(1) for row in rows] == [
        "gpu-operator/toolkit-x", "team/eval-0", "team/train-0"]
    assert '<td class="num">4</td>' in rows[2] and '<td class="num">8</td>' in rows[2] and "16.0 GiB" in rows[2]
    assert f'<a href="/workloads/{mine.pk}/">{mine.pk}</a>' in rows[2]
    assert f"/workloads/{theirs.pk}/" not in text  # not hers: named, not linked
    assert "GPU operator (toolkit)" in rows[0] and "1.5" in rows[1]
    assert "other-team" not in text and "notebook-0" not in text
    assert "And 1 pod (1 GPU) of other teams or of pools you may not see." in text


def test_a_member_sees_a_node_of_their_pools_without_the_names_of_the_others(client, alpha_member, fleet):
    shared = broken_node([ALPHA, BRAVO], name="shared")
    pod(shared, "secret-0", pool=BRAVO, gpu=3, namespace="bravo-ns")
    pod(shared, "open-0", pool=ALPHA, gpu=1, namespace="alpha-ns")
    hidden = make_nodes(1, [BRAVO], prefix="hidden")[0]
    client.force_login(alpha_member)

    text = body(client.get(f"/nodes/{shared.name}/"))

    assert BRAVO not in text and "bravo" not in text and "secret-0" not in text
    assert "alpha-ns/open-0" in text and "And 1 pod (3 GPUs) of other teams or of pools you may not see." in text
    assert 'id="cordon-button"' not in text and "/admin/" not in text
    assert client.get(f"/nodes/{hidden.name}/").status_code == 404
    assert client.get("/nodes/no-such-node/").status_code == 404
    assert client.post(f"/nodes/{shared.name}/cordon/", {"cordon": "true"}).status_code == 403
    assert not Node.objects.get(pk=shared.pk).unschedulable


def test_its_recent_events_name_only_the_pools_the_viewer_may_see(staff_client, client, alpha_member, fleet):
    shared = broken_node([ALPHA, BRAVO], name="shared")
    now = timezone.now()
    node_history.record(shared.backend, [(shared.name, "added", {"status": "Ready", "pools": [ALPHA]})],
                        now - dt.timedelta(hours=2))
    node_history.record(shared.backend, [(shared.name, "pools", {"before": [ALPHA], "after": [ALPHA, BRAVO]}),
                                         (shared.name, "status", {"before": "Ready", "after": "<b>Not</b> ready"})],
                        now - dt.timedelta(minutes=5))
    node_history.record(shared.backend, [("another-node", "removed", {})], now)

    def events(viewer):
        text = body(viewer.get(f"/nodes/{shared.name}/"))
        return re.findall(r'<li data-kind="([a-z]+)"><time[^>]*>[^<]*</time>: ([^<]*)</li>', text), text

    staff_events, _ = events(staff_client)
    assert staff_events == [("status", "Status Ready \u2192 &lt;b&gt;Not&lt;/b&gt; ready"),
                            ("pools", f"Pools {ALPHA} \u2192 {ALPHA}, {BRAVO}"),
                            ("added", f"Appeared: Ready, pools {ALPHA}")]
    client.force_login(alpha_member)  # the same client as staff_client's
    member_events, text = events(client)
    assert [kind for kind, _ in member_events] == ["status", "added"] and BRAVO not in text
    # The API answers the same events, as scoped: GET /api/nodes/{name}/.
    answer = client.get(f"/api/nodes/{shared.name}/").json()
    assert [(event["kind"], event["event"]) for event in answer["events"]] == [
        ("status", "Status Ready \u2192 <b>Not</b> ready"), ("added", f"Appeared: Ready, pools {ALPHA}")]
    assert BRAVO not in json.dumps(answer)


def test_every_node_name_links_to_its_page(staff_client, client, alpha_member, fleet):
    make_nodes(2, [ALPHA])
    client.force_login(alpha_member)

    for viewer in (staff_client, client):
        text = body(viewer.get("/nodes/"))
        assert '<th scope="row" data-col="node"><a href="/nodes/node-0000/">node-0000</a>' in text
        assert '<a href="/nodes/node-0001/">node-0001</a>' in body(viewer.get(f"/pools/{ALPHA}/"))


def test_a_name_on_two_backends_is_told_apart_by_backend(staff_client, fleet):
    make_nodes(1, [ALPHA], prefix="twin")
    # By hand: a node last seen an hour ago on a second backend (a time no door dates back).
    other = Backend.objects.create(name="zeta", kind=Backend.objects.get(name="default").kind)
    Node.objects.create(backend=other, name="twin-0000", status="Unknown", reasons=["No Ready condition reported"],
                        last_seen=timezone.now() - dt.timedelta(hours=1))

    first = body(staff_client.get("/nodes/twin-0000/"))
    second = body(staff_client.get("/nodes/twin-0000/?backend=zeta"))

    assert "backend <strong>default</strong>" in first and 'href="/nodes/twin-0000/?backend=zeta"' in first
    assert "backend <strong>zeta</strong>" in second and "No Ready condition reported" in second
    assert staff_client.get("/nodes/twin-0000/?backend=nope").status_code == 404


def test_the_node_page_reads_a_bounded_number_of_queries(staff_client, fleet, django_assert_max_num_queries):
    node = broken_node([ALPHA, BRAVO])
    for index in range(20):
        pod(node, f"p-{index}", gpu=1)

    with django_assert_max_num_queries(12):
        response = staff_client.get(f"/nodes/{node.name}/")

    assert response.status_code == 200 and body(response).count('data-testid="pod"') == 20
