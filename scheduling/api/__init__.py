"""The REST doors: the workloads API, the OSMO-shaped paths and the request/answer schemas."""
