"""The submit form's boxes as a request body and back (scheduling.specs.form_fields, pure)."""

import pytest

from pools.engine import ConfigError
from scheduling.specs import form_fields
from scheduling.specs.requests import WorkloadRequest


def test_words_split_as_a_shell_does_and_an_open_quote_names_the_field():
    assert form_fields.words("python train.py --note 'two words' \"x y\"", "args") == [
        "python", "train.py", "--note", "two words", "x y"]
    assert form_fields.words("", "command") == []
    with pytest.raises(ConfigError) as refused:
        form_fields.words("echo 'open", "command")
    assert refused.value.field == "command" and "No closing quotation" in refused.value.message


def test_env_lines_skip_blanks_and_comments_and_refuse_a_line_without_equals_or_a_name_twice():
    assert form_fields.env_lines("A=1\n\n# note\nB= spaced = value \nC=") == {"A": "1", "B": " spaced = value ",
                                                                            "C": ""}
    with pytest.raises(ConfigError, match="env: line 2: expected NAME=value"):
        form_fields.env_lines("A=1\nnonsense")
    with pytest.raises(ConfigError, match="line 2: A is set twice") as twice:
        form_fields.env_lines("A=1\nA=2")
    assert twice.value.field == "env.A"


def test_blank_boxes_are_left_out_of_the_body_so_the_pipelines_defaults_apply():
    body = form_fields.body({"name": "n", "image": "i", "project": "", "pools": ["", "a", "", "b"], "platform": "",
                             "command": "  ", "env": "", "replicas": None, "gpu": "", "cpu": " 2 ", "priority": ""})
    assert body == {"name": "n", "image": "i", "pools": ["a", "b"], "resources": {"cpu": "2"}}


def test_a_stored_request_fills_the_boxes_and_they_give_the_same_request_back():
    request = WorkloadRequest.parse({
        "name": "train", "project": "vision", "pools": ["training", "dev"], "platform": "h100", "image": "img:1",
        "command": ["python", "train.py"], "args": ["--note", "it's two"], "env": {"A": "x=y"}, "replicas": 3,
        "resources": {"gpu": 2, "cpu": "1500m", "memory": "16Gi", "storage": "1Ti"}, "priority": "low",
        "exec_timeout": "2h", "queue_timeout": "1d"}).document()
    shown = {**request, "resources": {**request["resources"], "cpu": 1.5}}  # as bodies shows it: CPU in cores
    assert form_fields.covered(shown)
    fields = form_fields.fields_of(shown)
    assert (fields["memory"], fields["storage"], fields["cpu"], fields["gpu"]) == ("16Gi", "1Ti", "1.5", "2")
    again = WorkloadRequest.parse(form_fields.body(fields)).document()
    assert again == request


def test_a_request_with_fields_the_boxes_do_not_hold_is_given_as_a_body_without_its_workflow():
    request = WorkloadRequest.parse({"name": "t", "image": "i", "exit_actions": {"RESCHEDULE": "3"},
                                     "workflow": "flow-1", "group": "t"}).document()
    assert not form_fields.covered(request)
    document = form_fields.rerun_document(request)
    assert document["exit_actions"] == {"RESCHEDULE": "3"}
    assert "workflow" not in document and "group" not in document and "storage" not in document["resources"]
    assert WorkloadRequest.parse(document).exit_actions == {"RESCHEDULE": "3"}


@pytest.mark.parametrize(("field", "box"), [("resources.gpu", "gpu"), ("env.HF_TOKEN", "env"), ("pools", "pools"),
                                            ("variables.USER_CPU", "cpu"), ("name", "name"), ("resources", None),
                                            ("submitter", None), ("", None), (None, None)])
def test_a_refusal_is_shown_beside_the_box_of_the_field_it_names(field, box):
    assert form_fields.form_field(field) == box
