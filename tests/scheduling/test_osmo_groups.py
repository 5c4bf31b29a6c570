"""A group of differing tasks (issue 41, points 2, 5 and 7): what its tasks may differ in, what they must share, and
the refusals naming the place in the file and what to do instead."""

import pytest

from pools.engine import ConfigError
from scheduling.specs.formats import Ceilings, workflow_requests

GROUP = """
workflow:
  name: pair
  groups:
  - name: g
    tasks:
    - name: a
      image: ubuntu:24.04
      command: [bash, -c, "echo a"]
    - name: b
      lead: true
      image: ubuntu:24.04
      command: [bash, -c, "echo b"]
      environment: {MODE: "b's"}
      files:
      - path: /opt/b.sh
        contents: echo b
"""


def refusal(text: str, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        workflow_requests(text, pool="p", **kwargs)
    return caught.value


def test_the_lead_is_replica_zero_and_each_task_keeps_its_own_command_and_environment():
    request = workflow_requests(GROUP, pool="p").groups[0].request
    assert request.tasks == ["b", "a"] and request.replicas == 2
    assert request.files == [{"path": "/opt/b.sh", "contents": "echo b"}]
    script = request.command[2]
    assert "0) export MODE='b'\"'\"'s'; exec bash -c 'echo b' ;;" in script
    # `a` is not the lead: with ignoreNonleadStatus (OSMO's default) its end does not decide the group's.
    assert "1) bash -c 'echo a'; echo 'task a ended with' $? '; the lead decides the group'; exit 0 ;;" in script
    strict = workflow_requests(GROUP.replace("  - name: g\n", "  - name: g\n    ignoreNonleadStatus: false\n"),
                               pool="p").groups[0].request
    assert "1) exec bash -c 'echo a' ;;" in strict.command[2]


@pytest.mark.parametrize(("change", "field", "words"), [
    (("environment: {MODE: \"b's\"}", "environment: {NVIDIA_VISIBLE_DEVICES: all}"),
     "workflow.groups[0].tasks[1].environment.NVIDIA_VISIBLE_DEVICES", "through the quota"),
    (("      - path: /opt/b.sh", "      - path: /osmo/run.sh"), "workflow.groups[0].tasks[1].files[0].path",
     "/osmo is the service's"),
    (("        contents: echo b", "        contents: echo b\n        base64: true"),
     "workflow.groups[0].tasks[1].files[0].base64", "give the file as text"),
    (("    - name: a\n", "    - name: a\n      checkpoint: [{path: /c, url: s3://b/c, frequency: 60}]\n"),
     "workflow.groups[0].tasks[0].checkpoint", "save checkpoints under {{output}}"),
    (("    - name: a\n", "    - name: a\n      resources: {gpu: 1}\n"), "workflow.groups[0].tasks[0].resources",
     "write the amounts under workflow.resources"),
])
def test_refusals_name_the_place_and_what_to_do(change, field, words):
    error = refusal(GROUP.replace(*change))
    assert error.field == field and words in error.message, error.message


def test_a_groups_files_are_bounded():
    error = refusal(GROUP, ceilings=Ceilings(file_bytes=5))
    assert error.field == "workflow.groups[0].tasks" and "OSMO_MAX_GROUP_FILE_BYTES" in error.message
    assert error.extra == {"limit": "OSMO_MAX_GROUP_FILE_BYTES"}


def test_identical_tasks_run_as_written_unless_non_lead_failures_are_to_be_ignored():
    same = GROUP.replace('      command: [bash, -c, "echo b"]\n      environment: {MODE: "b\'s"}\n',
                         '      command: [bash, -c, "echo a"]\n')
    request = workflow_requests(same, pool="p").groups[0].request
    assert request.command == ["bash", "-c", "echo a"] and request.tasks == ["b", "a"]
    ignoring = same.replace("  - name: g\n", "  - name: g\n    ignoreNonleadStatus: true\n")
    assert workflow_requests(ignoring, pool="p").groups[0].request.command[:2] == ["/bin/sh", "-c"]


@pytest.mark.parametrize(("name", "words"), [("a", "another task of the group has this name"),
                                              ("$(reboot)", "is not a valid name")])
def test_task_names_are_names_and_unique_in_their_group(name, words):
    error = refusal(GROUP.replace("    - name: b\n", f"    - name: '{name}'\n"))
    assert error.field == "workflow.groups[0].tasks[1].name" and words in error.message


SHAPES = """
workflow:
  name: shapes
  resources:
    big: {gpu: 2, cpu: 4, memory: 8Gi, platform: h100}
    small: {cpu: 1, memory: 1Gi, platform: cpu}
  groups:
  - name: g
    tasks:
    - name: ctrl
      image: python:3.11-slim
      resource: small
      command: [sh, -c, "echo {{host:sim}}"]
    - name: sim
      lead: true
      image: isaac:2
      resource: big
      command: [sh, -c, "echo sim"]
    - name: view
      image: python:3.11-slim
      resource: small
      command: [sh, -c, "echo view"]
"""


def test_tasks_of_differing_shapes_are_one_member_each_shape_the_leads_first():
    workflow = workflow_requests(SHAPES, pool="p")
    lead, other = (g.request for g in workflow.groups)
    assert [g.group for g in workflow.groups] == ["g", "g"]
    assert workflow.tasks == {"g": ["sim", "ctrl", "view"]}  # the group's tasks, the lead's member first
    assert lead.gang == other.gang == [["sim"], ["ctrl", "view"]]
    assert (lead.member, lead.tasks, lead.image, lead.platform, lead.resources.gpu) == \
        (0, ["sim"], "isaac:2", "h100", 2)
    assert (other.member, other.tasks, other.image, other.platform, other.replicas) == \
        (1, ["ctrl", "view"], "python:3.11-slim", "cpu", 2)
    assert lead.command == ["sh", "-c", "echo sim"]  # the lead alone runs as written
    # Neither task of the other member is the lead: with ignoreNonleadStatus (OSMO's default) their ends do not
    # decide the group's, index 0 included.
    script = other.command[2]
    assert "0) sh -c 'echo {{host:sim}}'; echo 'task ctrl ended with' $? '; the lead decides the group'; exit 0" \
        in script
    strict = workflow_requests(SHAPES.replace("  - name: g\n", "  - name: g\n    ignoreNonleadStatus: false\n"),
                               pool="p").groups[1].request
    assert "0) exec sh -c 'echo {{host:sim}}' ;;" in strict.command[2]


@pytest.mark.django_db
def test_the_api_door_refuses_a_member_sent_alone(researcher_api):
    answer = researcher_api.post("/api/workloads/", {
        "name": "alone", "project": "vision", "image": "ubuntu:24.04", "pools": ["training"], "replicas": 1,
        "tasks": ["a"], "gang": [["a"], ["b"]], "member": 0}, format="json")
    assert answer.status_code == 400 and answer.json()["field"] == "gang"


def test_a_member_must_name_its_own_tasks_in_the_gang():
    from scheduling.specs.requests import WorkloadRequest

    for gang, member in ([["a"], ["b"]], 1), ([["a"], ["a"]], 0), ([["a"], []], 0):
        with pytest.raises(ConfigError) as caught:
            WorkloadRequest.parse({"name": "x", "image": "i", "tasks": ["a"], "gang": gang, "member": member})
        assert caught.value.field == "gang"


def test_a_group_of_more_shapes_than_jobs_it_may_run_is_refused_before_it_is_planned():
    tasks = "\n".join(f"    - {{name: t{i}, image: img{i}, command: [sh]}}" for i in range(17))
    error = refusal(f"workflow:\n  name: many\n  groups:\n  - name: g\n    tasks:\n{tasks}\n")
    assert error.field == "workflow.groups[0].tasks" and "17 different pod shapes" in error.message
    sixteen = tasks.rsplit("\n", 1)[0]
    assert len(workflow_requests(f"workflow:\n  name: many\n  groups:\n  - name: g\n    tasks:\n{sixteen}\n",
                                 pool="p").groups) == 16
