"""What waiting work asks for, per project and pool: the pending half of fair share's demand (allocated + pending,
docs/concepts.md). `pools` knows no workloads (`scheduling` imports `pools`, never the reverse), so this module is
the interface and `scheduling` fills it: at start it registers the one provider (`scheduling.apps`), which reads
its pending workloads. Without a provider (pools alone) nothing waits. docs/architecture/decisions.md, "Pending
demand reaches the quota table"."""

from collections.abc import Callable, Iterable

# (project name, pool name) -> (GPUs, CPU millicores, memory bytes) that the project's pending workloads ask for in
# that pool, all replicas together.
Pending = dict[tuple[str, str], tuple[int, int, int]]
Provider = Callable[[list[str]], Pending]

_providers: list[Provider] = []


def provide(provider: Provider) -> None:
    """Register the provider of pending demand (once; registering the same one again changes nothing)."""
    if provider not in _providers:
        _providers.append(provider)


def pending(pool_names: Iterable[str]) -> Pending:
    """The pending demand in `pool_names`, from every registered provider."""
    names = list(pool_names)
    found: Pending = {}
    for provider in _providers:
        for key, (gpu, cpu, memory) in provider(names).items():
            before = found.get(key, (0, 0, 0))
            found[key] = (before[0] + gpu, before[1] + cpu, before[2] + memory)
    return found
