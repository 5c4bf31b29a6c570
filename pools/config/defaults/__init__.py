"""The default configuration that OSMO ships (pod templates, validation rule sets, the default
pool), loaded by `config init`. Existing objects are left as they are, so it is safe to rerun."""

import json
from pathlib import Path

from django.db import transaction
from django.dispatch import Signal

from pools.config import writes
from pools.models import Backend, ConfigKind, Department, PodTemplate, Pool, Project, ResourceValidation

DEFAULTS_FILE = Path(__file__).with_name("osmo-defaults.json")
DEMO_FILE = Path(__file__).with_name("demo.json")
# Sent by `manage.py demo` once the demo's configuration and clusters are loaded, for the apps built on pools to add
# their own demo data (scheduling: a week of usage history); each receiver answers a line to print, or "".
demo_loaded = Signal()


def load_defaults() -> dict:
    return json.loads(DEFAULTS_FILE.read_text())


def init_defaults(author="config init") -> list[writes.WriteResult]:
    return _load_missing(load_defaults(), author, "Default configuration")


def init_demo(author="demo") -> list[writes.WriteResult]:
    """The demo's pod templates and pools (training, simulation, inference, dev) for the simulated
    cluster of the `default` backend, and its departments and projects (their namespaces are those of the
    simulated workload pods, so the quota table has figures); loads the defaults first, as the demo builds
    on them."""
    return init_defaults(author) + _load_missing(json.loads(DEMO_FILE.read_text()), author, "Demo configuration")


def _load_missing(defaults: dict, author: str, description: str) -> list[writes.WriteResult]:
    results = []
    with transaction.atomic():
        Backend.objects.get_or_create(
            name="default",
            defaults={"kind": Backend.Kind.SIMULATED, "description": "Simulated cluster for the demo"},
        )
        for kind, model, key in (
            (ConfigKind.POD_TEMPLATE, PodTemplate, "pod_templates"),
            (ConfigKind.RESOURCE_VALIDATION, ResourceValidation, "resource_validations"),
            (ConfigKind.POOL, Pool, "pools"),
            (ConfigKind.DEPARTMENT, Department, "departments"),
            (ConfigKind.PROJECT, Project, "projects"),
        ):
            present = set(model.objects.values_list("name", flat=True))
            missing = {name: doc for name, doc in defaults.get(key, {}).items() if name not in present}
            if missing:
                document = {"pools": missing} if kind == ConfigKind.POOL else missing
                results.append(writes.import_document(kind, document, author=author,
                                                       description=description))
    return results
