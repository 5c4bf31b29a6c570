"""The rendering budgets (`pools.engine.sandbox`) and the YAML expansion limit (`pools.engine.jsonread`) from the
settings: pushed into those pure modules at start-up, and again whenever a setting changes (tests)."""

from django.conf import settings
from django.core.signals import setting_changed  # not django.test.signals: that imports the test client

from pools.engine import jsonread, sandbox

_NAMES = {"OSMO_YAML_MAX_EXPANDED", *sandbox.SETTINGS.values()}


def render_limits() -> sandbox.Limits:
    default = sandbox.Limits()
    return sandbox.Limits(**{key: type(getattr(default, key))(getattr(settings, name, getattr(default, key)))
                             for key, name in sandbox.SETTINGS.items()})


def apply(**_: object) -> None:
    sandbox.defaults = render_limits()
    jsonread.MAX_EXPANDED = int(getattr(settings, "OSMO_YAML_MAX_EXPANDED", 4 * 1024 * 1024))


def _changed(setting: str, **_: object) -> None:
    if setting in _NAMES:
        apply()


def connect() -> None:
    apply()
    setting_changed.connect(_changed, dispatch_uid="pools.render_limits")
