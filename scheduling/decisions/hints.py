"""The refusal hint in the words of the door a request came through (pure). `scheduling.decisions.admission` suggests
low priority as a request file writes it; the API body, OSMO's query string and a gpuctl job file each ask for it
their own way, and a hint is only useful in the syntax the caller can type."""

ADMISSION_WORDS = "with priority: low"  # as scheduling.decisions.admission.never_within_deserved words it

LOW_PRIORITY = {
    "api": 'with "priority": "low" in the request body',
    "cli": "with priority: low in the request file",
    "osmo": "with ?priority=LOW on the workflow path",
    "gpuctl": "with job.priority: low in the job file",
    "web": 'by choosing priority low (or "priority": "low" in a pasted request body)',
}


# The request's GPU type as each door writes it (scheduling.decisions.admission.GPU_TYPE_FIELD in the messages).
GPU_TYPE_FIELD = "(gpu_type)"
GPU_TYPE = {"gpuctl": "(resources.gpu-type)", "cli": "(gpu_type in the request file)"}


# A refusal for quota in the `default` project ends with how to name another one.
OTHER_PROJECT_WORDS = "name another project"  # as scheduling.decisions.admission.OTHER_PROJECT_WORDS words it
OTHER_PROJECT = {
    "api": 'name another project with "project": "NAME" in the request body',
    "cli": "name another project with project: NAME in the request file",
    "osmo": "name another project with ?project=NAME on the workflow path (or workflow.project in the file)",
    "gpuctl": "name another project with job.project: NAME in the job file (or create -f FILE --project NAME)",
    "web": "choose another Project in the form",
}
DEFAULT_PROJECT_TAIL = " (or set a default project on your profile; GET /api/projects/ lists yours)"


def for_door(message: str, source: str) -> str:
    """`message` with the low-priority hint, the GPU type's field and the way to name another project in the syntax
    of `source` (a Source value)."""
    if OTHER_PROJECT_WORDS in message:
        message = message.replace(OTHER_PROJECT_WORDS, OTHER_PROJECT.get(source, OTHER_PROJECT_WORDS)
                                  + DEFAULT_PROJECT_TAIL)
    return message.replace(ADMISSION_WORDS, LOW_PRIORITY.get(source, ADMISSION_WORDS)).replace(
        GPU_TYPE_FIELD, GPU_TYPE.get(source, GPU_TYPE_FIELD))
