"""OSMO workflow files and gpuctl job files as native requests (pure: no database)."""

import pytest

from pools.engine import ConfigError
from scheduling.specs.formats import gpuctl_request, workflow_requests

GIB = 1024 ** 3

SPEC = """
version: 2
workflow:
  name: {{ name }}
  resources:
    default: {cpu: 2, gpu: 1, memory: 8Gi, storage: 20Gi}
    gang: {cpu: 16, gpu: 8, memory: 256Gi, platform: h100, topology: [{key: rack, requirementType: preferred}]}
  timeout: {exec_timeout: 4h, queue_timeout: 1d}
  tasks:
  - name: prep
    image: ubuntu:24.04
    command: [bash, -c]
    args: ["echo {{ dataset }}"]
    environment: {MODE: fast}
    exitActions: {RESCHEDULE: "137"}
  groups:
  - name: train
    tasks:
    - {name: w0, image: "nvcr.io/nvidia/pytorch:24.05-py3", command: [python, train.py], resource: gang, lead: true}
    - {name: w1, image: "nvcr.io/nvidia/pytorch:24.05-py3", command: [python, train.py], resource: gang}
default-values:
  name: demo
  dataset: mnist
"""


def refusal(function, *args, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        function(*args, **kwargs)
    return caught.value


def test_it_turns_each_group_into_one_gang_and_each_top_level_task_into_its_own_group():
    workflow = workflow_requests(SPEC, pool="training", priority="low", set_variables=["dataset=imagenet"])
    assert workflow.name == "demo"
    assert [g.group for g in workflow.groups] == ["train", "prep-group"]
    train, prep = (g.request for g in workflow.groups)
    assert train.replicas == 2 and train.platform == "h100" and train.pools == ["training"]
    assert (train.resources.gpu, train.resources.cpu, train.resources.memory) == (8, 16_000, 256 * GIB)
    assert train.topology[0].requirement == "preferred" and train.priority.value == "low"
    assert prep.replicas == 1 and prep.args == ["echo imagenet"] and prep.env == {"MODE": "fast"}
    assert prep.exec_timeout == "4h" and prep.exit_actions == {"RESCHEDULE": "137"}
    assert prep.workflow == "demo" and prep.variables["dataset"] == "imagenet"


@pytest.mark.parametrize(("change", "field"), [
    (("    environment: {MODE: fast}", "    credentials: {s3: key}"), "workflow.tasks[0].credentials.s3"),
    (("    environment: {MODE: fast}", "    files: [{path: /a, localpath: a.sh}]"),
     "workflow.tasks[0].files[0].localpath"),
    (("    environment: {MODE: fast}", "    checkpoint: {path: /c}"), "workflow.tasks[0].checkpoint"),
    (("    environment: {MODE: fast}", "    inputs: [{task: train}]"), "workflow.tasks[0].inputs[0].task"),
    (("    environment: {MODE: fast}", "    enviroment: {MODE: fast}"), "workflow.tasks[0].enviroment"),
    (("  timeout:", "  retries: 3\n  timeout:"), "workflow.retries"),
    (("platform: h100,", "platform: h100, nodesExcluded: [n1],"), "workflow.resources.gang.nodesExcluded"),
    (("resource: gang", "resource: nope"), "workflow.groups[0].tasks[0].resource"),
])
def test_it_refuses_what_it_does_not_run_naming_the_place(change, field):
    error = refusal(workflow_requests, SPEC.replace(*change), pool="training")
    assert error.field == field, error.message
    assert error.message.startswith(field)


def test_it_names_a_bad_quantity_and_an_undefined_variable_and_malformed_yaml():
    assert refusal(workflow_requests, SPEC.replace("gpu: 1,", "gpu: lots,"),
                   pool="p").field == "workflow.resources.default.gpu"
    undefined = refusal(workflow_requests, SPEC.replace("{{ dataset }}", "{{ missing }}"), pool="p")
    assert "'missing' is undefined" in undefined.message and undefined.field == "file"
    assert "at line 4, column 1" in refusal(workflow_requests, "workflow:\n  name: x\n  tasks: [\n", pool="p").message
    assert refusal(workflow_requests, SPEC, pool="p", set_variables=["novalue"]).field == "set_variables[0]"
    assert refusal(workflow_requests, SPEC, pool="p", priority="URGENT").field == "priority"


JOB = """kind: training
version: v0.1
job: {name: sft, priority: high}
environment:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  command: torchrun
  args: ["train.py", "--epochs", 3]
  env: [{name: NCCL_DEBUG, value: INFO}]
resources: {pool: training, gpu: 4, gpu-type: H100, cpu: 32, memory: 256Gi}
storage: {workdirs: [{path: /data}]}
"""


def test_a_gpuctl_job_becomes_a_request_with_gpu_type_as_written_in_its_docs():
    request = gpuctl_request(JOB)
    assert (request.name, request.priority.value, request.pools) == ("sft", "high", ["training"])
    assert request.command == ["torchrun"] and request.args == ["train.py", "--epochs", "3"]
    assert request.env == {"NCCL_DEBUG": "INFO"} and request.mounts == ["/data"]
    assert request.variables == {"GPU_TYPE": "H100"} and request.resources.gpu == 4
    assert gpuctl_request(JOB.replace("gpu-type", "gpuType")).variables == {"GPU_TYPE": "H100"}
    assert gpuctl_request(JOB.replace("priority: high", "priority: medium")).priority.value == "normal"


def test_gpuctl_files_are_refused_where_gpuctl_would_drop_or_misread_them():
    assert refusal(gpuctl_request, JOB.replace("kind: training", "kind: batch")).field == "kind"
    notebook = JOB.replace("kind: training", "kind: notebook")
    assert refusal(gpuctl_request, notebook + "service: {port: 8888, replicas: 2}\n").field == "service.replicas"
    assert refusal(gpuctl_request, notebook + "service: {ports: 8888}\n").field == "service.ports"


def test_gpuctl_notebooks_inferences_and_computes_become_requests_of_their_kind():
    notebook = gpuctl_request(JOB.replace("kind: training", "kind: notebook") + "service: {port: 8080}\n")
    assert (notebook.kind.value, notebook.port, notebook.replicas) == ("notebook", 8080, 1)
    inference = gpuctl_request(JOB.replace("kind: training", "kind: inference") + "service: {replicas: 3}\n")
    assert (inference.kind.value, inference.service_port, inference.replicas) == ("inference", 8000, 3)
    compute = gpuctl_request(JOB.replace("kind: training", "kind: compute"))
    assert (compute.kind.value, compute.service_port) == ("compute", None)
    assert refusal(gpuctl_request, JOB.replace("kind: training", "kind: compute") + "service: {port: 80}\n"
                   ).field == "service.port"
    typo = refusal(gpuctl_request, JOB.replace("gpu: 4", "gpus: 4"))
    assert typo.field == "resources.gpus" and "gpuctl would silently drop it" in typo.message
    assert refusal(gpuctl_request, JOB.replace("gpu: 4", "gpu: 4, gpuShare: 2")).field == "resources.gpuShare"
    assert refusal(gpuctl_request, JOB.replace("name: sft", "name: ''")).field == "job.name"
    assert refusal(gpuctl_request, JOB.replace("priority: high", "priority: urgent")).field == "job.priority"
