"""Backends that share one cluster (`backend add --same-cluster-as`, or the same kube-system uid) share its nodes:
the first registered of them (the lowest id) owns the cluster's inventory, its Node and Pod rows, one row per
physical node; every backend of the cluster keeps syncing its own Jobs, Events and engine objects, and the nodes'
pool memberships come from the pools of every backend of the cluster (docs/architecture/decisions.md, "One
physical node, one row")."""

from pools.models import Backend


def owners() -> dict[int, int]:
    """Every backend's id -> the id of the backend that owns its cluster's nodes (itself when alone). One query."""
    rows = list(Backend.objects.order_by("pk").values_list("pk", "name", "cluster_uid", "same_cluster_as"))
    parent = {pk: pk for pk, *_ in rows}

    def root(pk: int) -> int:
        while parent[pk] != pk:
            parent[pk] = parent[parent[pk]]
            pk = parent[pk]
        return pk

    def join(a: int, b: int) -> None:
        first, second = root(a), root(b)
        if first != second:
            parent[max(first, second)] = min(first, second)

    by_name = {name: pk for pk, name, _uid, _same in rows}
    by_uid: dict[str, int] = {}
    for pk, _name, uid, same_as in rows:
        if uid:
            join(pk, by_uid.setdefault(uid, pk))
        if same_as in by_name:
            join(pk, by_name[same_as])
    return {pk: root(pk) for pk in parent}


def owner_id(backend: Backend) -> int:
    return owners().get(backend.pk, backend.pk)


def cluster_ids(backend_id: int) -> list[int]:
    """The ids of every backend sharing `backend_id`'s cluster, itself included."""
    found = owners()
    owner = found.get(backend_id, backend_id)
    return sorted(pk for pk, root in found.items() if root == owner) or [backend_id]
