"""What a real kube-apiserver refuses, for the stand-in (tests/kube_standin.py): the oracle our writes are checked
against, written from the API server's own rules and the published CRDs, never from our code (so it imports
nothing of pools or scheduling).

Pure functions: `validate_create(kind, obj)` and `validate_update(kind, old, new)` answer the field errors a real
server gives for the built-in kinds we write (Namespace, Node, Pod, Job: a pod spec's node selector and node
affinity included); `CustomResource.admit()` prunes,
defaults and validates a custom object against its CRD's structural schema and CEL rules (`x-kubernetes-
validations`, transition rules on `oldSelf` included). `invalid_status()` turns errors into the 422 Status.

The messages follow k8s.io/apimachinery's validation (IsDNS1123Label, IsQualifiedName, field.Error) and
apiextensions' schema and CEL validation, so a test can compare them with what a real cluster answered.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import yaml

# Messages as k8s.io/apimachinery/pkg/util/validation words them.
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = f"{DNS1123_LABEL_FMT}(\\.{DNS1123_LABEL_FMT})*"
QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = f"({QUALIFIED_NAME_FMT})?"
_DNS1123_LABEL = re.compile(DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME = re.compile(QUALIFIED_NAME_FMT)
_LABEL_VALUE = re.compile(LABEL_VALUE_FMT)
TOTAL_ANNOTATION_SIZE = 256 * 1024
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    # The double spaces are the real server's (validation.RegexError).
    shown = "".join(("" if i == 0 else " or ") + f"'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


def _max_len(length: int) -> str:
    # Servers before 1.34 said "characters"; the reference server (v1.36, SOURCES.md) counts bytes.
    return f"must be no more than {length} bytes"


def dns1123_label(value: str) -> list[str]:
    errors = [_max_len(63)] if len(value) > 63 else []
    if not _DNS1123_LABEL.fullmatch(value):
        errors.append(_regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                                   "or '-', and must start and end with an alphanumeric character",
                                   DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = [_max_len(253)] if len(value) > 253 else []
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        errors.append(_regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                   "characters, '-' or '.', and must start and end with an alphanumeric character",
                                   DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: an optional DNS-subdomain prefix and '/', then a name of at most 63."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
        errors: list[str] = []
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors = ["prefix part must be non-empty"]
        else:
            errors = [f"prefix part {message}" for message in dns1123_subdomain(prefix)]
    else:
        return ["a qualified name " + _regex_error(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character", QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errors.append("name part must be non-empty")
    else:
        if len(name) > 63:
            errors.append(f"name part {_max_len(63)}")
        if not _QUALIFIED_NAME.fullmatch(name):
            errors.append("name part " + _regex_error(
                "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character", QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return errors


DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL = re.compile(DNS1035_LABEL_FMT)


def dns1035_label(value: str) -> list[str]:
    """A Service's name (validation.IsDNS1035Label): a lowercase letter first."""
    errors = [_max_len(63)] if len(value) > 63 else []
    if not _DNS1035_LABEL.fullmatch(value):
        errors.append(_regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                                   "start with an alphabetic character, and end with an alphanumeric character",
                                   DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errors


def label_value(value: str) -> list[str]:
    errors = [_max_len(63)] if len(value) > 63 else []
    if not _LABEL_VALUE.fullmatch(value):
        errors.append(_regex_error("a valid label must be an empty string or consist of alphanumeric characters, "
                                   "'-', '_' or '.', and must start and end with an alphanumeric character",
                                   LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


# Field errors, as k8s.io/apimachinery/pkg/util/validation/field reports them.

_TYPE_WORDS = {"NotFound": "Not found", "Invalid": "Invalid value", "TypeInvalid": "Invalid value",
               "Required": "Required value", "NotSupported": "Unsupported value", "Forbidden": "Forbidden",
               "TooLong": "Too long", "TooMany": "Too many", "Duplicate": "Duplicate value"}
_OMITTED = object()


@dataclass(frozen=True)
class FieldError:
    type: str  # a key of _TYPE_WORDS
    field: str
    value: Any = _OMITTED
    detail: str = ""

    @property
    def body(self) -> str:
        text = _TYPE_WORDS[self.type]
        if self.value is not _OMITTED and self.type not in ("Required", "Forbidden", "TooLong"):
            text += f": {_shown(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body}"

    def cause(self) -> dict[str, str]:
        return {"reason": f"FieldValue{self.type}", "message": self.body, "field": self.field}


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def invalid(field_path: str, value: Any, detail: str) -> FieldError:
    return FieldError("Invalid", field_path, value, detail)


def required(field_path: str, detail: str = "") -> FieldError:
    return FieldError("Required", field_path, detail=detail)


def immutable(field_path: str, value: Any) -> FieldError:
    return invalid(field_path, value, "field is immutable")


def invalid_status(kind: str, group: str, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """The 422 Status body: `Job.batch "x" is invalid: <error>` (several in brackets), with one cause each."""
    qualified = f"{kind}.{group}" if group else kind
    texts = list(dict.fromkeys(str(error) for error in errors))
    summary = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    details: dict[str, Any] = {"name": name, "kind": kind, "causes": [error.cause() for error in errors]}
    if group:
        details["group"] = group
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f'{qualified} "{name}" is invalid: {summary}', "reason": "Invalid", "details": details,
            "code": 422}


class Invalid(ValueError):
    """A write a real server would refuse with 422 (raised by the stand-in's test helpers)."""

    def __init__(self, kind: str, group: str, name: str, errors: list[FieldError]):
        self.status = invalid_status(kind, group, name, errors)
        self.errors = errors
        super().__init__(self.status["message"])


# Object metadata (ValidateObjectMeta)

def _generated(value: str) -> str:
    """generateName is checked with its trailing dash masked (a random suffix follows it)."""
    return value[:-1] + "a" if len(value) > 1 and value.endswith("-") else value


def validate_labels(labels: Any, path: str) -> list[FieldError]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [FieldError("TypeInvalid", path, labels, "must be a map of strings")]
    errors = []
    for key, value in labels.items():
        errors += [invalid(path, key, message) for message in qualified_name(key)]
        if not isinstance(value, str):
            errors.append(FieldError("TypeInvalid", path, value, "label values must be strings"))
        else:
            errors += [invalid(path, value, message) for message in label_value(value)]
    return errors


def validate_annotations(annotations: Any, path: str) -> list[FieldError]:
    if annotations is None:
        return []
    if not isinstance(annotations, dict):
        return [FieldError("TypeInvalid", path, annotations, "must be a map of strings")]
    errors = []
    size = 0
    for key, value in annotations.items():
        errors += [invalid(path, key, message) for message in qualified_name(key.lower())]
        size += len(key) + len(value if isinstance(value, str) else "")
    if size > TOTAL_ANNOTATION_SIZE:
        errors.append(FieldError("TooLong", path, detail=f"may not be more than {TOTAL_ANNOTATION_SIZE} bytes"))
    return errors


def validate_metadata(metadata: Any, *, name_rule=dns1123_subdomain, namespaced: bool,
                      path: str = "metadata") -> list[FieldError]:
    if not isinstance(metadata, dict):
        return [required(f"{path}.name", "name or generateName is required")]
    errors = []
    generate = metadata.get("generateName") or ""
    name = metadata.get("name") or ""
    if generate:
        errors += [invalid(f"{path}.generateName", generate, message) for message in name_rule(_generated(generate))]
    if not name and not generate:
        errors.append(required(f"{path}.name", "name or generateName is required"))
    elif name:
        errors += [invalid(f"{path}.name", name, message) for message in name_rule(name)]
    namespace = metadata.get("namespace") or ""
    if namespaced and namespace:
        errors += [invalid(f"{path}.namespace", namespace, message) for message in dns1123_label(namespace)]
    elif not namespaced and namespace:
        errors.append(FieldError("Forbidden", f"{path}.namespace", detail="not allowed on this type"))
    errors += validate_labels(metadata.get("labels"), f"{path}.labels")
    errors += validate_annotations(metadata.get("annotations"), f"{path}.annotations")
    for finalizer in metadata.get("finalizers") or []:
        errors += [invalid(f"{path}.finalizers", finalizer, message) for message in qualified_name(finalizer)]
    return errors


def validate_metadata_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """Identity does not change (ValidateObjectMetaUpdate; a changed creationTimestamp is silently restored)."""
    before, after = old.get("metadata") or {}, new.get("metadata") or {}
    errors = []
    for key in ("name", "namespace", "uid"):
        if key in after and after.get(key) != before.get(key):
            errors.append(immutable(f"metadata.{key}", after.get(key)))
    return errors


# Built-in kinds

NAME_RULES = {"Namespace": dns1123_label, "Node": dns1123_subdomain, "Pod": dns1123_subdomain,
              "Job": dns1123_subdomain, "Event": dns1123_subdomain, "Service": dns1035_label,
              "ConfigMap": dns1123_subdomain, "Secret": dns1123_subdomain}
NAMESPACED = {"Namespace": False, "Node": False, "Pod": True, "Job": True, "Event": True, "Service": True,
              "ConfigMap": True, "Secret": True}


def validate_create(kind: str, obj: dict[str, Any]) -> list[FieldError]:
    """The errors a real server gives for creating `obj` of the built-in `kind`."""
    errors = validate_metadata(obj.get("metadata"), name_rule=NAME_RULES[kind], namespaced=NAMESPACED[kind])
    if kind == "Job":
        errors += _job_spec(obj)
    elif kind == "Pod":
        errors += _pod_spec(obj.get("spec"), "spec", restart=("Always", "OnFailure", "Never"))
    elif kind == "Service":
        errors += _service_spec(obj.get("spec"))
    elif kind == "ConfigMap":
        errors += _config_map(obj)
    elif kind == "Secret":
        errors += _secret(obj)
    return errors


# Service (core validation's ValidateService, the parts a ClusterIP or headless Service meets)

SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
PROTOCOLS = ("TCP", "UDP", "SCTP")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$")


def _port_number(value: Any, where: str) -> list[FieldError]:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 65535:
        return [invalid(where, value, "must be between 1 and 65535, inclusive")]
    return []


def _service_spec(spec: Any) -> list[FieldError]:
    if not isinstance(spec, dict):
        return [required("spec")]
    errors = []
    kind = spec.get("type", "ClusterIP")
    if kind not in SERVICE_TYPES:
        supported = ", ".join(f'"{value}"' for value in SERVICE_TYPES)
        errors.append(FieldError("NotSupported", "spec.type", kind, f"supported values: {supported}"))
    headless = spec.get("clusterIP") == "None"
    if headless and kind != "ClusterIP":
        errors.append(invalid("spec.clusterIPs[0]", "None", f"may not be set to 'None' for {kind} services"))
    ips = spec.get("clusterIPs")
    if ips is not None and spec.get("clusterIP") is not None and (not ips or ips[0] != spec["clusterIP"]):
        errors.append(invalid("spec.clusterIPs", ips, "must be empty or the first value must match spec.clusterIP"))
    ports = spec.get("ports") or []
    if not ports and not headless and kind != "ExternalName":
        errors.append(required("spec.ports"))
    names, pairs = set(), set()
    for index, port in enumerate(ports):
        where = f"spec.ports[{index}]"
        if not isinstance(port, dict):
            errors.append(invalid(where, port, "must be an object"))
            continue
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            errors.append(required(f"{where}.name"))
        elif name:
            errors += [invalid(f"{where}.name", name, message) for message in dns1123_label(name)]
            if name in names:
                errors.append(FieldError("Duplicate", f"{where}.name", name))
            names.add(name)
        errors += _port_number(port.get("port"), f"{where}.port")
        protocol = port.get("protocol", "TCP")
        if protocol not in PROTOCOLS:
            errors.append(FieldError("NotSupported", f"{where}.protocol", protocol,
                                     'supported values: "SCTP", "TCP", "UDP"'))
        if (port.get("port"), protocol) in pairs:
            errors.append(FieldError("Duplicate", where, {"port": port.get("port"), "protocol": protocol}))
        pairs.add((port.get("port"), protocol))
        target = port.get("targetPort")
        if isinstance(target, str):
            if not _IANA_SVC_NAME.fullmatch(target) or "--" in target or not re.search("[a-z]", target):
                errors.append(invalid(f"{where}.targetPort", target, "must contain only lowercase alphanumerics "
                                                                     "and '-', at most 15 characters and a letter"))
        elif target is not None:
            errors += _port_number(target, f"{where}.targetPort")
    selector = spec.get("selector")
    if selector is not None:
        errors += validate_labels(selector, "spec.selector")
    affinity = spec.get("sessionAffinity", "None")
    if affinity not in ("None", "ClientIP"):
        errors.append(FieldError("NotSupported", "spec.sessionAffinity", affinity,
                                 'supported values: "ClientIP", "None"'))
    if not isinstance(spec.get("publishNotReadyAddresses", False), bool):
        errors.append(invalid("spec.publishNotReadyAddresses", spec["publishNotReadyAddresses"], "must be a boolean"))
    return errors


# ConfigMap (ValidateConfigMap): keys as a Secret's, at most 1 MiB of data in all

CONFIG_MAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
MAX_CONFIG_MAP_BYTES = 1024 * 1024


def _config_map(obj: dict[str, Any]) -> list[FieldError]:
    errors, size = [], 0
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    for part, values in (("data", data), ("binaryData", binary)):
        for key, value in values.items():
            where = f"{part}[{key}]"
            if len(key) > 253:
                errors.append(invalid(where, key, _max_len(253)))
            if not CONFIG_MAP_KEY.fullmatch(key) or key in (".", "..") or key.startswith(".."):
                errors.append(invalid(where, key, "a valid config key must consist of alphanumeric characters, "
                                                  "'-', '_' or '.'"))
            if part == "binaryData" and key in data:
                errors.append(invalid(where, key, "duplicate of key present in data"))
            size += len(value.encode() if isinstance(value, str) else value or b"")
    if size > MAX_CONFIG_MAP_BYTES:
        errors.append(FieldError("TooLong", "", "", f"must have at most {MAX_CONFIG_MAP_BYTES} bytes"))
    return errors


# Secret (ValidateSecret): keys as a ConfigMap's, each value base64, at most 1 MiB decoded in all. A refusal names
# the key, never a value.

MAX_SECRET_BYTES = 1024 * 1024


def _secret(obj: dict[str, Any]) -> list[FieldError]:
    errors, size = [], 0
    data, plain = obj.get("data") or {}, obj.get("stringData") or {}
    if not isinstance(data, dict) or not isinstance(plain, dict):
        return [invalid("data", "", "must be a map of keys to values")]
    for part, values in (("data", data), ("stringData", plain)):
        for key, value in values.items():
            where = f"{part}[{key}]"
            if len(key) > 253:
                errors.append(invalid(where, key, _max_len(253)))
            if not CONFIG_MAP_KEY.fullmatch(key) or key in (".", "..") or key.startswith(".."):
                errors.append(invalid(where, key, "a valid config key must consist of alphanumeric characters, "
                                                  "'-', '_' or '.'"))
            if part == "stringData":
                size += len(str(value).encode())
                continue
            try:
                size += len(base64.b64decode(value, validate=True))
            except (ValueError, TypeError):  # the server cannot decode it; the value is never echoed
                errors.append(FieldError("Invalid", where, detail="illegal base64 data"))
    if size > MAX_SECRET_BYTES:
        errors.append(FieldError("TooLong", "data", detail=f"may not be more than {MAX_SECRET_BYTES} bytes"))
    return errors


def validate_update(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    """The errors a real server gives for replacing `old` with `new` (after a patch is applied)."""
    errors = validate_metadata_update(old, new)
    errors += validate_metadata(new.get("metadata"), name_rule=NAME_RULES[kind], namespaced=NAMESPACED[kind])
    if kind == "Job":
        errors += _job_spec_update(old.get("spec") or {}, new.get("spec") or {})
    return errors


def _pod_spec(spec: Any, path: str, *, restart: tuple[str, ...]) -> list[FieldError]:
    if not isinstance(spec, dict):
        return [required(path)]
    errors = []
    policy = spec.get("restartPolicy")
    if policy is None and restart not in (("Always", "OnFailure", "Never"), ("Always",)):  # defaulted to Always
        errors.append(required(f"{path}.restartPolicy", 'valid values: "OnFailure", "Never"'))
    elif policy is not None and policy not in restart:
        supported = ", ".join(f'"{value}"' for value in restart)
        errors.append(FieldError("NotSupported", f"{path}.restartPolicy", policy, f"supported values: {supported}"))
    containers = spec.get("containers")
    if not containers:
        errors.append(required(f"{path}.containers"))
    volumes: set[str] = set()
    for index, volume in enumerate(spec.get("volumes") or []):
        where, name = f"{path}.volumes[{index}]", volume.get("name") or ""
        errors += [invalid(f"{where}.name", name, message) for message in dns1123_label(name)]
        if name in volumes:
            errors.append(FieldError("Duplicate", f"{where}.name", name))
        volumes.add(name)
        mode = (volume.get("configMap") or {}).get("defaultMode")
        if mode is not None and not (isinstance(mode, int) and 0 <= mode <= 0o777):
            errors.append(invalid(f"{where}.configMap.defaultMode", mode,
                                  "must be a number between 0 and 0777 (octal), both inclusive"))
    for group in ("initContainers", "containers"):
        seen = set()
        for index, container in enumerate(spec.get(group) or []):
            where = f"{path}.{group}[{index}]"
            name = container.get("name") or ""
            if not name:
                errors.append(required(f"{where}.name"))
            else:
                errors += [invalid(f"{where}.name", name, message) for message in dns1123_label(name)]
                if name in seen:
                    errors.append(FieldError("Duplicate", f"{where}.name", name))
                seen.add(name)
            if not container.get("image"):
                errors.append(required(f"{where}.image"))
            policy = container.get("restartPolicy")
            if policy is not None and group == "containers":
                errors.append(FieldError("Forbidden", f"{where}.restartPolicy", detail="may not be set for "
                                         "non-init containers"))
            elif policy is not None and policy != "Always":  # a native sidecar (1.29+) is the only kind
                errors.append(FieldError("NotSupported", f"{where}.restartPolicy", policy,
                                         'supported values: "Always"'))
            errors += _volume_mounts(container.get("volumeMounts") or [], volumes, f"{where}.volumeMounts")
    errors += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    node_affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    if node_affinity is not None:
        errors += _node_affinity(node_affinity, f"{path}.affinity.nodeAffinity")
    return errors


def _volume_mounts(mounts: list[dict[str, Any]], volumes: set[str], path: str) -> list[FieldError]:
    """ValidateVolumeMounts: a mount names a volume of the pod, its path is unique in the container, its subPath
    relative and without '..'."""
    errors, paths = [], set()
    for index, mount in enumerate(mounts):
        where = f"{path}[{index}]"
        if mount.get("name") not in volumes:
            errors.append(FieldError("NotFound", f"{where}.name", mount.get("name")))
        target = mount.get("mountPath") or ""
        if not target:
            errors.append(required(f"{where}.mountPath"))
        elif target in paths:
            errors.append(invalid(f"{where}.mountPath", target, "must be unique"))
        paths.add(target)
        sub = mount.get("subPath") or ""
        if sub.startswith("/") or ".." in sub.split("/"):
            errors.append(invalid(f"{where}.subPath", sub, "must be a relative path without '..'"))
    return errors


# Node affinity (core validation's validateNodeAffinity, ValidateNodeSelector, ValidateNodeSelectorTerm,
# ValidateNodeSelectorRequirement, ValidateNodeFieldSelectorRequirement, ValidatePreferredSchedulingTerms).

NODE_FIELD_SELECTORS = {"metadata.name": dns1123_subdomain}  # nodeFieldSelectorValidators: ValidateNodeName


def _node_affinity(affinity: dict[str, Any], path: str) -> list[FieldError]:
    errors = []
    required_selector = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required_selector is not None:
        where = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = required_selector.get("nodeSelectorTerms") or []
        if not terms:
            return [required(where, "must have at least one node selector term")]
        for index, term in enumerate(terms):
            # A new pod's required values must be label values (allowInvalidLabelValueInRequiredNodeAffinity is
            # only set when the old object already had an invalid one).
            errors += _node_selector_term(term or {}, f"{where}[{index}]", label_values=True)
    for index, term in enumerate(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []):
        where = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{index}]"
        weight = term.get("weight", 0)
        if not isinstance(weight, int) or weight <= 0 or weight > 100:
            errors.append(invalid(f"{where}.weight", weight, "must be in the range 1-100"))
        errors += _node_selector_term(term.get("preference") or {}, f"{where}.preference", label_values=False)
    return errors


def _node_selector_term(term: dict[str, Any], path: str, *, label_values: bool) -> list[FieldError]:
    errors = []
    for index, requirement in enumerate(term.get("matchExpressions") or []):
        errors += node_selector_requirement(requirement, f"{path}.matchExpressions[{index}]",
                                            label_values=label_values)
    for index, requirement in enumerate(term.get("matchFields") or []):
        errors += node_field_selector_requirement(requirement, f"{path}.matchFields[{index}]")
    return errors


def node_selector_requirement(requirement: dict[str, Any], path: str, *, label_values: bool = True
                              ) -> list[FieldError]:
    """A matchExpressions requirement: In/NotIn need values, Exists/DoesNotExist none, Gt/Lt exactly one (the
    server does not parse it as an integer: the scheduler does, when it matches), the key is a qualified name."""
    errors = []
    operator, values, key = requirement.get("operator"), requirement.get("values") or [], requirement.get("key", "")
    if operator in ("In", "NotIn"):
        if not values:
            errors.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errors.append(FieldError("Forbidden", f"{path}.values",
                                     detail="may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        errors.append(invalid(f"{path}.operator", operator or "", "not a valid selector operator"))
    errors += [invalid(f"{path}.key", key, message) for message in qualified_name(key)]
    if label_values:
        for index, value in enumerate(values):
            errors += [invalid(f"{path}.values[{index}]", value, message) for message in label_value(value)]
    return errors


def node_field_selector_requirement(requirement: dict[str, Any], path: str) -> list[FieldError]:
    """A matchFields requirement: only `metadata.name`, In or NotIn, and exactly one value."""
    errors = []
    operator, values, key = requirement.get("operator"), requirement.get("values") or [], requirement.get("key", "")
    if operator in ("In", "NotIn"):
        if len(values) != 1:
            errors.append(required(f"{path}.values",
                                   "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    else:
        errors.append(invalid(f"{path}.operator", operator or "", "not a valid selector operator"))
    rule = NODE_FIELD_SELECTORS.get(key)
    if rule is None:
        errors.append(invalid(f"{path}.key", key, "not a valid field selector key"))
    else:
        for index, value in enumerate(values):
            errors += [invalid(f"{path}.values[{index}]", value, message) for message in rule(value)]
    return errors


def _job_spec(job: dict[str, Any]) -> list[FieldError]:
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    metadata = job.get("metadata") or {}
    name = metadata.get("name") or ""
    template = spec.get("template") or {}
    template_metadata = template.get("metadata") or {}
    errors = []
    labels = dict(template_metadata.get("labels") or {})
    if not spec.get("manualSelector"):
        if spec.get("selector"):
            errors.append(invalid("spec.selector", spec["selector"], "`selector` will be auto-generated"))
        # The server labels the pods with the Job's name (and selects them by its uid): a name that is no valid
        # label value is refused through these labels.
        labels.update(dict.fromkeys(JOB_NAME_LABELS, name))
    elif not spec.get("selector"):
        errors.append(required("spec.selector"))
    errors += validate_labels(labels, "spec.template.labels")
    errors += validate_annotations(template_metadata.get("annotations"), "spec.template.annotations")
    errors += _pod_spec(template.get("spec"), "spec.template.spec", restart=("OnFailure", "Never"))
    for key in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or value < 0):
            errors.append(invalid(f"spec.{key}", value, "must be greater than or equal to 0"))
    mode = spec.get("completionMode")
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        errors.append(FieldError("NotSupported", "spec.completionMode", mode,
                                 'supported values: "NonIndexed", "Indexed"'))
    success = spec.get("successPolicy")
    if success is not None:
        rules = success.get("rules") if isinstance(success, dict) else None
        if mode != "Indexed":
            errors.append(invalid("spec.successPolicy", success, "requires indexed completion mode"))
        if not rules or len(rules) > 20:
            errors.append(required("spec.successPolicy.rules") if not rules else
                          FieldError("TooMany", "spec.successPolicy.rules", len(rules), "must have at most 20 items"))
        for index, rule in enumerate(rules or []):
            if not rule.get("succeededIndexes") and rule.get("succeededCount") is None:
                errors.append(required(f"spec.successPolicy.rules[{index}]",
                                       "at least one of succeededCount or succeededIndexes must be specified"))
    completions = spec.get("completions")
    if mode == "Indexed":
        if completions is None:
            errors.append(required("spec.completions", "when completion mode is Indexed"))
        elif isinstance(completions, int) and completions > 0 and dns1123_label(f"{name}-{completions - 1}"):
            errors.append(invalid("metadata.name", name, "will not able to create pod with invalid DNS label: "
                                                         f"{name}-{completions - 1}"))
    return errors


# Fields of a Job that may change (batch validation's ValidateJobSpecUpdate); parallelism, suspend and the rest
# of the mutable ones are not listed because nothing is checked for them.
_JOB_IMMUTABLE = ("selector", "template", "completionMode", "podFailurePolicy", "backoffLimitPerIndex",
                  "managedBy")


def _job_spec_update(old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    errors = []
    for key in _JOB_IMMUTABLE:
        if key == "template" and old.get("suspend") and new.get("suspend"):
            # A suspended Job's scheduling directives may change; the containers may not.
            if _without_directives(old.get(key)) != _without_directives(new.get(key)):
                errors.append(immutable("spec.template", new.get(key)))
            continue
        if old.get(key) != new.get(key):
            errors.append(immutable(f"spec.{key}", new.get(key)))
    if old.get("completions") != new.get("completions"):
        # Only an Indexed Job scaled as a whole (completions moving with parallelism) may change completions.
        elastic = new.get("completionMode") == "Indexed" and new.get("completions") == new.get("parallelism")
        if not elastic:
            errors.append(immutable("spec.completions", new.get("completions")))
    return errors


def _without_directives(template: Any) -> Any:
    template = copy.deepcopy(template or {})
    template.pop("metadata", None)
    for key in ("nodeSelector", "tolerations", "affinity", "schedulingGates"):
        (template.get("spec") or {}).pop(key, None)
    return template


# Custom resources: the CRDs

def crd_directory() -> Path:
    """KUBE_CRD_DIR, or the published CRDs kept in the repository (tests/crds, README.md there)."""
    configured = os.environ.get("KUBE_CRD_DIR")
    return Path(configured) if configured else Path(__file__).resolve().parent / "crds"


class CRDsMissing(FileNotFoundError):
    pass


@dataclass
class CustomResource:
    """One CRD: its names, scope and the schema of each served version."""

    group: str
    plural: str
    kind: str
    namespaced: bool
    schemas: dict[str, dict[str, Any]]  # served version -> openAPIV3Schema
    name: str = ""
    _cel: dict[str, Any] = field(default_factory=dict, repr=False)

    def serves(self, version: str) -> bool:
        return version in self.schemas

    def admit(self, version: str, obj: dict[str, Any], old: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], list[FieldError]]:
        """`obj` pruned of unknown fields and defaulted (as the server stores it), and the errors a real server
        gives for creating it (or, with `old`, for replacing `old` with it)."""
        schema = self.schemas[version]
        obj = copy.deepcopy(obj)
        metadata = obj.get("metadata")
        _prune_and_default(obj, schema, root=True)
        errors = validate_metadata_update(old, obj) if old is not None else []
        errors += validate_metadata(metadata, name_rule=dns1123_subdomain, namespaced=self.namespaced)
        # The schema's own rules for metadata (if any) apply to name and generateName only.
        errors += _check(obj, schema, "", old, self._cel, root=True)
        if any(error.type in ("TypeInvalid", "NotSupported") for error in errors):
            errors.append(invalid("<nil>", "null", "some validation rules were not checked because the object was "
                                                   "invalid; correct the existing errors to complete validation"))
        else:
            errors += _check(obj, schema, "", old, self._cel, rules=True, root=True)
        return obj, errors


def load_crds(directory: Path | None = None) -> dict[tuple[str, str], CustomResource]:
    """The CRDs in `directory` (crd_directory() by default), by (group, plural). Raises CRDsMissing when there
    are none: a stand-in that serves custom objects without their schemas would accept what a cluster refuses."""
    return _load(str((directory or crd_directory()).resolve()))


@cache
def _load(directory: str) -> dict[tuple[str, str], CustomResource]:
    files = sorted(Path(directory).rglob("*.yaml")) if Path(directory).is_dir() else []
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    found: dict[tuple[str, str], CustomResource] = {}
    for path in files:
        with path.open() as stream:
            for document in yaml.load_all(stream, Loader=loader):
                if not document or document.get("kind") != "CustomResourceDefinition":
                    continue
                spec = document["spec"]
                schemas = {version["name"]: version["schema"]["openAPIV3Schema"]
                           for version in spec["versions"] if version.get("served", True)}
                resource = CustomResource(spec["group"], spec["names"]["plural"], spec["names"]["kind"],
                                          spec["scope"] == "Namespaced", schemas, document["metadata"]["name"])
                found[(resource.group, resource.plural)] = resource
    if not found:
        raise CRDsMissing(
            f"no CustomResourceDefinitions under {directory}: the stand-in API server validates custom objects "
            "against the published CRDs of KAI and Kueue (kept in tests/crds). Set KUBE_CRD_DIR to their "
            "directory, or unset it.")
    return found


# Custom resources: pruning, defaulting (structural schemas)

def _prune_and_default(value: Any, schema: dict[str, Any], *, root: bool = False) -> None:
    """In place, as the server does before validating: unknown fields dropped (unless the schema preserves them),
    nulls dropped where not nullable, defaults filled in."""
    if isinstance(value, dict) and schema.get("type", "object") == "object":
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        preserve = schema.get("x-kubernetes-preserve-unknown-fields")
        for key in list(value):
            if root and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = (properties or {}).get(key)
            if sub is None and isinstance(extra, dict):
                sub = extra
            if sub is None:
                if not preserve and (properties is not None or extra is None or extra is False):
                    del value[key]
                continue
            if value[key] is None and not sub.get("nullable"):
                del value[key]
                continue
            _prune_and_default(value[key], sub)
        for key, sub in (properties or {}).items():
            if root and key == "metadata":
                continue
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
                _prune_and_default(value[key], sub)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            _prune_and_default(item, schema["items"])


# Custom resources: validation (OpenAPI v3 value validation and CEL)

def _type_of(value: Any) -> str:
    """The JSON type of a decoded value (bool before int: Python's bools are ints)."""
    for python, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
                         (dict, "object")):
        if isinstance(value, python):
            return name
    return "null"


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _check(value: Any, schema: dict[str, Any], path: str, old: Any, cel_cache: dict, *, rules: bool = False,
           root: bool = False) -> list[FieldError]:
    """The value errors of `value` at `path` (dotted, as the server names fields); with `rules`, the errors of its
    CEL rules instead (the server evaluates those only on an object whose types and enums hold)."""
    where = path or "<root>"
    if value is None:
        if rules or schema.get("nullable"):
            return []
        return [FieldError("TypeInvalid", where, None,
                           f'{where} in body must be of type {schema.get("type", "object")}: "null"')]
    errors: list[FieldError] = []
    if not rules:
        wanted = "int-or-string" if schema.get("x-kubernetes-int-or-string") else schema.get("type")
        if wanted and _type_of(value) not in _ACCEPTED[wanted]:
            return [FieldError("TypeInvalid", where, value,
                               f'{where} in body must be of type {wanted}: "{_type_of(value)}"')]
        if "enum" in schema and value not in schema["enum"]:
            supported = ", ".join(_shown(option) for option in schema["enum"])
            errors.append(FieldError("NotSupported", where, value, f"supported values: {supported}"))
        if isinstance(value, str):
            errors += _check_string(value, schema, where)
        elif _type_of(value) in ("integer", "number"):
            errors += _check_number(value, schema, where)
        errors += _check_combinators(value, schema, path, cel_cache)
    if isinstance(value, list):
        errors += _check_array(value, schema, path, old, cel_cache, rules)
    elif isinstance(value, dict):
        errors += _check_object(value, schema, path, old, cel_cache, rules, root=root)
    if rules:
        errors += _check_rules(value, schema, where, old, cel_cache)
    return errors


_ACCEPTED = {"string": ("string",), "integer": ("integer",), "number": ("integer", "number"),
             "boolean": ("boolean",), "object": ("object",), "array": ("array",),
             "int-or-string": ("integer", "string")}


def _check_combinators(value: Any, schema: dict[str, Any], path: str, cel_cache: dict) -> list[FieldError]:
    where = path or "<root>"
    errors = []
    for combinator in ("allOf", "anyOf", "oneOf"):
        if combinator in schema:
            passed = [not _check(value, sub, path, None, cel_cache) for sub in schema[combinator]]
            if combinator == "allOf" and not all(passed):
                errors.append(invalid(where, value, f"{where} in body must validate all the schemas (allOf)"))
            if combinator == "anyOf" and not any(passed):
                errors.append(invalid(where, value, f"{where} in body must validate at least one schema (anyOf)"))
            if combinator == "oneOf" and sum(passed) != 1:
                errors.append(invalid(where, value, f"{where} in body must validate one and only one schema "
                                                    "(oneOf)"))
    return errors


def _check_string(value: str, schema: dict[str, Any], where: str) -> list[FieldError]:
    errors = []
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(FieldError("TooLong", where, value, f"may not be more than {schema['maxLength']} bytes"))
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(invalid(where, value, f"{where} in body should be at least {schema['minLength']} chars long"))
    if "pattern" in schema and not _pattern(schema["pattern"]).search(value):
        errors.append(invalid(where, value, f"{where} in body should match '{schema['pattern']}'"))
    if schema.get("format") == "date-time" and not _is_date_time(value):
        errors.append(invalid(where, value, f'{where} in body must be of type date-time: "{value}"'))
    return errors


def _check_number(value: float, schema: dict[str, Any], where: str) -> list[FieldError]:
    errors = []
    if "minimum" in schema:
        low, exclusive = schema["minimum"], schema.get("exclusiveMinimum")
        if value < low or (exclusive and value == low):
            relation = "greater than" if exclusive else "greater than or equal to"
            errors.append(invalid(where, value, f"{where} in body should be {relation} {low}"))
    if "maximum" in schema:
        high, exclusive = schema["maximum"], schema.get("exclusiveMaximum")
        if value > high or (exclusive and value == high):
            relation = "less than" if exclusive else "less than or equal to"
            errors.append(invalid(where, value, f"{where} in body should be {relation} {high}"))
    limits = {"int32": 2**31, "int64": 2**63}
    if isinstance(value, int) and schema.get("format") in limits and not (
            -limits[schema["format"]] <= value < limits[schema["format"]]):
        errors.append(invalid(where, value, f"{where} in body must be of type {schema['format']}: \"{value}\""))
    return errors


def _check_array(value: list, schema: dict[str, Any], path: str, old: Any, cel_cache: dict,
                 rules: bool) -> list[FieldError]:
    where = path or "<root>"
    errors = []
    if not rules:
        errors += _check_list_size_and_keys(value, schema, where)
    items = schema.get("items")
    if isinstance(items, dict):
        # Transition rules reach into items only where the server can match an item with its old self: lists of
        # type map, by their keys.
        keys = schema.get("x-kubernetes-list-map-keys") or []
        olds = {}
        if rules and schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list):
            olds = {json.dumps({key: item.get(key) for key in keys}, sort_keys=True): item
                    for item in old if isinstance(item, dict)}
        for index, item in enumerate(value):
            previous = None
            if olds and isinstance(item, dict):
                previous = olds.get(json.dumps({key: item.get(key) for key in keys}, sort_keys=True))
            errors += _check(item, items, f"{where}[{index}]", previous, cel_cache, rules=rules)
    return errors


def _check_list_size_and_keys(value: list, schema: dict[str, Any], where: str) -> list[FieldError]:
    errors = []
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(FieldError("TooMany", where, len(value), f"must have at most {schema['maxItems']} items"))
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(invalid(where, len(value), f"{where} in body should have at least {schema['minItems']} "
                                                 "items"))
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    seen: list[Any] = []
    for index, item in enumerate(value):
        identity = ({key: item.get(key) for key in keys} if list_type == "map" and isinstance(item, dict)
                    else item)
        if list_type in ("set", "map") and identity in seen:
            errors.append(FieldError("Duplicate", f"{where}[{index}]", identity))
        seen.append(identity)
    return errors


def _check_object(value: dict, schema: dict[str, Any], path: str, old: Any, cel_cache: dict, rules: bool, *,
                  root: bool) -> list[FieldError]:
    where = path or "<root>"
    errors = []
    properties = schema.get("properties") or {}
    if not rules:
        for key in schema.get("required") or []:
            if key not in value:
                errors.append(required(_child(path, key)))
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(FieldError("TooMany", where, len(value),
                                     f"must have at most {schema['maxProperties']} items"))
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if root and key == "metadata":
            continue  # ObjectMeta is validated as for every kind (validate_metadata)
        sub = properties.get(key, extra if isinstance(extra, dict) else None)
        if sub is not None:
            previous = old.get(key) if isinstance(old, dict) else None
            errors += _check(item, sub, _child(path, key), previous, cel_cache, rules=rules)
    return errors


def _check_rules(value: Any, schema: dict[str, Any], where: str, old: Any, cel_cache: dict) -> list[FieldError]:
    errors = []
    for rule in schema.get("x-kubernetes-validations") or []:
        text = rule["rule"]
        transition = "oldSelf" in text
        if transition and old is None:
            continue  # a transition rule only judges a change of a value that was there before
        program = cel_cache.get(text)
        if program is None:
            program = cel_cache[text] = _compile(text)
        activation = {"self": celpy.json_to_cel(value)}
        if transition:
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            result = program.evaluate(activation)
        except celpy.CELEvalError as exc:
            result = exc
        if isinstance(result, celpy.CELEvalError):
            # Worded as cel-go words a missing field, which the real server shows.
            problem = re.sub(r"^no such member in mapping: '(.*)'$", r"no such key: \1", str(result.args[0]))
            errors.append(invalid(where, _type_of(value), f"{problem} evaluating rule: {text}"))
        elif not bool(result):
            message = rule.get("message") or f"failed rule: {text}"
            errors.append(invalid(_child(where, rule["fieldPath"].lstrip(".")) if rule.get("fieldPath") else where,
                                  _type_of(value), message))
    return errors


_CEL = celpy.Environment()


def _compile(text: str) -> Any:
    return _CEL.program(_CEL.compile(text))


@cache
def _pattern(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _is_date_time(value: str) -> bool:
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in value or "t" in value


def rules_of(resource: CustomResource, version: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every CEL rule of a served version, with the path it sits at (for reports and tests)."""
    def walk(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
        for rule in schema.get("x-kubernetes-validations") or []:
            yield path or ".", rule
        for key, sub in (schema.get("properties") or {}).items():
            yield from walk(sub, f"{path}.{key}")
        if isinstance(schema.get("items"), dict):
            yield from walk(schema["items"], f"{path}[*]")
        if isinstance(schema.get("additionalProperties"), dict):
            yield from walk(schema["additionalProperties"], f"{path}[*]")

    yield from walk(resource.schemas[version], "")


# ---- The built-in kinds of long-running workloads (issue 43) -------------------------------------------------
# Written from kube-apiserver's pkg/apis/apps/validation (ValidateDeploymentSpec, ValidateStatefulSetSpec,
# ValidatePodTemplateSpecForReplicaSet, ValidateDeploymentStrategy/ValidateRollingUpdateDeployment,
# ValidateStatefulSetUpdate), pkg/apis/core/validation (ValidateService, validateServicePort,
# ValidateServiceUpdate: the clusterIP is immutable) and pkg/apis/networking/validation (ValidateIngressSpec,
# validateIngressRules, validateHTTPIngressPath, validateIngressBackend, validateIngressTLS): the rules our
# objects can meet, and their words.

DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL = re.compile(DNS1035_LABEL_FMT)
_PORT_NAME = re.compile(r"[-a-z0-9]*")


def dns1035_label(value: str) -> list[str]:
    errors = [_max_len(63)] if len(value) > 63 else []
    if not _DNS1035_LABEL.fullmatch(value):
        errors.append(_regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                                   "start with an alphabetic character, and end with an alphanumeric character",
                                   DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errors


def port_name(value: str) -> list[str]:
    """validation.IsValidPortName: an IANA service name."""
    errors = []
    if len(value) < 1 or len(value) > 15:
        errors.append("must be no more than 15 characters")
    if not _PORT_NAME.fullmatch(value):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in value:
        errors.append("must not contain consecutive hyphens")
    if not re.search("[a-z]", value):
        errors.append("must contain at least one letter (a-z)")
    if value.startswith("-") or value.endswith("-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def _port_number(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        return [invalid(path, value, "must be between 1 and 65535, inclusive")]
    return []


def _nonnegative(spec: dict[str, Any], key: str, path: str) -> list[FieldError]:
    value = spec.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        return [invalid(f"{path}.{key}", value, "must be greater than or equal to 0")]
    return []


def _selector_and_template(spec: dict[str, Any], kind: str) -> list[FieldError]:
    """A ReplicaSet-style selector (required, not empty) that the template's labels must match, and a template
    whose pods restart Always (ValidatePodTemplateSpecForReplicaSet)."""
    errors = []
    selector = spec.get("selector")
    match = (selector or {}).get("matchLabels") or {}
    if not isinstance(selector, dict):
        errors.append(required("spec.selector"))
    elif not match and not selector.get("matchExpressions"):
        errors.append(invalid("spec.selector", selector, f"empty selector is invalid for {kind}"))
    errors += validate_labels(match, "spec.selector.matchLabels")
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*errors, required("spec.template")]
    labels = (template.get("metadata") or {}).get("labels") or {}
    if match and any(labels.get(key) != value for key, value in match.items()):
        errors.append(invalid("spec.template.metadata.labels", labels, "`selector` does not match template "
                                                                       "`labels`"))
    errors += validate_labels(labels, "spec.template.metadata.labels")
    errors += validate_annotations((template.get("metadata") or {}).get("annotations"),
                                   "spec.template.metadata.annotations")
    pod = template.get("spec")
    errors += _pod_spec(pod, "spec.template.spec", restart=("Always",))
    if isinstance(pod, dict) and pod.get("activeDeadlineSeconds") is not None:
        errors.append(FieldError("Forbidden", "spec.template.spec.activeDeadlineSeconds",
                                 detail="activeDeadlineSeconds in ReplicaSet is not Supported"))
    errors += _ports_and_probes(pod if isinstance(pod, dict) else {}, "spec.template.spec")
    return errors


def _ports_and_probes(pod: dict[str, Any], path: str) -> list[FieldError]:
    """Container ports (validateContainerPorts) and a TCP readiness probe (validateProbe, one handler)."""
    errors = []
    for index, container in enumerate(pod.get("containers") or []):
        where = f"{path}.containers[{index}]"
        names = set()
        for number, port in enumerate(container.get("ports") or []):
            here = f"{where}.ports[{number}]"
            errors += _port_number(port.get("containerPort"), f"{here}.containerPort")
            if port.get("name"):
                errors += [invalid(f"{here}.name", port["name"], m) for m in port_name(port["name"])]
                if port["name"] in names:
                    errors.append(FieldError("Duplicate", f"{here}.name", port["name"]))
                names.add(port["name"])
            if port.get("protocol", "TCP") not in ("TCP", "UDP", "SCTP"):
                errors.append(FieldError("NotSupported", f"{here}.protocol", port.get("protocol"),
                                         'supported values: "SCTP", "TCP", "UDP"'))
        probe = container.get("readinessProbe")
        if probe is not None:
            handlers = [key for key in ("exec", "httpGet", "tcpSocket", "grpc") if probe.get(key) is not None]
            if len(handlers) != 1:
                errors.append(required(f"{where}.readinessProbe", "must specify a handler type"))
            socket = probe.get("tcpSocket")
            if socket is not None:
                port = socket.get("port")
                if isinstance(port, str):
                    errors += [invalid(f"{where}.readinessProbe.tcpSocket.port", port, m) for m in port_name(port)]
                else:
                    errors += _port_number(port, f"{where}.readinessProbe.tcpSocket.port")
            for key in ("periodSeconds", "timeoutSeconds", "failureThreshold", "successThreshold"):
                value = probe.get(key)
                if value is not None and (not isinstance(value, int) or value < 1):
                    errors.append(invalid(f"{where}.readinessProbe.{key}", value, "must be greater than or equal "
                                                                                   "to 1"))
            if probe.get("successThreshold") not in (None, 1):
                errors.append(invalid(f"{where}.readinessProbe.successThreshold", probe["successThreshold"],
                                      "must be 1"))
    return errors


def _int_or_percent(value: Any, path: str) -> tuple[list[FieldError], int | None]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            return [invalid(path, value, "must be greater than or equal to 0")], None
        return [], value
    if isinstance(value, str) and re.fullmatch(r"[0-9]+%", value):
        return [], int(value[:-1])
    return [invalid(path, value, "a valid percent string must be a numeric string followed by an ending '%' "
                                 "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')")], None


def _deployment(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    errors = _nonnegative(spec, "replicas", "spec") + _nonnegative(spec, "revisionHistoryLimit", "spec")
    errors += _nonnegative(spec, "minReadySeconds", "spec")
    errors += _selector_and_template(spec, "deployment")
    strategy = spec.get("strategy") or {}
    kind = strategy.get("type", "RollingUpdate")
    if kind not in ("Recreate", "RollingUpdate"):
        errors.append(FieldError("NotSupported", "spec.strategy.type", kind, 'supported values: "Recreate", '
                                                                              '"RollingUpdate"'))
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate" and rolling is not None:
        errors.append(FieldError("Forbidden", "spec.strategy.rollingUpdate",
                                 detail="may not be specified when strategy `type` is 'Recreate'"))
    if kind == "RollingUpdate" and rolling is not None:
        where = "spec.strategy.rollingUpdate"
        unavailable_errors, unavailable = _int_or_percent(rolling.get("maxUnavailable", "25%"),
                                                          f"{where}.maxUnavailable")
        surge_errors, surge = _int_or_percent(rolling.get("maxSurge", "25%"), f"{where}.maxSurge")
        errors += unavailable_errors + surge_errors
        if isinstance(rolling.get("maxUnavailable"), str) and unavailable is not None and unavailable > 100:
            errors.append(invalid(f"{where}.maxUnavailable", rolling["maxUnavailable"],
                                  "must not be greater than 100%"))
        if unavailable == 0 and surge == 0:
            errors.append(invalid(f"{where}.maxUnavailable", rolling.get("maxUnavailable"),
                                  "may not be 0 when `maxSurge` is 0"))
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None and deadline <= (spec.get("minReadySeconds") or 0):
        errors.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    return errors


def _statefulset(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    errors = _nonnegative(spec, "replicas", "spec") + _nonnegative(spec, "minReadySeconds", "spec")
    policy = spec.get("podManagementPolicy", "OrderedReady")
    if policy not in ("OrderedReady", "Parallel"):
        errors.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
    if strategy not in ("RollingUpdate", "OnDelete"):
        errors.append(invalid("spec.updateStrategy", strategy, "must be 'RollingUpdate' or 'OnDelete'"))
    if spec.get("serviceName"):
        errors += [invalid("spec.serviceName", spec["serviceName"], m) for m in dns1123_label(spec["serviceName"])]
    errors += _selector_and_template(spec, "statefulset")
    return errors


_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_IP = re.compile(r"[0-9.]+|[0-9a-fA-F:]*:[0-9a-fA-F:.]*")


def _ingress_host(host: str, path: str) -> list[FieldError]:
    if _IP.fullmatch(host):
        return [invalid(path, host, "must be a DNS name, not an IP address")]
    plain = host[2:] if host.startswith("*.") else host
    return [invalid(path, host, message) for message in dns1123_subdomain(plain)]


def _ingress(obj: dict[str, Any]) -> list[FieldError]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [required("spec")]
    errors = []
    rules = spec.get("rules") or []
    if not rules and not spec.get("defaultBackend"):
        errors.append(invalid("spec", spec, "either `defaultBackend` or `rules` must be specified"))
    for index, rule in enumerate(rules):
        where = f"spec.rules[{index}]"
        if rule.get("host"):
            errors += _ingress_host(rule["host"], f"{where}.host")
        http = rule.get("http")
        if http is None:
            continue
        paths = http.get("paths") or []
        if not paths:
            errors.append(required(f"{where}.http.paths"))
        for number, item in enumerate(paths):
            here = f"{where}.http.paths[{number}]"
            kind, path = item.get("pathType"), item.get("path", "")
            if kind is None:
                errors.append(required(f"{here}.pathType", "pathType must be specified"))
            elif kind not in _PATH_TYPES:
                errors.append(FieldError("NotSupported", f"{here}.pathType", kind,
                                         'supported values: "Exact", "ImplementationSpecific", "Prefix"'))
            elif kind in ("Exact", "Prefix"):
                if not path.startswith("/"):
                    errors.append(invalid(f"{here}.path", path, "must be an absolute path"))
                for bad in ("//", "/./", "/../", "%2f", "%2F"):
                    if bad in path:
                        errors.append(invalid(f"{here}.path", path, f"must not contain '{bad}'"))
                if path.endswith("/..") or path.endswith("/."):
                    errors.append(invalid(f"{here}.path", path, "cannot end with '/..' or '/.'"))
            errors += _ingress_backend(item.get("backend") or {}, f"{here}.backend")
    for index, tls in enumerate(spec.get("tls") or []):
        for number, host in enumerate(tls.get("hosts") or []):
            errors += _ingress_host(host, f"spec.tls[{index}].hosts[{number}]")
        if tls.get("secretName"):
            errors += [invalid(f"spec.tls[{index}].secretName", tls["secretName"], m)
                       for m in dns1123_subdomain(tls["secretName"])]
    if spec.get("ingressClassName"):
        errors += [invalid("spec.ingressClassName", spec["ingressClassName"], m)
                   for m in dns1123_subdomain(spec["ingressClassName"])]
    return errors


def _ingress_backend(backend: dict[str, Any], path: str) -> list[FieldError]:
    service = backend.get("service")
    if service is None and backend.get("resource") is None:
        return [invalid(path, backend, "one backend (service or resource) must be specified")]
    if service is None:
        return []
    errors = [invalid(f"{path}.service.name", service.get("name", ""), m)
              for m in dns1035_label(service.get("name", ""))]
    port = service.get("port") or {}
    if port.get("name") and port.get("number"):
        errors.append(invalid(f"{path}.service.port", port, "cannot set both port name & port number"))
    elif port.get("name"):
        errors += [invalid(f"{path}.service.port.name", port["name"], m) for m in port_name(port["name"])]
    elif port.get("number") is not None:
        errors += _port_number(port["number"], f"{path}.service.port.number")
    else:
        errors.append(invalid(f"{path}.service.port", port, "port name or number is required"))
    return errors


def _apps_update(kind: str, old: dict[str, Any], new: dict[str, Any]) -> list[FieldError]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if old_spec.get("selector") != new_spec.get("selector"):
        return [invalid("spec.selector", new_spec.get("selector"), "field is immutable")]
    if kind == "StatefulSet":
        mutable = {"replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
                   "minReadySeconds"}
        if {k: v for k, v in old_spec.items() if k not in mutable} != \
                {k: v for k, v in new_spec.items() if k not in mutable}:
            return [FieldError("Forbidden", "spec", detail="updates to statefulset spec for fields other than "
                               "'replicas', 'ordinals', 'template', 'updateStrategy', "
                               "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden")]
    return []


@dataclass
class BuiltinKind:
    """A built-in kind served beside the CRDs, through the same paths (tests/kube_standin.py): the rules above
    take the place of a schema."""

    group: str
    plural: str
    kind: str
    check: Any
    name_rule: Any = dns1123_subdomain
    namespaced: bool = True
    version: str = "v1"

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def serves(self, version: str) -> bool:
        return version == self.version

    def admit(self, version: str, obj: dict[str, Any], old: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], list[FieldError]]:
        errors = validate_metadata_update(old, obj) if old is not None else []
        errors += validate_metadata(obj.get("metadata"), name_rule=self.name_rule, namespaced=self.namespaced)
        errors += self.check(obj)
        if old is not None and self.kind in ("Deployment", "StatefulSet"):
            errors += _apps_update(self.kind, old, obj)
        return obj, errors


BUILTIN_KINDS = (BuiltinKind("apps", "deployments", "Deployment", _deployment),
                 BuiltinKind("apps", "statefulsets", "StatefulSet", _statefulset),
                 BuiltinKind("networking.k8s.io", "ingresses", "Ingress", _ingress))
