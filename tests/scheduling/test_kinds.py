"""The kinds of work (issue 43) through the API, dispatch and the stand-in API server (its rules: tests/kube_rules.py,
kube-apiserver's for Deployments, StatefulSets, Services and Ingresses): each kind's objects field by field, a
notebook RUNNING once its pod is Ready, an inference AVAILABLE and rolled to a new image on resubmission with its
quota use replicas x request all the while, and scaled down."""

import io
from datetime import timedelta

import pytest

from pools.cluster.kinds import DEPLOYMENT, INGRESS, SERVICE, STATEFULSET
from scheduling.decisions.lifecycle import status_word
from scheduling.models import Status, Workload
from scheduling.run import snapshot
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.conftest import body
from tests.support.lifecycle import observe, put_pod
from tests.support.lifecycle import pod as job_pod

pytestmark = pytest.mark.django_db
PREFIX = "runwhere.ai/"
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submit(api, **fields) -> dict:
    answer = api.post("/api/workloads/", body(**fields), format="json")
    assert answer.status_code in (200, 201), answer.json()
    return answer.json()


def dispatched(api, kube, **fields) -> Workload:
    created = submit(api, **fields)
    run_cycle()
    assert dispatch(created["id"], clusters=lambda backend: kube) == "created"
    return Workload.objects.select_related("pool", "project").get(pk=created["id"])


def controller_pod(standin, workload: Workload, owner: dict, index: int, *, ready: bool,
                   node: str = "training-h100-000") -> dict:
    """What a ReplicaSet (a Deployment's) or StatefulSet controller and then the kubelet write for one replica."""
    template = owner["spec"]["template"]
    if owner["kind"] == "StatefulSet":
        name, owners, extra = f"{owner['metadata']['name']}-{index}", [{"kind": "StatefulSet",
                                                                         "name": owner["metadata"]["name"]}], {}
    else:
        hash_ = "5d8f9c7b6"
        name = f"{owner['metadata']['name']}-{hash_}-x{index}"
        owners, extra = [{"kind": "ReplicaSet", "name": f"{owner['metadata']['name']}-{hash_}"}], \
            {"pod-template-hash": hash_}
    container = template["spec"]["containers"][0]
    obj = {"metadata": {"name": name, "namespace": workload.namespace, "ownerReferences": owners,
                        "labels": {**template["metadata"]["labels"], **extra}},
           "spec": {**template["spec"], "nodeName": node},
           "status": {"phase": "Running",
                      "startTime": "2026-12-06T00:00:00Z",
                      "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                      "containerStatuses": [{"name": container["name"],
                                             "state": {"running": {"startedAt": "2026-12-06T06:00:00Z"}}}]}}
    put_pod(standin, obj)
    return obj


def test_a_notebook_is_a_statefulset_of_one_behind_a_headless_service(standin, kube, researcher_api):
    standin.strict_namespaces = True
    workload = dispatched(researcher_api, kube, name="explore", kind="notebook")
    (statefulset,) = standin.objects(STATEFULSET)
    (service,) = standin.objects(SERVICE)
    name, namespace = workload.job_name, workload.namespace
    selector = {f"{PREFIX}workload": str(workload.pk)}
    assert statefulset["metadata"]["name"] == name and statefulset["metadata"]["namespace"] == namespace
    assert statefulset["metadata"]["labels"][f"{PREFIX}workload"] == str(workload.pk)
    spec = statefulset["spec"]
    assert (spec["replicas"], spec["serviceName"], spec["podManagementPolicy"]) == (1, name, "Parallel")
    assert spec["selector"] == {"matchLabels": selector}
    assert spec["template"]["metadata"]["labels"][f"{PREFIX}workload"] == str(workload.pk)
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always"
    user = pod["containers"][0]
    assert user["image"] == IMAGE
    assert user["ports"] == [{"name": "http", "containerPort": 8888, "protocol": "TCP"}]
    assert user["readinessProbe"]["tcpSocket"] == {"port": 8888}
    assert service["metadata"]["name"] == name
    assert service["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name,
                                                       "uid": statefulset["metadata"]["uid"],
                                                       "blockOwnerDeletion": False}]
    assert service["spec"] == {"selector": selector, "type": "ClusterIP", "clusterIP": "None",
                               "publishNotReadyAddresses": False,
                               "ports": [{"name": "http", "port": 8888, "targetPort": 8888, "protocol": "TCP"}]}
    assert standin.jobs() == [] and standin.objects(INGRESS) == []
    assert workload.status == Status.SCHEDULING and workload.kind == "notebook"
    assert "StatefulSet" in workload.events.last().message and "Service" in workload.events.last().message


def test_a_notebook_is_running_once_its_pod_is_ready(standin, kube, researcher_api):
    workload = dispatched(researcher_api, kube, name="explore", kind="notebook", port=8080)
    (statefulset,) = standin.objects(STATEFULSET)
    controller_pod(standin, workload, statefulset, 0, ready=False)
    workload = observe(kube, workload)
    assert workload.status == Status.SCHEDULING
    assert "not Ready yet" in workload.reasons[0]["message"]
    controller_pod(standin, workload, statefulset, 0, ready=True)
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING
    assert workload.events.last().message == "1/1 replica(s) ready."


def test_a_compute_is_a_deployment_without_a_port_or_service(standin, kube, researcher_api):
    workload = dispatched(researcher_api, kube, name="crunch", kind="compute", replicas=2)
    (deployment,) = standin.objects(DEPLOYMENT)
    assert deployment["spec"]["replicas"] == 2
    assert "ports" not in deployment["spec"]["template"]["spec"]["containers"][0]
    assert "readinessProbe" not in deployment["spec"]["template"]["spec"]["containers"][0]
    assert standin.objects(SERVICE) == []
    assert workload.kind == "compute"


def test_an_inference_rolls_to_a_new_image_and_keeps_its_quota_use(standin, kube, researcher_api):
    workload = dispatched(researcher_api, kube, name="serve", kind="inference", replicas=3)
    (deployment,) = standin.objects(DEPLOYMENT)
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    (service,) = standin.objects(SERVICE)
    assert service["spec"]["type"] == "ClusterIP" and "clusterIP" not in service["spec"]
    assert service["spec"]["ports"][0]["port"] == 8000
    for index in range(3):
        controller_pod(standin, workload, deployment, index, ready=True)
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING
    assert status_word(workload.kind, workload.status, 3, 3) == "AVAILABLE 3/3"
    held = reserved(workload)
    assert held == 3 * workload.gpu

    again = submit(researcher_api, name="serve", kind="inference", replicas=3, image="nvcr.io/nvidia/pytorch:25.01-py3")
    assert again["id"] == str(workload.pk)  # the same workload, not a second service
    workload.refresh_from_db()
    assert workload.status == Status.ADMITTED and reserved(workload) == held
    run_cycle()  # nothing to admit: it is admitted already, and counted once
    assert reserved(workload) == held
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "found"
    (deployment,) = standin.objects(DEPLOYMENT)
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "nvcr.io/nvidia/pytorch:25.01-py3"
    assert deployment["spec"]["replicas"] == 3
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING and reserved(workload) == held
    assert [e.reason for e in workload.events.order_by("at", "id")][-3:] == ["RESUBMITTED", "DISPATCHED", "RUNNING"]

    submit(researcher_api, name="serve", kind="inference", replicas=2, image="nvcr.io/nvidia/pytorch:25.01-py3")
    workload.refresh_from_db()
    assert workload.replicas == 2 and reserved(workload) == held  # its 3 pods still hold their GPUs
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "found"
    (deployment,) = standin.objects(DEPLOYMENT)
    assert deployment["spec"]["replicas"] == 2
    standin.delete_pod(controller_pod(standin, workload, deployment, 2, ready=True)["metadata"]["name"],
                       namespace=workload.namespace)  # the ReplicaSet controller scales down
    workload = observe(kube, workload)
    assert reserved(workload) == 2 * workload.gpu  # freed for the next cycle


def reserved(workload: Workload) -> int:
    """The GPUs the admission's snapshot holds for the workload: its replicas reserved and those on nodes."""
    (holder,) = [h for h in snapshot.load().snapshot.holders if h.id == str(workload.pk)]
    return sum(holder.placement.values()) * holder.per_replica[0] // 100


@pytest.mark.parametrize("fields, field", [
    ({"replicas": 4}, "replicas"), ({"resources": {"gpu": 1, "cpu": "8", "memory": "16Gi"}}, "resources")])
def test_a_resubmission_that_would_need_more_quota_is_refused(standin, kube, researcher_api, fields, field):
    workload = dispatched(researcher_api, kube, name="serve", kind="inference", replicas=3)
    answer = researcher_api.post("/api/workloads/", body(name="serve", kind="inference", **{"replicas": 3, **fields}),
                                 format="json")
    assert answer.status_code == 400 and answer.json()["field"] == field, answer.json()
    workload.refresh_from_db()
    assert workload.replicas == 3 and workload.status == Status.SCHEDULING


@pytest.mark.parametrize("fields, field", [
    ({"kind": "notebook", "replicas": 2}, "replicas"), ({"kind": "training", "port": 80}, "port"),
    ({"kind": "compute", "port": 80}, "port"), ({"kind": "inference", "port": 70000}, "port"),
    ({"kind": "notebook", "exec_timeout": "1h"}, "exec_timeout"), ({"kind": "batch"}, "kind")])
def test_a_kind_the_request_cannot_be_is_a_400_naming_the_field(researcher_api, fields, field):
    answer = researcher_api.post("/api/workloads/", body(**fields), format="json")
    assert answer.status_code == 400 and answer.json()["field"] == field, answer.json()
    assert not Workload.objects.exists()


def test_usage_reports_split_by_kind(standin, kube, researcher_api, staff):
    """A notebook's and a training's pods, stored by the sync's pod watch, observed and rolled up as beat does:
    the usage report grouped by kind has a row for each, with its GPUs (and the pods count against the quota)."""
    from django.utils import timezone
    from rest_framework.test import APIClient

    from pools.cluster.interface import WatchEvent
    from pools.cluster.reflector import list_all
    from pools.fleet.sync import BackendSync
    from pools.models import Backend, Node, Pod
    from scheduling.usage import observe as usage_observe
    from scheduling.usage import rollup

    notebook = dispatched(researcher_api, kube, name="explore", kind="notebook")
    training = dispatched(researcher_api, kube, name="train", resources={"gpu": 2, "cpu": "4", "memory": "16Gi"})
    (statefulset,) = standin.objects(STATEFULSET)
    controller_pod(standin, notebook, statefulset, 0, ready=True, node=next(iter(notebook.placement)))
    job = standin.job(training.job_name, namespace=training.namespace)
    template = job["spec"]["template"]
    standin.add_pod({"metadata": {"name": f"{training.job_name}-0-abcde", "namespace": training.namespace,
                                  "labels": {**template["metadata"]["labels"],
                                             "batch.kubernetes.io/job-name": training.job_name}},
                     "spec": {**template["spec"], "nodeName": next(iter(training.placement))},
                     "status": {"phase": "Running", "startTime": "2026-12-06T00:00:00Z"}})
    ours = list_all(kube.list_pods).items
    BackendSync(Backend.objects.get(name="default"), kube).apply([], [WatchEvent("ADDED", item) for item in ours])
    assert Pod.objects.count() == 2
    now = timezone.now()
    # The world's nodes are rows without the Ready condition a real node reports (as test_usage_by_priority).
    Node.objects.filter(name__in=[*notebook.placement, *training.placement]).update(status="Ready", reasons=[])
    assert usage_observe.observe(now)["opened"] == 2
    rollup.run(now + timedelta(minutes=30))
    ops = APIClient()
    ops.force_authenticate(staff)
    answer = ops.get("/api/usage/", {"group_by": "kind", "period": "24h"})
    assert answer.status_code == 200, answer.json()
    groups = {row["group"] for row in answer.json()["rows"]}
    assert groups == {"notebook", "training"}, answer.json()


def test_the_form_the_cli_and_the_lists_offer_the_kinds(researcher_client, researcher_api, staff):
    from django.core.management import call_command
    from rest_framework.test import APIClient

    from tests.scheduling.test_submit_form import error_of, form

    answer = researcher_client.post("/workloads/new/", form(
        name="serve-form", kind="inference", port="9000", exec_timeout=""))
    assert answer.status_code == 302, answer.content.decode()[:1000]
    served = Workload.objects.get(name="serve-form")
    assert (served.kind, served.request["port"]) == ("inference", 9000)
    refused = researcher_client.post("/workloads/new/", form(name="nb", kind="notebook", replicas="2", exec_timeout=""))
    assert refused.status_code == 400 and "a notebook is one pod" in error_of(refused.content.decode(), "replicas")
    submit(researcher_api, name="train-one")
    assert [row["name"] for row in researcher_api.get("/api/workloads/", {"kind": "inference"}).json()] == \
        ["serve-form"]
    page = researcher_client.get("/workloads/", {"kind": "training"}).content.decode()
    assert "train-one" in page and "serve-form" not in page
    out = io.StringIO()
    call_command("workload", "list", "--kind", "inference", stdout=out)
    assert "serve-form" in out.getvalue() and "train-one" not in out.getvalue()
    ops = APIClient()
    ops.force_authenticate(staff)
    assert ops.get("/api/workloads/", {"kind": "batch"}).status_code == 400


def test_a_long_running_kind_is_not_ended_by_its_pools_exec_timeout(standin, kube, researcher_api, clock):
    from pools.models import Pool
    from scheduling.run.sweeps import timeouts

    # By hand: a pool's configuration write re-derives its nodes' rows (their status from the conditions they
    # report), and the world's are add_nodes' rows without the Ready condition: none would be schedulable.
    Pool.objects.filter(name="training").update(default_exec_timeout="1h")
    notebook = dispatched(researcher_api, kube, name="explore", kind="notebook")
    training = dispatched(researcher_api, kube, name="train")
    (statefulset,) = standin.objects(STATEFULSET)
    controller_pod(standin, notebook, statefulset, 0, ready=True)
    job_pod(standin, training, 0, "Running")
    assert observe(kube, notebook, now=clock.now()).status == Status.RUNNING
    assert Workload.objects.get(pk=training.pk).status == Status.RUNNING
    assert timeouts(clock.now() + timedelta(hours=2)) == [str(training.pk)]
