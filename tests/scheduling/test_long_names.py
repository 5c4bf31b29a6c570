"""A pool, platform and project with the longest and oddest names the configuration accepts, end to end against
the stand-in through the real client: dispatch creates the namespace and the Job with names and labels Kubernetes
accepts, the full names kept in annotations, and the sync reads the pod of the Job back as the workload's, in its
pool, so the workload runs."""

import pytest

from pools.engine import kube_names
from pools.fleet.sync import BackendSync
from pools.models import Backend, Pod
from pools.quotas.documents import default_namespace
from scheduling.models import Status, Workload
from scheduling.run import follow
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.engine.test_kube_names import is_dns_label, is_label_value
from tests.kube_objects import make_node, make_pod
from tests.scheduling.conftest import body
from tests.support.long_names import PLATFORM, POOL, PREFIX, PROJECT, PROJECT_LABEL

pytestmark = pytest.mark.django_db


def test_a_workload_whose_names_are_too_long_for_kubernetes_is_dispatched_and_followed(standin, kube,
                                                                                        researcher_api, long_names):
    standin.strict_namespaces = True
    created = researcher_api.post("/api/workloads/", body(project=PROJECT, pools=[POOL]), format="json")
    assert created.status_code == 201, created.json()
    run_cycle()
    assert dispatch(created.json()["id"], clusters=lambda backend: kube) == "created"
    workload = Workload.objects.get(pk=created.json()["id"])
    assert workload.status == Status.SCHEDULING

    assert workload.namespace == default_namespace(PROJECT) and is_dns_label(workload.namespace)
    namespace = standin.namespace(workload.namespace)["metadata"]
    assert namespace["labels"] == {f"{PREFIX}managed-by": "osmo-pools",
                                   f"{PREFIX}project": PROJECT_LABEL}
    assert namespace["annotations"] == {f"{PREFIX}project": PROJECT}

    (job,) = standin.jobs()
    template = job["spec"]["template"]["metadata"]
    for labels in (job["metadata"]["labels"], template["labels"]):
        assert all(is_label_value(value) for value in labels.values()), labels
    for metadata in (job["metadata"], template):
        assert [kube_names.full_value(metadata, PREFIX + key) for key in ("project", "pool", "platform")] == [
            PROJECT, POOL, PLATFORM]

    # The Job controller's pod, bound to the pool's node: the sync keeps it in the pool and the workload runs.
    name = job["metadata"]["name"]
    standin.add_node(make_node("long-000", gpus=8))
    standin.add_pod(make_pod(f"{name}-0-abcde", "long-000", namespace=workload.namespace, gpus=1,
                             labels={**template["labels"], "batch.kubernetes.io/job-name": name},
                             annotations={**template["annotations"], "batch.kubernetes.io/job-completion-index": "0"}))
    BackendSync(Backend.objects.get(name="default"), kube).run(seconds=0)
    assert Pod.objects.get(name=f"{name}-0-abcde").pool == POOL
    follow.observe()
    workload.refresh_from_db()
    assert workload.status == Status.RUNNING
