"""OSMO's special tokens (pure: no Django; docs/api/compatibility.md, "Special tokens").

`{{output}}`, `{{input:N}}`, `{{input:TASK}}`, `{{host:TASK}}` and `{{workflow_id}}` are values the service sets,
not template variables: as OSMO does, they are taken out of the text before the Jinja render (so `{{host:master}}`
is no syntax error and `{{output}}` no undefined variable) and put back as written, then filled per task once the
file is read:

- `{{output}}` and `{{input:...}}` become the task's directories in the pod (OSMO's own paths, under `/osmo/data`),
  checked against the task's `inputs` (an index out of range or a task not among them is refused, naming the place);
- `{{host:TASK}}` is checked to name a task of the same group and stays as written until the Job is written
  (`fill`): the pod's stable DNS name depends on the Job's name, which the attempt sets;
- `{{workflow_id}}` stays as written until the Job is written too: the ID is allocated when the workflow is saved,
  so a dry run shows the token itself.

`--set` cannot override a token (refused); a `default-values` entry of a token's name never reaches the text.
"""

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pools.engine import ConfigError

DATA_DIR = "/osmo/data"
OUTPUT_DIR = f"{DATA_DIR}/output"
INPUT_DIR = f"{DATA_DIR}/input"
WORKFLOW_ID = "{{workflow_id}}"
NAMES = ("workflow_id", "output", "input", "host")

# A token as OSMO finds it before the render (no spaces inside the braces there); `uuid` is OSMO's too.
_RAW = re.compile(r"{{(workflow_id|output|uuid|input:[^}]+|host:[^}]+)}}")
# A token in a read value (spaces inside the braces allowed, as OSMO's per-task substitution allows them).
_TOKEN = re.compile(r"{{ *(workflow_id|output|uuid|input:[^}]+|host:[^}]+?) *}}")
_VARIABLE = "_osmo_token_{}"


def input_dir(index: int) -> str:
    """Where the task's `index`-th input is, in the pod."""
    return f"{INPUT_DIR}/{index}"


def host_token(task: str) -> str:
    return f"{{{{host:{task}}}}}"


def protect(text: str) -> tuple[str, dict[str, str]]:
    """`text` with every token replaced by a variable of the render that writes the token back unchanged."""
    values: dict[str, str] = {}

    def replace(match: re.Match) -> str:
        name = _VARIABLE.format(len(values))
        values[name] = match.group(0)
        return "{{ " + name + " }}"

    return _RAW.sub(replace, text), values


def check_not_set(names: Iterable[str], field: str) -> None:
    """`--set NAME=...` of a token's name: refused (OSMO sets these values itself)."""
    for index, name in enumerate(names):
        base = name.split(":", 1)[0].strip()
        if base in NAMES or base == "uuid":
            raise ConfigError(f"{field}[{index}]: {name} is one of OSMO's special tokens ({{{{{base}...}}}}), set by "
                              "the service; --set cannot override it. Choose another variable name",
                              field=f"{field}[{index}]")


def _task_inputs(inputs: Any) -> list[str | None]:
    """Each input of a task: the task it names (`- task: X`), else None (a url or a dataset)."""
    found = []
    for item in inputs if isinstance(inputs, list) else []:
        named = item.get("task") if isinstance(item, dict) else None
        found.append(str(named) if named is not None else None)
    return found


def resolve(task: dict, where: str, group_tasks: list[str]) -> dict:
    """The task's values with `{{output}}` and `{{input:...}}` replaced by its directories, `{{host:TASK}}` checked
    against `group_tasks`; refusals name the field (`workflow.groups[0].tasks[1].args[2]`)."""
    inputs = _task_inputs(task.get("inputs"))

    def one(match: re.Match, place: str) -> str:
        token = match.group(1)
        kind, _, argument = token.partition(":")
        argument = argument.strip()
        if kind == "output":
            return OUTPUT_DIR
        if kind == "workflow_id":
            return WORKFLOW_ID
        if kind == "uuid":
            raise ConfigError(f"{place}: {{{{uuid}}}} is not a token we fill; use {{{{workflow_id}}}}", field=place)
        if kind == "host":
            if argument not in group_tasks:
                raise ConfigError(f"{place}: {{{{host:{argument}}}}} names no task of this group (its tasks: "
                                  f"{', '.join(group_tasks)}); a task reaches only the tasks of its own group",
                                  field=place)
            return host_token(argument)
        if argument.isascii() and argument.isdigit():
            if int(argument) >= len(inputs):
                count = f"{len(inputs)} input{'s' if len(inputs) != 1 else ''}"
                raise ConfigError(f"{place}: {{{{input:{argument}}}}} is out of range: the task has {count}"
                                  + (f" (0 to {len(inputs) - 1})" if inputs else "; add them under inputs"),
                                  field=place)
            return input_dir(int(argument))
        if argument not in inputs:
            raise ConfigError(f"{place}: {{{{input:{argument}}}}} names no input of this task; add "
                              f"`- task: {argument}` to its inputs, or use {{{{input:N}}}}", field=place)
        return input_dir(inputs.index(argument))

    def walk(value: Any, place: str) -> Any:
        if isinstance(value, str):
            return _TOKEN.sub(lambda match: one(match, place), value) if "{{" in value else value
        if isinstance(value, list):
            return [walk(item, f"{place}[{index}]") for index, item in enumerate(value)]
        if isinstance(value, dict):
            return {key: walk(item, f"{place}.{key}") for key, item in value.items()}
        return value

    return {key: value if key in ("name", "lead") else walk(value, f"{where}.{key}") for key, value in task.items()}


_FILLED = re.compile(r"{{(workflow_id|host:[^}]+)}}")


def fill(value: Any, values: Mapping[str, str]) -> Any:
    """`value` (a manifest) with the tokens left for the Job (`{{workflow_id}}`, `{{host:TASK}}`) replaced from
    `values` (token text to value); a token not in `values` stays as written."""
    if isinstance(value, str):
        return _FILLED.sub(lambda match: values.get(match.group(0), match.group(0)), value) if "{{" in value \
            else value
    if isinstance(value, list):
        return [fill(item, values) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, values) for key, item in value.items()}
    return value
