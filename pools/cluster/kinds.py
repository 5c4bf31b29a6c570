"""The custom resources of the KAI scheduler and of Kueue that the pools configure and read back.

Versions are the ones those projects serve today (KAI v2 Queues and v2alpha2 PodGroups, Kueue v1beta2); moving
to a newer one is a change here only.
"""

from .interface import ObjectKind

KAI_QUEUE = ObjectKind("scheduling.run.ai", "v2", "queues", "Queue")
KAI_TOPOLOGY = ObjectKind("kai.scheduler", "v1alpha1", "topologies", "Topology")
KAI_PODGROUP = ObjectKind("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", namespaced=True)

KUEUE_RESOURCE_FLAVOR = ObjectKind("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor")
KUEUE_CLUSTER_QUEUE = ObjectKind("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue")
KUEUE_COHORT = ObjectKind("kueue.x-k8s.io", "v1beta2", "cohorts", "Cohort")
KUEUE_LOCAL_QUEUE = ObjectKind("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", namespaced=True)
KUEUE_WORKLOAD = ObjectKind("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", namespaced=True)

# Core kinds our workloads write next to their Jobs (owned by them): a gang's headless Service, a task's files.
SERVICE = ObjectKind("", "v1", "services", "Service", namespaced=True)
CONFIG_MAP = ObjectKind("", "v1", "configmaps", "ConfigMap", namespaced=True)
# The Secret holding what an attempt's pods are given of their user's credentials and of their pool's data store
# (scheduling.run.task_data), owned by the attempt's Job.
SECRET = ObjectKind("", "v1", "secrets", "Secret", namespaced=True)

ALL_KINDS = (KAI_QUEUE, KAI_TOPOLOGY, KAI_PODGROUP, KUEUE_RESOURCE_FLAVOR, KUEUE_CLUSTER_QUEUE, KUEUE_COHORT,
             KUEUE_LOCAL_QUEUE, KUEUE_WORKLOAD)

# The built-in kinds a long-running workload writes (issue 43): served by every API server, through the same
# generic calls. The core group ("") lives under /api/v1, the others under /apis/<group>/<version>.
DEPLOYMENT = ObjectKind("apps", "v1", "deployments", "Deployment", namespaced=True)
STATEFULSET = ObjectKind("apps", "v1", "statefulsets", "StatefulSet", namespaced=True)
SERVICE = ObjectKind("", "v1", "services", "Service", namespaced=True)
INGRESS = ObjectKind("networking.k8s.io", "v1", "ingresses", "Ingress", namespaced=True)
WORKLOAD_KINDS = {kind.kind: kind for kind in (DEPLOYMENT, STATEFULSET, SERVICE, INGRESS)}
