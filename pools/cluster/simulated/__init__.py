"""A simulated GPU cluster for the embedded demo, behind the same interface as the real client.

The demo runs the web server, a Celery worker, Celery beat and CLI commands as separate processes, and all of
them must see one cluster. So what the cluster holds at a moment is a pure function of (seed, tick): any process
computes the same nodes and pods for the same tick without talking to the others. Only what users change (node
labels, cordons, Jobs, custom objects) is stored, in a small JSON file read under a shared lock and replaced
atomically under an exclusive one.

A resourceVersion is `tick * RV_PER_TICK + n`, where n counts user changes within the tick; the state at any
resourceVersion can be rebuilt, which gives consistent list pages and exact watch diffs for free.

Modules, each depending only on those before it: randomness (deterministic hashing, timestamps, JSON), fleet
(hardware, nodes, troubles, Node objects; the demo's 250-node fleet, or the 14-node "kai" lab for clusters named
kai-...), workloads (daemonset and workload pods), store (the state file, the overlay of user changes, views,
continue tokens), jobs (the Job controller), objects (custom objects such as KAI's and Kueue's, every version
kept), kai (the KAI scheduler: Jobs of kai-scheduler placed whole through their PodGroups, within their Queues,
and the status both carry) and cluster (SimulatedCluster).
"""

from .cluster import SimulatedCluster
from .fleet import A100_TAINT, POOL_LABEL, RV_PER_TICK, TROUBLES
from .jobs import DURATION_ANNOTATION, OUTCOME_ANNOTATION
from .randomness import timestamp
from .store import FORGET_DELETED_JOBS_SECONDS, MAX_OPS, RETENTION_SECONDS
from .workloads import DS_DCGM, DS_TOOLKIT

_ts = timestamp  # under the name the tests use

__all__ = [
    "A100_TAINT",
    "DS_DCGM",
    "DS_TOOLKIT",
    "DURATION_ANNOTATION",
    "FORGET_DELETED_JOBS_SECONDS",
    "MAX_OPS",
    "OUTCOME_ANNOTATION",
    "POOL_LABEL",
    "RETENTION_SECONDS",
    "RV_PER_TICK",
    "TROUBLES",
    "SimulatedCluster",
]
