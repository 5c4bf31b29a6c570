"""An OSMO task group of differing tasks as one gang (pure: no Django; issue 41, point 2; docs/architecture/
decisions.md, "A group of differing tasks" and "A group of differing shapes").

Tasks that share a pod's shape (`SHARED`: image, resource, privileged, host network, mounts, secrets, exit actions)
run as one indexed Job: one admission decision, one KAI PodGroup or one Kueue workload, its pods placed together or
not at all; they may differ in what the container runs: command, args, environment and files. A group whose tasks
differ in shape is split by `members` into one such Job per shape, admitted as one gang; `plan` is then called per
member, `lead` telling whether it holds the group's lead.

- The lead task is replica 0 (`MASTER_ADDR`, and `{{host:TASK}}` follows the new order); the Job succeeds when it
  does (`successPolicy`: the others are then stopped), so the lead decides the group's end.
- A group whose tasks differ starts each through `/bin/sh -c` (the image must have a shell): the script picks the
  task by `JOB_COMPLETION_INDEX`, exports its own environment and runs its command; with `ignoreNonleadStatus`
  (OSMO's default) a task that is not the lead ends successfully whatever its command returned, so only the lead's
  failure fails the group. A group of identical tasks runs them as written (no shell needed), and any one's
  failure fails the gang, unless it says `ignoreNonleadStatus: true`.
- `files` are written into the pod from one ConfigMap per workload (key `file-<n>`, the n-th of the request's
  `files`): a file every task that writes its path writes alike is mounted at its path (`subPath`) in every pod; a
  path the tasks write differently (each its own `/tmp/entry.sh`) is the task's own (`task`: its index), copied
  there by the launcher from the ConfigMap mounted at /osmo/files before its command starts.
  `localpath` is resolved by OSMO's CLI, which sends the file's contents instead when it submits; its dry run
  (which a templated file gets first) still carries `localpath`, so a dry run accepts it (as an empty file).
"""

import posixpath
import shlex
from dataclasses import dataclass, field
from typing import Any

from pools.engine import ConfigError
from scheduling.specs import podenv

# What each pod of one Job shares: tasks of one group must agree on them.
SHARED = ("image", "resource", "privileged", "hostNetwork", "volumeMounts", "env_from_secret", "exitActions")
FILE_KEYS = {"path", "contents", "localpath", "base64"}
MAX_SHAPES = 16  # members of one group: each is a workload naming every task of the group (so n shapes cost n^2)
SHELL = "/bin/sh"
FILES_DIR = "/osmo/files"  # the ConfigMap of a group's files, whole, where the launcher copies a task's own from


def file_key(index: int) -> str:
    return f"file-{index}"


@dataclass(frozen=True)
class Group:
    """What the group's request runs: the order of its tasks (lead first) and one container for all of them."""

    tasks: list[dict]  # lead first
    order: list[int]  # each one's place among the group's tasks as written
    command: list[str]
    args: list[str]
    env: dict[str, str]
    files: list[dict[str, str]] = field(default_factory=list)


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) and not isinstance(v, bool)
                                              for v in value):
        raise ConfigError(f"{where}: expected a list of strings", field=where)
    return [str(v) for v in value]


def _environment(task: dict, where: str) -> dict[str, str]:
    environment = task.get("environment") or {}
    if not isinstance(environment, dict):
        raise ConfigError(f"{where}.environment: expected a mapping of names to values",
                          field=f"{where}.environment")
    for name in environment:
        if not isinstance(name, str) or not podenv.ENV_NAME.fullmatch(name):
            raise ConfigError(f"{where}.environment.{name}: not an environment variable name (letters, digits and _, "
                              "not starting with a digit)", field=f"{where}.environment.{name}"[:200])
    podenv.check_env_names(environment, f"{where}.environment")  # GPUs only through the quota, in every task
    return {str(k): str(v) for k, v in environment.items()}


def files_of(task: dict, where: str, dry_run: bool = False) -> list[dict[str, str]]:
    """A task's `files` as {path, contents}: absolute, normalized paths; `localpath` (the CLI's) only in a dry run."""
    found = []
    for index, item in enumerate(task.get("files") or []):
        place = f"{where}.files[{index}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{place}: expected a mapping with path and contents", field=place)
        unknown = sorted(set(item) - FILE_KEYS)
        if unknown:
            raise ConfigError(f"{place}.{unknown[0]}: unknown field; use path and contents",
                              field=f"{place}.{unknown[0]}")
        if "localpath" in item and "contents" in item:
            raise ConfigError(f"{place}: give contents or localpath, not both", field=f"{place}.localpath")
        if "localpath" in item and not dry_run:
            raise ConfigError(f"{place}.localpath: a local file is read by OSMO's CLI, which sends its contents in "
                              "`contents` instead (osmo workflow submit does); send the contents",
                              field=f"{place}.localpath")
        if item.get("base64"):
            raise ConfigError(f"{place}.base64: OSMO's base64-encoded files are not written here; give the file as "
                              "text in contents (or decode it from a text file in your command)",
                              field=f"{place}.base64")
        path, contents = item.get("path"), item.get("contents", "")
        if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
            raise ConfigError(f"{place}.path: an absolute path in the container is required", field=f"{place}.path")
        normal = posixpath.normpath(path)
        if normal == "/" or ".." in path.split("/"):
            raise ConfigError(f"{place}.path: {path!r} is not a file's path", field=f"{place}.path")
        if (normal + "/").startswith("/osmo/") and not normal.startswith("/osmo/data/output/"):
            raise ConfigError(f"{place}.path: /osmo is the service's (as in OSMO): write files elsewhere, or under "
                              "{{output}}/", field=f"{place}.path")
        if not isinstance(contents, str):
            raise ConfigError(f"{place}.contents: expected text", field=f"{place}.contents")
        found.append({"path": normal, "contents": contents})
    return found


def _copies(files: list[dict[str, str]], index: int) -> str:
    """Shell that writes task `index`'s own files to their paths."""
    own = [(key, item["path"]) for key, item in enumerate(files) if item.get("task") == str(index)]
    return "".join(f"mkdir -p {shlex.quote(posixpath.dirname(path))} && cp {FILES_DIR}/{file_key(key)} "
                   f"{shlex.quote(path)} && " for key, path in own)


def _launcher(tasks: list[dict], commands: list[list[str]], envs: list[dict[str, str]], common: dict[str, str],
              ignore_nonlead: bool, files: list[dict[str, str]], lead: bool = True) -> str:
    """The `sh -c` script choosing the task by completion index. Arguments are single-quoted (no shell expansion);
    `$(VAR)` in them is still the kubelet's, as it is in a container's own args."""
    lines = ['case "$JOB_COMPLETION_INDEX" in']
    for index, (task, command, env) in enumerate(zip(tasks, commands, envs, strict=True)):
        exports = "".join(f"export {name}={shlex.quote(value)}; " for name, value in env.items()
                          if common.get(name) != value)
        run = " ".join(shlex.quote(part) for part in command) or "true"
        exports += _copies(files, index)
        if (index == 0 and lead) or not ignore_nonlead:
            body = f"{exports}exec {run}"
        else:  # a task that is not the lead: its end does not decide the group's
            said = shlex.quote(f"task {task['name']} ended with")
            body = f"{exports}{run}; echo {said} $? '; the lead decides the group'; exit 0"
        lines.append(f"  {index}) {body} ;;")
    lines += ['  *) echo "no task for index $JOB_COMPLETION_INDEX"; exit 1 ;;', "esac"]
    return "\n".join(lines)


def members(tasks: list[dict]) -> list[list[int]]:
    """The group's tasks by pod shape (what `SHARED` names), as indexes: the lead's shape first, the others in the
    order they first appear. One shape: one Job; more: one workload per shape, admitted as one gang."""
    leads = [i for i, task in enumerate(tasks) if task.get("lead")]
    first = leads[0] if leads else 0
    shapes: dict[str, list[int]] = {}
    for i in [first, *(i for i in range(len(tasks)) if i != first)]:
        shapes.setdefault(repr([tasks[i].get(key) for key in SHARED]), []).append(i)
    return list(shapes.values())


def plan(tasks: list[dict], where, group: dict, group_where: str, *, dry_run: bool = False,
         lead: bool = True) -> Group:
    """The group's tasks as one container (`where(i)`: task i's place in the file, as written). `lead`: whether
    these tasks hold the group's lead; those of another member of a gang (`members`) end successfully whatever
    their command returned, unless the group says `ignoreNonleadStatus: false`."""
    leads = [i for i, task in enumerate(tasks) if task.get("lead")]
    if len(leads) > 1:
        raise ConfigError(f"{group_where}.tasks: more than one lead task", field=f"{group_where}.tasks")
    first = leads[0] if leads else 0
    order = [first, *(i for i in range(len(tasks)) if i != first)]
    ordered = [tasks[i] for i in order]
    commands = [_strings(tasks[i].get("command"), f"{where(i)}.command")
                + _strings(tasks[i].get("args"), f"{where(i)}.args") for i in order]
    envs = [_environment(tasks[i], where(i)) for i in order]
    written = [files_of(tasks[i], where(i), dry_run) for i in order]
    contents: dict[str, set[str]] = {}
    for items in written:
        for item in items:
            contents.setdefault(item["path"], set()).add(item["contents"])
    files, shared = [], set()
    for position, items in enumerate(written):
        for item in items:
            if len(contents[item["path"]]) > 1 and len(tasks) > 1:  # the tasks write it differently: each its own
                files.append({**item, "task": str(position)})
            elif item["path"] not in shared:
                shared.add(item["path"])
                files.append(item)
    ignore = group.get("ignoreNonleadStatus", True)
    if not isinstance(ignore, bool):
        raise ConfigError(f"{group_where}.ignoreNonleadStatus: expected true or false",
                          field=f"{group_where}.ignoreNonleadStatus")
    alike = all(command == commands[0] for command in commands) and all(env == envs[0] for env in envs) \
        and not any("task" in item for item in files)
    if (lead and (len(tasks) == 1 or (alike and group.get("ignoreNonleadStatus") is not True))) \
            or (not lead and not ignore and alike):
        task = tasks[first]  # identical replicas run as written, and any one's failure fails the gang
        return Group(ordered, order, _strings(task.get("command"), f"{where(0)}.command"),
                     _strings(task.get("args"), f"{where(0)}.args"), envs[0], files)
    common = {k: v for k, v in envs[0].items() if all(env.get(k) == v for env in envs[1:])}
    script = _launcher(ordered, commands, envs, common, ignore, files, lead)
    return Group(ordered, order, [SHELL, "-c", script], [], common, files)
