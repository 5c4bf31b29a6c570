"""Right words, right units (issue 24, point 2): reason messages name the GPU type of the workload's platform,
not the pool's most common one; reason details, the request and KAI's queue figures answer in the API's units
(GPUs, CPU cores, memory bytes) while admission keeps hundredths and millicores inside; the schema says so."""

import pytest

from pools.inventory.jobs import podgroup_facts
from scheduling.decisions.admission import Node, Pool, Quota, Snapshot, Workload, decide, gpu_type, shown_details
from scheduling.run.cycle import run_cycle
from tests.scheduling.conftest import add_nodes, body, project

GIB = 1024 ** 3


def test_a_platform_is_named_by_its_own_gpu_type_not_the_pools_most_common():
    nodes = {"h100": [Node("b/h1", "h1", (800, 64_000, GIB))],
             "gb200": [Node(f"b/g{i}", f"g{i}", (400, 64_000, GIB)) for i in range(3)]}
    pool = Pool("training", platforms=nodes, gpu_types={"h100": "H100", "gb200": "GB200"},
                projects={"vision": Quota((6400, None, None))})
    ask = Workload("w", "vision", "research", (100, 1000, GIB), 186, False, 1, 0.0, [("training", "h100")])
    (reason,) = decide(Snapshot({"training": pool}), [ask]).reasons["w"]
    assert "186 of 64 guaranteed" not in reason.message  # it asks 186 against 0 in use: "0 of 64"
    assert "guaranteed H100 GPUs" in reason.message and "GB200" not in reason.message


def test_the_gpu_type_is_the_model_word_most_common_first():
    assert gpu_type({"NVIDIA-H100-80GB-HBM3": 3}) == "H100"
    assert gpu_type({"NVIDIA-A100-SXM4-80GB": 1, "NVIDIA-H100-80GB-HBM3": 2, "": 5}) == "H100/A100"
    assert gpu_type([]) == ""


def test_reason_details_leave_admission_in_gpus_cores_and_bytes():
    quota = {"unit": "project", "name": "vision", "resource": "gpu", "deserved": 6400, "limit": -1, "in_use": 150,
             "in_use_guaranteed": 100, "requested": 18600, "idle_gpus": 800}
    assert shown_details(quota) == {**quota, "deserved": 64, "limit": -1, "in_use": 1.5, "in_use_guaranteed": 1,
                                    "requested": 186, "idle_gpus": 8}
    cpu = shown_details({"resource": "cpu", "deserved": 500, "limit": 4000, "in_use": None, "idle_gpus": 0})
    assert (cpu["deserved"], cpu["limit"], cpu["in_use"], cpu["idle_gpus"]) == (0.5, 4, None, 0)
    capacity = shown_details({"platform": "h100", "per_replica": [400, 16_000, 128 * GIB],
                              "most_free": {"node": "n1", "gpu": 200, "cpu": 1500, "memory": GIB}})
    assert capacity["per_replica"] == [4, 16, 128 * GIB]
    assert capacity["most_free"] == {"node": "n1", "gpu": 2, "cpu": 1.5, "memory": GIB}


def test_kais_queue_figures_are_read_in_cores_and_bytes():
    podgroup = {"status": {"schedulingConditions": [{"type": "UnschedulableOnNodePool", "transitionID": "1",
                                                     "reasons": [{"reason": "OverLimit", "message": "over", "details": {
                                                         "queueDetails": {
                                                             "name": "vision",
                                                             "queueAllocatedResources": {"gpu": 8, "cpu": 16000,
                                                                                         "memory": 68719.477},
                                                             "queueResourceLimits": {"gpu": -1, "cpu": -1,
                                                                                     "memory": -1}}}}]}]}}
    figures = podgroup_facts(podgroup)["details"]
    assert figures["queueAllocatedResources"] == {"gpu": 8, "cpu": 16, "memory": 68_719_477_000}
    assert figures["queueResourceLimits"] == {"gpu": -1, "cpu": -1, "memory": -1}


@pytest.mark.django_db
def test_the_api_answers_reasons_and_the_request_in_gpus_and_cores(researcher_api):
    add_nodes("training", "gb200", 4, gpus=4, product="NVIDIA-GB200", prefix="gb")  # the pool's most common type
    project("vision", pools={"training": {"deserved": 4, "limit": 12}}, users=["researcher"],
            default_pools=["training"])
    for i in range(4):
        researcher_api.post("/api/workloads/", body(name=f"fill-{i}", resources={"gpu": 1}), format="json")
    run_cycle()
    waiting = researcher_api.post("/api/workloads/", body(name="waits", resources={"gpu": 2, "cpu": "500m"}),
                                  format="json").json()
    run_cycle()
    shown = researcher_api.get(f"/api/workloads/{waiting['id']}/").json()
    (reason,) = shown["reasons"]
    assert reason["message"].startswith("Project vision has 4 of 4 guaranteed H100 GPUs in use")
    details = reason["details"]
    assert (details["deserved"], details["in_use_guaranteed"], details["requested"]) == (4, 4, 2)
    assert details["idle_gpus"] == 12 + 16  # the second H100 node's 8 (4 taken) and the GB200 nodes'
    assert shown["request"]["resources"]["cpu"] == 0.5 and shown["resources"]["cpu"] == 0.5
    dry = researcher_api.post("/api/workloads/?dry_run=1", body(name="dry", resources={"gpu": 2, "cpu": "1500m"}),
                              format="json").json()
    assert dry["request"]["resources"]["cpu"] == 1.5
    assert dry["admission"]["reasons"][0]["details"]["requested"] == 2


@pytest.mark.django_db
def test_the_schema_gives_every_reason_figure_its_unit(researcher_api):
    components = researcher_api.get("/api/schema/?format=json").json()["components"]["schemas"]
    details = components["ReasonDetails"]["properties"]
    for key in ("deserved", "limit", "in_use", "in_use_guaranteed", "requested"):
        assert "GPUs, CPU cores or memory bytes" in details["resource"]["description"]
        assert "resource's unit" in details[key]["description"], key
    assert "GPUs" in details["idle_gpus"]["description"]
    assert "[GPUs, CPU cores, memory bytes]" in details["per_replica"]["description"]
    most_free = components["MostFree"]["properties"]
    assert "cores" in most_free["cpu"]["description"] and "Bytes" in most_free["memory"]["description"]
    assert "CPU cores" in components["WorkloadDetail"]["properties"]["request"]["description"]
