"""Shapes (no Django): the request a researcher sends, the OSMO and gpuctl file formats, pod env rules,
the Job and PodGroup manifests we send."""
