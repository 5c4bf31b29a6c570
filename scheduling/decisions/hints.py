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


def for_door(message: str, source: str) -> str:
    """`message` with the low-priority hint and the GPU type's field in the syntax of `source` (a Source value)."""
    return message.replace(ADMISSION_WORDS, LOW_PRIORITY.get(source, ADMISSION_WORDS)).replace(
        GPU_TYPE_FIELD, GPU_TYPE.get(source, GPU_TYPE_FIELD))
