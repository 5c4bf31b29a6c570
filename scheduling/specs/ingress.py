"""The link of a notebook or inference (pure: no Django; issue 43, docs/admin/links.md): an Ingress built from
the template an admin wrote for the workload's pool, else for its backend (`OSMO_LINK_TEMPLATES`).

A template: `host` (a DNS name with `{name}`, `{id}`, `{project}`, `{user}`, `{namespace}` placeholders, e.g.
`{name}-{id}.nb.example.org`), `path` (the same placeholders, default `/`), `tls_secret` (a Secret of the
project's namespace holding the certificate; none: plain http), `ingress_class` and `annotations` (the site's own
sign-in proxy, say). Every filled value is checked as kube-apiserver checks an Ingress (host a DNS-1123 subdomain,
path absolute, the class a subdomain), so a template that cannot make a valid object is refused when the
settings load, and a workload whose name makes an invalid host is told at dispatch rather than refused by the
cluster."""

import re
from dataclasses import dataclass
from typing import Any

from pools.engine import ConfigError
from scheduling.specs.deployments import owner_reference

PLACEHOLDERS = ("name", "id", "project", "user", "namespace")
_KEYS = {"host", "path", "tls_secret", "ingress_class", "annotations"}
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_PLACEHOLDER = re.compile(r"\{([a-z_]*)\}")
# An annotation key: an optional DNS-subdomain prefix and '/', then a qualified name.
_ANNOTATION_KEY = re.compile(r"(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)/)?"
                             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


@dataclass(frozen=True)
class LinkTemplate:
    host: str
    path: str = "/"
    tls_secret: str = ""
    ingress_class: str = ""
    annotations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Target:
    """What one workload fills a template with, and the Service the Ingress sends to."""
    values: tuple[tuple[str, str], ...]
    service: str
    namespace: str
    port: int

    @classmethod
    def of(cls, values: dict[str, str], service: dict[str, Any], port: int) -> "Target":
        return cls(tuple(sorted(values.items())), service["metadata"]["name"], service["metadata"]["namespace"], port)


def _placeholders(text: str, where: str) -> None:
    for found in _PLACEHOLDER.findall(text):
        if found not in PLACEHOLDERS:
            raise ConfigError(f"{where}: unknown placeholder {{{found}}}; use "
                              f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}", field=where)


def parse_templates(data: Any, where: str = "OSMO_LINK_TEMPLATES") -> dict[str, LinkTemplate]:
    """`{"pool/<name>" or "backend/<name>": {host, path, tls_secret, ingress_class, annotations}}`."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a JSON object of \"pool/NAME\" or \"backend/NAME\" keys", field=where)
    found = {}
    for key, item in data.items():
        here = f"{where}.{key}"
        scope, _, name = str(key).partition("/")
        if scope not in ("pool", "backend") or not name:
            raise ConfigError(f"{here}: a key is pool/NAME or backend/NAME", field=here)
        if not isinstance(item, dict) or not isinstance(item.get("host"), str) or not item["host"]:
            raise ConfigError(f"{here}.host: field is required (e.g. \"{{name}}-{{id}}.nb.example.org\")",
                              field=f"{here}.host")
        unknown = sorted(set(item) - _KEYS)
        if unknown:
            raise ConfigError(f"{here}.{unknown[0]}: unknown field; use {', '.join(sorted(_KEYS))}",
                              field=f"{here}.{unknown[0]}")
        annotations = item.get("annotations") or {}
        if not isinstance(annotations, dict) or not all(isinstance(v, str) for v in annotations.values()):
            raise ConfigError(f"{here}.annotations: expected an object of strings", field=f"{here}.annotations")
        for annotation in annotations:
            if not _ANNOTATION_KEY.fullmatch(annotation) or len(annotation) > 316:
                raise ConfigError(f"{here}.annotations: {annotation!r} is not an annotation key",
                                  field=f"{here}.annotations")
        template = LinkTemplate(item["host"], str(item.get("path") or "/"), str(item.get("tls_secret") or ""),
                                str(item.get("ingress_class") or ""), tuple(sorted(annotations.items())))
        for field in ("host", "path"):
            _placeholders(getattr(template, field), f"{here}.{field}")
        sample = link_host(template, dict.fromkeys(PLACEHOLDERS, "x"))
        if not _SUBDOMAIN.fullmatch(sample) or len(sample) > 253:
            raise ConfigError(f"{here}.host: {template.host!r} does not make a DNS name (lower-case letters, "
                              "digits, '-' and '.')", field=f"{here}.host")
        if not template.path.startswith("/"):
            raise ConfigError(f"{here}.path: must start with /", field=f"{here}.path")
        for field in ("tls_secret", "ingress_class"):
            value = getattr(template, field)
            if value and not _SUBDOMAIN.fullmatch(value):
                raise ConfigError(f"{here}.{field}: {value!r} is not a DNS-1123 subdomain", field=f"{here}.{field}")
        found[f"{scope}/{name}"] = template
    return found


def for_workload(templates: dict[str, LinkTemplate], pool: str, backend: str) -> LinkTemplate | None:
    """The pool's template, else the backend's, else none."""
    return templates.get(f"pool/{pool}") or templates.get(f"backend/{backend}")


def _fill(text: str, values: dict[str, str], *, lower: bool) -> str:
    def one(match: re.Match) -> str:
        value = values.get(match.group(1), "")
        return re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-") if lower else value
    return _PLACEHOLDER.sub(one, text)


def link_host(template: LinkTemplate, values: dict[str, str]) -> str:
    """The host with its placeholders filled, each value as a DNS label would have it (lower case, '-')."""
    return _fill(template.host, values, lower=True)


def link_path(template: LinkTemplate, values: dict[str, str]) -> str:
    return _fill(template.path, values, lower=True)


def link_url(template: LinkTemplate, values: dict[str, str]) -> str:
    scheme = "https" if template.tls_secret else "http"
    return f"{scheme}://{link_host(template, values)}{link_path(template, values)}"


def host_problem(host: str) -> str:
    """Why a filled host is no Ingress host ("" when it is one)."""
    if len(host) > 253 or not _SUBDOMAIN.fullmatch(host) or any(len(part) > 63 for part in host.split(".")):
        return f"{host[:100]!r} is not a DNS name"
    return ""


def ingress_manifest(template: LinkTemplate, target: Target, *, labels: dict[str, str],
                     owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """The networking.k8s.io/v1 Ingress: one rule for the filled host, one Prefix path to the Service's port,
    TLS for that host when the template names a secret. Raises ConfigError when the filled host is invalid."""
    values = dict(target.values)
    host = link_host(template, values)
    problem = host_problem(host)
    if problem:
        raise ConfigError(f"link: the template's host makes {problem}", field="link")
    metadata: dict[str, Any] = {"name": target.service, "namespace": target.namespace, "labels": dict(labels)}
    if template.annotations:
        metadata["annotations"] = dict(template.annotations)
    if owner:
        metadata["ownerReferences"] = owner_reference(owner)
    path = {"path": link_path(template, values), "pathType": "Prefix",
            "backend": {"service": {"name": target.service, "port": {"number": target.port}}}}
    spec: dict[str, Any] = {"rules": [{"host": host, "http": {"paths": [path]}}]}
    if template.ingress_class:
        spec["ingressClassName"] = template.ingress_class
    if template.tls_secret:
        spec["tls"] = [{"hosts": [host], "secretName": template.tls_secret}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": metadata, "spec": spec}
