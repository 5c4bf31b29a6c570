"""The submission limits a project's document may set (pure: no Django). `scheduling.submit.limits` enforces them;
each one's default is a setting."""

from dataclasses import dataclass

from pools.engine import ConfigError


@dataclass(frozen=True)
class Limit:
    name: str  # the key of a project's `limits`
    setting: str
    default: int
    what: str


LIMITS = {limit.name: limit for limit in (
    Limit("live_per_user", "OSMO_MAX_LIVE_WORKLOADS_PER_USER", 200, "pending or admitted workloads per user"),
    Limit("live_per_project", "OSMO_MAX_LIVE_WORKLOADS_PER_PROJECT", 1000,
          "pending or admitted workloads per project"),
    Limit("tasks_per_workflow", "OSMO_MAX_TASKS_PER_WORKFLOW", 100, "task groups (workloads) per workflow"),
    Limit("replicas", "OSMO_MAX_REPLICAS", 128, "replicas per workload"),
    Limit("env_entries", "OSMO_MAX_ENV_ENTRIES", 100, "env entries per workload"),
    Limit("command_bytes", "OSMO_MAX_COMMAND_BYTES", 65536, "bytes of command and args together"),
    Limit("pools_per_request", "OSMO_MAX_POOLS_PER_REQUEST", 20, "candidate pools per request"),
)}


def check_document(value) -> dict[str, int]:
    """A project document's `limits`: known names, whole numbers from 0 (pure; raises ConfigError)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError("limits: expected an object such as {\"replicas\": 512}", field="limits")
    for name, number in value.items():
        if name not in LIMITS:
            raise ConfigError(f"limits.{name}: unknown limit; use one of {', '.join(LIMITS)}", field=f"limits.{name}")
        if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number <= 2 ** 31 - 1:
            raise ConfigError(f"limits.{name}: expected a whole number from 0, got {number!r}",
                              field=f"limits.{name}")
    return dict(sorted(value.items()))
