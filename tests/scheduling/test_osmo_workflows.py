"""OSMO workflows as OSMO's users write them (issue 41): files in the shape of OSMO's tutorials
(tests/scheduling/osmo_cookbook/) submitted through `POST /api/pool/{pool}/workflow`, dispatched to the strict
stand-in API server and run to COMPLETED, with the pods' specs, the headless Service and the ConfigMap of `files`
checked; a torchrun-shaped group of 2 x 8 GPUs is one gang, admitted whole or not at all."""

from pathlib import Path

import pytest

from scheduling.models import Status, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from scheduling.specs.osmo_tokens import DATA_DIR
from tests.scheduling.conftest import SHARED
from tests.support.commands import run
from tests.support.lifecycle import job_status, observe, pod

pytestmark = pytest.mark.django_db
FILES = Path(__file__).parent / "osmo_cookbook"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def submit(api, name: str, query: str = "", variables=()) -> dict:
    response = api.post(f"/api/pool/training/workflow{query}", {"file": (FILES / name).read_text(),
                                                                "set_variables": list(variables)}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def groups(workflow: str) -> list[Workload]:
    return list(Workload.objects.select_related("pool").filter(workflow=workflow).order_by("group"))


def dispatched(kube, workflow: str) -> list[Workload]:
    run_cycle()
    rows = groups(workflow)
    for row in rows:
        assert row.status == Status.ADMITTED, (row.group, row.status, row.reasons)
        assert dispatch(row.pk, clusters=lambda backend: kube) == "created"
    return groups(workflow)


def complete(standin, kube, workload: Workload) -> Workload:
    """Play the kubelet and the Job controller: every replica ends well (the lead first), the Job is Complete."""
    for index in range(workload.replicas):
        pod(standin, workload, index, "Succeeded", exit_code=0)
    job_status(standin, workload, "Complete", "CompletionsReached")
    return observe(kube, workload)


def user_container(job: dict) -> dict:
    return job["spec"]["template"]["spec"]["containers"][0]


def test_hello_world_and_parallel_tasks_run_to_completed(standin, kube, researcher_api):
    standin.strict_namespaces = True
    for name in ("hello_world.yaml", "parallel_tasks.yaml"):
        workflow = submit(researcher_api, name)["name"]
        for workload in dispatched(kube, workflow):
            job = standin.job(workload.job_name, namespace=workload.namespace)
            spec = job["spec"]["template"]["spec"]
            assert {"name": "osmo-data", "emptyDir": {}} in spec["volumes"]  # where {{output}} points
            assert {"name": "osmo-data", "mountPath": DATA_DIR} in user_container(job)["volumeMounts"]
            assert "successPolicy" not in job["spec"] and "subdomain" not in spec  # one task: no peers
            assert complete(standin, kube, workload).status == Status.COMPLETED
    (left,) = [w for w in groups("side-by-side-1") if w.group == "left-group"]
    assert left.request["args"] == ["echo left > /osmo/data/output/left.txt"]
    answer = researcher_api.get("/api/workflow/side-by-side-1").json()
    assert answer["status"] == "COMPLETED"


def test_a_group_with_a_lead_runs_its_differing_tasks_as_one_job(standin, kube, researcher_api):
    workflow = submit(researcher_api, "group_tasks.yaml")["name"]
    (workload,) = dispatched(kube, workflow)
    assert (workload.replicas, workload.request["tasks"]) == (3, ["coordinator", "helper-a", "helper-b"])
    (job,) = standin.jobs()
    assert job["spec"]["completions"] == 3 and job["spec"]["completionMode"] == "Indexed"
    # The lead is replica 0 and decides the group's end; the helpers' own ends do not.
    assert job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    command = user_container(job)["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    script = command[2]
    assert "0) exec sh -c 'echo coordinating; sleep 5' ;;" in script
    assert "1) export PART=a; sh -c 'echo helping with part a'; " in script and "exit 0 ;;" in script
    assert "2) export PART=b; " in script
    (service,) = standin.core_objects("services", namespace=workload.namespace)
    assert service["metadata"]["name"] == job["spec"]["template"]["spec"]["subdomain"] == workload.job_name
    assert complete(standin, kube, workload).status == Status.COMPLETED


def test_group_communication_reaches_the_lead_by_host_and_gets_its_files(standin, kube, researcher_api):
    workflow = submit(researcher_api, "group_communication.yaml")["name"]
    (workload,) = dispatched(kube, workflow)
    job = standin.job(workload.job_name, namespace=workload.namespace)
    name = workload.job_name
    (config,) = standin.core_objects("configmaps", namespace=workload.namespace)
    assert config["metadata"]["name"] == name
    assert config["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    data = config["data"]
    mounts = {m["mountPath"]: m for m in user_container(job)["volumeMounts"] if m["name"] == "osmo-files"}
    assert set(mounts) == {"/scripts/listen.sh", "/scripts/greeting.txt", "/scripts/call.sh"}
    call = data[mounts["/scripts/call.sh"]["subPath"]]
    # {{host:listener}}: the lead's stable name through the headless Service; {{output}}: OSMO's directory.
    assert f"until nslookup {name}-0.{name}; do sleep 1; done" in call
    assert f"nc {name}-0.{name} 24831 > /osmo/data/output/heard.txt" in call
    assert data[mounts["/scripts/greeting.txt"]["subPath"]] == "hello over the pod network"
    assert complete(standin, kube, workload).status == Status.COMPLETED
    kube.delete_job(workload.namespace, name)  # what the Job owned goes with it
    assert standin.core_objects("configmaps") == [] and standin.core_objects("services") == []


def test_a_templated_file_gets_its_workflow_id_when_the_job_is_written(standin, kube, researcher_api):
    dry = researcher_api.post("/api/pool/training/workflow?dry_run=true",
                              {"file": (FILES / "templated_file.yaml").read_text()}, format="json").json()
    assert "{{workflow_id}}" in dry["spec"]  # not allocated yet: shown as the token
    workflow = submit(researcher_api, "templated_file.yaml", variables=["greeting=hello"])["name"]
    assert workflow == "templated-report-1"
    (workload,) = dispatched(kube, workflow)
    (config,) = standin.core_objects("configmaps")
    assert config["data"]["file-0"] == \
        'echo "run templated-report-1 says hello" | tee /osmo/data/output/report.txt\n'
    assert complete(standin, kube, workload).status == Status.COMPLETED


def test_a_torchrun_group_of_two_eight_gpu_tasks_is_one_gang_bound_together_or_not_at_all(standin, kube,
                                                                                          researcher_api):
    # One of training's two 8-GPU nodes is taken: the gang needs both, so neither of its pods is placed.
    blocker = researcher_api.post("/api/workloads/", {
        "name": "blocker", "project": "vision", "image": "ubuntu:24.04", "priority": "low", "pools": ["training"],
        "resources": {"gpu": 8, "cpu": "4", "memory": "16Gi"}}, format="json").json()
    run_cycle()
    assert Workload.objects.get(pk=blocker["id"]).status == Status.ADMITTED
    workflow = submit(researcher_api, "torchrun_multinode.yaml", query="?project=nlp&priority=LOW")["name"]
    run_cycle()
    (workload,) = groups(workflow)
    assert (workload.replicas, workload.gpu) == (2, 8)  # one workload: one admission decision for both tasks
    assert workload.status == Status.PENDING and not workload.placement
    assert standin.jobs() == []  # nothing written: no pod of the gang can start alone

    assert researcher_api.post(f"/api/workloads/{blocker['id']}/cancel/").json()["canceled"]
    run_cycle()
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    assert workload.status == Status.ADMITTED, (Workload.objects.get(pk=blocker["id"]).status, workload.reasons)
    assert sorted(workload.placement) == ["training-h100-000", "training-h100-001"]
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    workload.refresh_from_db()
    job = standin.job(workload.job_name, namespace=workload.namespace)
    spec = job["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert sorted(t["matchFields"][0]["values"][0] for t in terms) == ["training-h100-000", "training-h100-001"]
    assert user_container(job)["resources"]["limits"]["nvidia.com/gpu"] in (8, "8")
    env = {item["name"]: item.get("value", item.get("valueFrom")) for item in user_container(job)["env"]}
    name = workload.job_name
    assert env["MASTER_ADDR"] == f"{name}-0.{name}" and env["WORLD_SIZE"] == "2"
    assert env["NODE_RANK"] == {"fieldRef": {"fieldPath": COMPLETION_INDEX}}
    (config,) = standin.core_objects("configmaps")
    assert sum(f"--master_addr {name}-0.{name} --master_port 29400" in text for text in config["data"].values()) == 2
    assert complete(standin, kube, workload).status == Status.COMPLETED


def test_tasks_with_their_own_file_at_one_path_each_get_theirs(standin, kube, researcher_api):
    text = (FILES / "own_entrypoints.yaml").read_text()
    # As OSMO's CLI does: its dry run still carries `localpath`; the submission sends the file's contents.
    dry = researcher_api.post("/api/pool/training/workflow?dry_run=true", {"file": text}, format="json")
    assert dry.status_code == 200 and "localpath" in " ".join(dry.json()["warnings"])
    refused = researcher_api.post("/api/pool/training/workflow", {"file": text}, format="json").json()
    assert refused["field"] == "workflow.groups[0].tasks[1].files[1].localpath"
    sent = text.replace("      - localpath: helper.py\n", "      - contents: print('help')\n")
    assert researcher_api.post("/api/pool/training/workflow", {"file": sent}, format="json").status_code == 200
    (workload,) = dispatched(kube, "talker-listener-1")
    job = standin.job(workload.job_name, namespace=workload.namespace)
    name = workload.job_name
    (config,) = standin.core_objects("configmaps")
    assert config["data"] == {"file-0": f"echo talking to {name}-1.{name}\n", "file-1": "echo listening\n",
                              "file-2": "print('help')"}
    mounts = {m["mountPath"]: m.get("subPath") for m in user_container(job)["volumeMounts"]
              if m["name"] == "osmo-files"}
    assert mounts == {"/tmp/helper.py": "file-2", "/osmo/files": None}  # /tmp/entry.sh: each task its own
    script = user_container(job)["command"][2]
    assert "0) mkdir -p /tmp && cp /osmo/files/file-0 /tmp/entry.sh && exec bash /tmp/entry.sh ;;" in script
    assert "1) mkdir -p /tmp && cp /osmo/files/file-1 /tmp/entry.sh && bash /tmp/entry.sh; " in script
    assert complete(standin, kube, workload).status == Status.COMPLETED


@pytest.mark.parametrize("scheduler", ["kai", "kueue"])
def test_a_group_of_differing_tasks_is_one_gang_on_the_engines_too(standin, kube, researcher_api, scheduler):
    from pools.cluster.kinds import KAI_PODGROUP
    run("backend", "add", "default", "--simulated", "--scheduler", scheduler)  # dispatched to the stand-in below
    standin.strict_namespaces = True
    workflow = submit(researcher_api, "group_communication.yaml")["name"]
    (workload,) = dispatched(kube, workflow)  # every object accepted by the stand-in with the engines' CRDs
    (job,) = standin.jobs()
    assert job["spec"]["completions"] == 2 and job["spec"]["successPolicy"]
    assert len(standin.core_objects("services")) == len(standin.core_objects("configmaps")) == 1
    if scheduler == "kai":  # one PodGroup: KAI binds both pods or neither
        (group,) = standin.objects(KAI_PODGROUP)
        assert group["spec"]["minMember"] == 2 and group["metadata"]["name"] == workload.job_name
    else:  # one suspended Job: Kueue admits all its pods as one workload
        assert job["spec"]["suspend"] is True and "kueue.x-k8s.io/queue-name" in job["metadata"]["labels"]


def test_the_standin_refuses_a_configmap_a_real_server_refuses(standin, kube):
    from pools.cluster import ClusterError
    from pools.cluster.kinds import CONFIG_MAP

    for data, field in [({"bad/key": "x"}, "data[bad/key]"), ({"..x": "y"}, "data[..x]"),
                        ({"a": "x" * (1024 * 1024), "b": "y"}, "must have at most 1048576 bytes")]:
        with pytest.raises(ClusterError) as caught:
            kube.create_object(CONFIG_MAP, {"metadata": {"name": "files"}, "data": data}, namespace="default")
        assert caught.value.status == 422 and field in caught.value.message


def test_the_workflow_query_names_each_replica_by_its_task_the_lead_first(researcher_api):
    text = (FILES / "group_tasks.yaml").read_text().replace("      lead: true\n", "")
    text = text.replace("    - name: helper-b\n", "    - name: helper-b\n      lead: true\n")
    name = researcher_api.post("/api/pool/training/workflow", {"file": text}, format="json").json()["name"]
    (group,) = researcher_api.get(f"/api/workflow/{name}").json()["groups"]
    assert [task["name"] for task in group["tasks"]] == ["helper-b", "coordinator", "helper-a"]


def members(workflow: str) -> list[Workload]:
    return sorted(groups(workflow), key=lambda w: w.request["member"])


def test_a_group_of_two_platforms_and_images_is_one_gang_of_two_jobs_ended_by_its_lead(standin, kube,
                                                                                        researcher_api):
    from scheduling.run.stopping import stop

    standin.strict_namespaces = True
    # The A100 node is taken: the lead's member (two 1-GPU tasks) cannot start, so the robot's part, which would
    # fit on an L40S node, does not start alone either.
    blocker = researcher_api.post("/api/workloads/", {
        "name": "blocker", "project": "vision", "image": "ubuntu:24.04", "priority": "low", "pools": [SHARED],
        "platform": "a100_platform", "resources": {"gpu": 8, "cpu": "1", "memory": "1Gi"}}, format="json").json()
    run_cycle()
    assert Workload.objects.get(pk=blocker["id"]).status == Status.ADMITTED
    response = researcher_api.post(f"/api/pool/{SHARED}/workflow?project=vision",
                                   {"file": (FILES / "robot_in_the_loop.yaml").read_text()}, format="json")
    assert response.status_code == 200, response.json()
    workflow = response.json()["name"]
    run_cycle()
    lead, robot = members(workflow)
    assert (lead.request["tasks"], lead.gpu, lead.replicas) == (["model-training", "physics-sim"], 1, 2)
    assert (robot.request["tasks"], robot.gpu, robot.replicas) == (["robot-ctrl"], 0, 1)
    for row in (lead, robot):
        assert row.status == Status.PENDING and not row.placement, row.reasons
    assert robot.reasons[0]["code"] == "GANG" and "starts whole or not at all" in robot.reasons[0]["message"]
    assert standin.jobs() == []
    # The robot's part asks no GPU, yet it waits for the gang's two: its estimate is the gang's.
    shown = [researcher_api.get(f"/api/workloads/{row.pk}/").json() for row in (lead, robot)]
    assert shown[0]["estimate_basis"] == shown[1]["estimate_basis"]

    assert researcher_api.post(f"/api/workloads/{blocker['id']}/cancel/").json()["canceled"]
    run_cycle()  # one cycle: one decision for both
    lead, robot = members(workflow)
    assert (lead.status, robot.status) == (Status.ADMITTED, Status.ADMITTED), (lead.reasons, robot.reasons)
    assert (lead.platform, robot.platform) == ("a100_platform", "l40s_platform")
    for row in (lead, robot):
        assert dispatch(row.pk, clusters=lambda backend: kube) == "created"
    lead, robot = members(workflow)
    lead_job = standin.job(lead.job_name, namespace=lead.namespace)
    robot_job = standin.job(robot.job_name, namespace=robot.namespace)
    assert user_container(lead_job)["image"] == "nvcr.io/nvidia/pytorch:24.01-py3"
    assert user_container(robot_job)["image"] == "python:3.11-slim"
    assert lead_job["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100"}
    assert robot_job["spec"]["template"]["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-L40S"}
    # The lead's Job decides the group's end; the robot's part ends well whatever its command returns.
    assert lead_job["spec"]["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]}
    assert "successPolicy" not in robot_job["spec"]
    assert "exit 0" in user_container(robot_job)["command"][2]
    # Every task reaches every other by its host, whichever Job runs it.
    a, b = lead.job_name, robot.job_name
    services = {s["metadata"]["name"] for s in standin.core_objects("services", namespace=lead.namespace)}
    assert services == {a, b}
    files = {c["metadata"]["name"]: c["data"] for c in standin.core_objects("configmaps", namespace=lead.namespace)}
    train, sim = files[a]["file-0"], files[a]["file-1"]
    assert f"http://{a}-1.{a}:8080/ready" in train and f"http://{b}-0.{b}:9090/ready" in train
    assert "python3 -m http.server 8080" in sim
    assert f"http://{a}-0.{a}:8000/" in files[b]["file-0"]
    env = {item["name"]: item.get("value") for item in user_container(robot_job)["env"]}
    assert env["MASTER_ADDR"] == f"{a}-0.{a}" and env["WORLD_SIZE"] == "3" and "RANK" not in env

    # The lead completes: the robot's part is stopped and ends COMPLETED with it; the workflow completes.
    for index in range(2):
        pod(standin, lead, index, "Succeeded", node="shared-s-a100-platform-000", exit_code=0)
    pod(standin, robot, 0, "Running", node="shared-s-l40s-platform-000")
    job_status(standin, lead, "Complete", "CompletionsReached")
    assert observe(kube, lead).status == Status.COMPLETED
    run_cycle()
    robot = Workload.objects.get(pk=robot.pk)
    assert robot.stop_status == Status.COMPLETED and robot.stop_reason == "LEAD_COMPLETED"
    assert stop(robot.pk, clusters=lambda backend: kube) == "stopped"
    assert Workload.objects.get(pk=robot.pk).status == Status.COMPLETED
    assert [j["metadata"]["name"] for j in standin.jobs()] == [a]
    answer = researcher_api.get(f"/api/workflow/{workflow}").json()
    assert answer["status"] == "COMPLETED"
    (group,) = answer["groups"]
    assert [t["name"] for t in group["tasks"]] == ["model-training", "physics-sim", "robot-ctrl"]
    logs = researcher_api.get(f"/api/workflow/{workflow}/logs?task=robot-ctrl")  # the robot's member's pod
    assert f"Pod {b}-0-abcde was gone before its log could be kept" in logs.json()["detail"]


@pytest.mark.parametrize("scheduler", ["kai", "kueue"])
def test_a_group_of_two_shapes_on_the_engines(standin, kube, researcher_api, scheduler):
    from pools.cluster.kinds import KAI_PODGROUP
    run("backend", "add", "default", "--simulated", "--scheduler", scheduler)
    standin.strict_namespaces = True
    text = (FILES / "robot_in_the_loop.yaml").read_text()
    response = researcher_api.post(f"/api/pool/{SHARED}/workflow?project=vision", {"file": text}, format="json")
    if scheduler == "kueue":  # Kueue starts one Job's pods together, not several Jobs'
        assert response.status_code == 400, response.json()
        assert "Kueue" in response.json()["detail"] and standin.jobs() == []
        return
    assert response.status_code == 200, response.json()
    run_cycle()
    lead, robot = members(response.json()["name"])
    for row in (lead, robot):  # handed to KAI together, every object accepted with KAI's CRDs
        assert row.status == Status.ADMITTED
        assert dispatch(row.pk, clusters=lambda backend: kube) == "created"
    lead, robot = members(response.json()["name"])
    (group,) = standin.objects(KAI_PODGROUP)  # one PodGroup of all three pods: KAI binds them all or none
    assert group["metadata"]["name"] == lead.job_name and group["spec"]["minMember"] == 3
    for row in (lead, robot):
        job = standin.job(row.job_name, namespace=row.namespace)
        assert job["spec"]["template"]["metadata"]["annotations"]["pod-group-name"] == lead.job_name


def test_when_the_lead_fails_the_other_member_ends_failed_and_a_cancel_reaches_every_member(standin, kube,
                                                                                           researcher_api):
    from scheduling.run.stopping import stop

    text = (FILES / "robot_in_the_loop.yaml").read_text()
    first = researcher_api.post(f"/api/pool/{SHARED}/workflow?project=vision", {"file": text},
                                format="json").json()["name"]
    run_cycle()
    for row in members(first):
        assert dispatch(row.pk, clusters=lambda backend: kube) == "created"
    lead, robot = members(first)
    pod(standin, lead, 0, "Failed", node="shared-s-a100-platform-000", exit_code=3)
    job_status(standin, lead, "Failed", "BackoffLimitExceeded")
    assert observe(kube, lead).status == Status.FAILED
    run_cycle()
    robot = Workload.objects.get(pk=robot.pk)
    assert (robot.stop_status, robot.stop_reason) == (Status.FAILED, "GANG_ENDED")
    assert "Tasks model-training, physics-sim of group robot-hil ended as FAILED" in robot.stop_message
    assert stop(robot.pk, clusters=lambda backend: kube) == "stopped"
    assert researcher_api.get(f"/api/workflow/{first}").json()["status"] == "FAILED"

    # A cancel of one member (the API's, on the robot's row) ends its gang: the lead, still queued, with it.
    second = researcher_api.post(f"/api/pool/{SHARED}/workflow?project=vision", {"file": text},
                                 format="json").json()["name"]
    lead, robot = members(second)
    assert researcher_api.post(f"/api/workloads/{robot.pk}/cancel/").json()["canceled"]
    run_cycle()
    assert Workload.objects.get(pk=lead.pk).status == Status.FAILED_CANCELED
