"""Our names as Kubernetes names and label values (pure; docs/admin/engines.md, "Names in Kubernetes").

Our names (`NAME_PATTERN`: up to 128 letters, digits, `_ . -`) are ours; every Kubernetes field they fill has a
stricter rule, and each function here maps a text to one kind of field:

- `dns_label`: a DNS-1123 label (lower-case, at most 63): Namespaces, KAI Topologies, Kueue Cohorts, ClusterQueues
  and LocalQueues, and each part of a `dotted` name;
- `dotted`: DNS labels joined by dots (a DNS-1123 subdomain), short enough to be a label value too when it must be
  one: KAI Queues (named by Jobs' `kai.scheduler/queue` label), Kueue ResourceFlavors;
- `label_value` (at most 63, `[A-Za-z0-9]` at both ends, `-_.` inside) and `label_key_name` (the same, not empty);
- `job_name`: a DNS label short enough that the Job's pods, `<job>-<index>-<5 random>`, have valid names too;
- `namespace`: a project's default namespace, `proj-<name>`.

A text that already fits is unchanged. One that does not becomes a readable prefix, `-` and the first ten hex
digits of the sha256 of the whole original: stable, and distinct for distinct originals (unless sha256 collides),
so that objects already in clusters keep their names and long names sharing a beginning do not collide. Labels we
write that had to be shortened keep the full name in an annotation under the label's own key (`labelled`), which
is what `full_value` reads back."""

import hashlib
import re
import zlib
from collections.abc import Mapping
from typing import Any

HASH = 10
NAME_MAX = 128  # ours
DNS_LABEL_MAX = LABEL_VALUE_MAX = KEY_NAME_MAX = 63
SUBDOMAIN_MAX = 253
# An Indexed Job's pods are named `<job>-<index>-<5 random>` from a prefix the API server cuts at 58 characters and
# have the hostname `<job>-<index>`, a DNS label: 52 leaves room for a 10-digit index (the limit CronJobs use too).
JOB_NAME_MAX = 52

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:HASH]


def _shortened(readable: str, original: str, limit: int) -> str:
    """`readable` (which starts as the field allows) cut to leave room for `-<hash>`, ending as the field allows."""
    head = readable[:limit - HASH - 1].rstrip("-_.")
    return f"{head}-{digest(original)}" if head else digest(original)


def _lower(text: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")


def dns_label(text: str, limit: int = DNS_LABEL_MAX) -> str:
    """A name that fits but has capitals, `_` or `.` keeps the form KAI's queues have had from the start (lower-cased,
    `-` for the rest, and the crc32 of the original), so that objects already in clusters keep their names."""
    if len(text) <= limit and DNS_LABEL.fullmatch(text):
        return text
    cleaned = _lower(text)
    if len(text) <= limit:
        return f"{(cleaned or 'x')[:40]}-{zlib.crc32(text.encode()):08x}".strip("-")
    return _shortened(cleaned, text, limit)


def dotted(*names: str, limit: int = LABEL_VALUE_MAX) -> str:
    """The names as DNS labels joined by dots, shortened past `limit` (63: a label value as well as a name)."""
    joined = ".".join(dns_label(name) for name in names)
    if len(joined) <= limit:
        return joined
    return _shortened(joined, "/".join(names), limit)  # `/` is in no name: distinct tuples, distinct originals


def label_value(text: str) -> str:
    if len(text) <= LABEL_VALUE_MAX and LABEL_VALUE.fullmatch(text):
        return text
    return _shortened(re.sub(r"[^-A-Za-z0-9_.]+", "-", text).lstrip("-_."), text, LABEL_VALUE_MAX)


def label_key_name(text: str) -> str:
    """The name part of a label or annotation key (after the `prefix/`)."""
    return label_value(text) if text else digest(text)


def job_name(text: str) -> str:
    return dns_label(text, JOB_NAME_MAX) if len(text) > JOB_NAME_MAX or not DNS_LABEL.fullmatch(text) else text


def namespace(project: str) -> str:
    """`proj-<name>` lower-cased with `-` for `_` and `.`, as always (so `Vision` and `vision` would share one, which
    the project writes refuse, naming the other project); shortened past 63."""
    name = "proj-" + project.lower().replace("_", "-").replace(".", "-")
    if len(name) <= DNS_LABEL_MAX and DNS_LABEL.fullmatch(name):
        return name
    return _shortened("proj-" + _lower(project), project, DNS_LABEL_MAX)


def labelled(prefix: str, values: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """Our labels `<prefix><key>: <value>`, and the annotations keeping each value that had to be shortened, under
    the label's own key."""
    labels, annotations = {}, {}
    for key, value in values.items():
        full_key = f"{prefix}{label_key_name(key)}"
        labels[full_key] = label_value(value)
        if labels[full_key] != value:
            annotations[full_key] = value
    return labels, annotations


def full_value(metadata: Mapping[str, Any] | None, key: str) -> str:
    """Our name under label `key` of an object's metadata: the annotation when the label had to be shortened. An
    annotation longer than any name of ours (anyone may annotate a pod) is not one: the label is read then."""
    metadata = metadata if isinstance(metadata, Mapping) else {}
    annotations = metadata.get("annotations") if isinstance(metadata.get("annotations"), Mapping) else {}
    labels = metadata.get("labels") if isinstance(metadata.get("labels"), Mapping) else {}
    full = str(annotations.get(key) or "")
    return full if 0 < len(full) <= NAME_MAX else str(labels.get(key) or "")
