"""A gang finds its peers (issue 43, point 1): a workload of more than one replica gets a headless Service named as
its Job (owned by it, so deleted with it), pods with `subdomain` (the Job controller names each host
`<job>-<index>`), and the launchers' environment; checked on the strict stand-in API server."""

import pytest

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.conftest import body

pytestmark = pytest.mark.django_db
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def admitted(api, **fields) -> Workload:
    created = api.post("/api/workloads/", body(**fields), format="json").json()
    run_cycle()
    workload = Workload.objects.get(pk=created["id"])
    assert workload.status == Status.ADMITTED
    return workload


def test_two_replicas_get_a_headless_service_hostnames_and_the_launchers_env(standin, kube, researcher_api):
    standin.strict_namespaces = True
    workload = admitted(researcher_api, replicas=2, env={"MASTER_PORT": "29400"})
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    (job,) = standin.jobs()
    name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
    (service,) = standin.core_objects("services")
    assert service["metadata"]["name"] == name and service["metadata"]["namespace"] == namespace
    assert service["spec"] == {"clusterIP": "None", "selector": {"batch.kubernetes.io/job-name": name},
                               "publishNotReadyAddresses": True}
    assert service["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    spec = job["spec"]["template"]["spec"]
    assert spec["subdomain"] == name  # with the Job's `<job>-<index>` hostnames: `<job>-0.<job>` resolves
    env = {item["name"]: item.get("value", item.get("valueFrom")) for item in spec["containers"][0]["env"]}
    index = {"fieldRef": {"fieldPath": COMPLETION_INDEX}}
    assert env["MASTER_ADDR"] == env["PET_MASTER_ADDR"] == f"{name}-0.{name}"
    assert env["MASTER_PORT"] == "29400" and env["PET_MASTER_PORT"] == "29500"  # the user's own value stays
    assert env["WORLD_SIZE"] == env["PET_NNODES"] == "2"
    assert env["RANK"] == env["NODE_RANK"] == env["PET_NODE_RANK"] == index
    workload.refresh_from_db()
    assert f"{name}-<index>.{name}" in workload.events.last().message

    kube.delete_job(namespace, name)  # the garbage collector takes the Service with its owner
    assert standin.core_objects("services") == []


def test_one_replica_gets_no_service_nor_peers_env(standin, kube, researcher_api):
    workload = admitted(researcher_api, replicas=1)
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    (job,) = standin.jobs()
    assert standin.core_objects("services") == []
    spec = job["spec"]["template"]["spec"]
    assert "subdomain" not in spec
    assert "MASTER_ADDR" not in {item["name"] for item in spec["containers"][0].get("env") or []}


def test_the_standin_refuses_a_service_a_real_server_refuses(standin, kube):
    from pools.cluster import ClusterError
    from pools.cluster.kinds import SERVICE

    for spec, field in [({"clusterIP": "None", "type": "NodePort"}, "spec.clusterIPs[0]"),
                        ({"selector": {"a": "b"}}, "spec.ports"),
                        ({"ports": [{"port": 80}, {"port": 81}]}, "spec.ports[0].name"),
                        ({"ports": [{"name": "a", "port": 70000}]}, "spec.ports[0].port")]:
        with pytest.raises(ClusterError) as caught:
            kube.create_object(SERVICE, {"metadata": {"name": "svc"}, "spec": spec}, namespace="default")
        assert caught.value.status == 422 and field in caught.value.message
    with pytest.raises(ClusterError) as caught:  # a Service's name is a DNS-1035 label: a letter first
        kube.create_object(SERVICE, {"metadata": {"name": "1svc"}, "spec": {"clusterIP": "None"}},
                           namespace="default")
    assert caught.value.status == 422 and "DNS-1035" in caught.value.message


def test_a_native_request_carries_files_written_from_a_configmap_the_job_owns(standin, kube, researcher_api):
    refused = researcher_api.post("/api/workloads/", body(files=[{"path": "relative.sh", "contents": "x"}]),
                                  format="json")
    assert refused.status_code == 400 and refused.json()["field"] == "files[0]"
    workload = admitted(researcher_api, files=[{"path": "/opt/run.sh", "contents": "echo hi"}])
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    (job,) = standin.jobs()
    (config,) = standin.core_objects("configmaps")
    assert config["data"] == {"file-0": "echo hi"}
    assert config["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    mounts = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "osmo-files", "mountPath": "/opt/run.sh", "subPath": "file-0", "readOnly": True} in mounts
