"""What the pages ask of the apps above pools, as signals (pools may not import scheduling). Apart from the
page modules, so that an app's ready() connects to them without importing the views (and, through them, every
page's tables and charts): every `manage.py` command starts by running ready()."""

from django.dispatch import Signal

workload_links = Signal()
"""Sent by the node page (`pools.pages.node_page`) with `request` and `ids` (the workload ids of the pods shown); a
receiver answers {id: url} for the workloads the viewer may open. The scheduling app answers."""
