"""The cluster's picture as rows (the Django side of `pools.inventory`): the sync, usage sums, node labels,
gpuctl pool files, which pools each node belongs to, and usage snapshots."""
