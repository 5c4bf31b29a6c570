"""OSMO's special tokens in workflow files (issue 41, point 1): taken out of the Jinja render, filled per task,
refused as OSMO refuses them, naming the place in the file."""

import pytest

from pools.engine import ConfigError
from scheduling.specs import osmo_tokens
from scheduling.specs.formats import workflow_requests

# In the shape of OSMO's tutorials (cookbook/tutorials, Apache-2.0), written anew.
GROUP = """
version: 2
workflow:
  name: {{ name }}
  groups:
  - name: pair
    tasks:
    - name: server
      image: busybox
      lead: true
      command: [sh, -c]
      args: ["echo {{workflow_id}} > {{output}}/id.txt"]
    - name: client
      image: busybox
      command: [sh, -c]
      args: ["nc {{host:server}} 24831 > {{output}}/got.txt"]
default-values:
  name: talk
"""


def refusal(text: str, **kwargs) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        workflow_requests(text, pool="p", **kwargs)
    return caught.value


def test_tokens_pass_the_render_and_are_filled_per_task():
    workflow = workflow_requests(GROUP, pool="p")
    request = workflow.groups[0].request
    assert request.tasks == ["server", "client"]
    # The output directory is OSMO's path; the workflow ID and the host wait for the Job.
    assert "{{workflow_id}}" in workflow.rendered and "{{host:server}}" in workflow.rendered
    script = request.command[2]  # the group's tasks differ: one launcher picks each by its index
    assert "0) exec sh -c 'echo {{workflow_id}} > /osmo/data/output/id.txt'" in script
    assert "1) sh -c 'nc {{host:server}} 24831 > /osmo/data/output/got.txt'" in script
    assert osmo_tokens.OUTPUT_DIR == "/osmo/data/output" and osmo_tokens.input_dir(1) == "/osmo/data/input/1"


def test_host_of_a_task_outside_the_group_is_refused_with_its_place():
    error = refusal(GROUP.replace("{{host:server}}", "{{host:nobody}}"))
    assert error.field == "workflow.groups[0].tasks[1].args[0]"
    assert "names no task of this group" in error.message and "server, client" in error.message


def test_input_out_of_range_is_refused_with_its_place():
    error = refusal(GROUP.replace("{{output}}/got.txt", "{{input:0}}/got.txt"))
    assert error.field == "workflow.groups[0].tasks[1].args[0]"
    assert "{{input:0}} is out of range: the task has 0 inputs" in error.message


def test_input_of_an_unnamed_task_is_refused():
    error = refusal(GROUP.replace("{{output}}/got.txt", "{{input:prep}}/got.txt"))
    assert error.field == "workflow.groups[0].tasks[1].args[0]" and "names no input of this task" in error.message


def test_set_cannot_override_a_token():
    error = refusal(GROUP, set_variables=["name=x", "workflow_id=mine"])
    assert error.field == "set_variables[1]" and "cannot override" in error.message


def test_fill_replaces_only_the_tokens_given():
    manifest = {"args": ["{{workflow_id}} {{host:server}} {{host:other}}"], "n": 3}
    filled = osmo_tokens.fill(manifest, {"{{workflow_id}}": "talk-4", "{{host:server}}": "job-0.svc"})
    assert filled == {"args": ["talk-4 job-0.svc {{host:other}}"], "n": 3}
