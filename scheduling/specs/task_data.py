"""What an OSMO task's pod carries for its data and its credentials (pure: no Django), added to the pod spec of the
attempt's Job at dispatch (scheduling.run.task_data):

- an emptyDir at /osmo/data, where `{{output}}` (/osmo/data/output) and `{{input:N}}` (/osmo/data/input/N) are;
- the attempt's Secret (`<job>-data`, owned by the Job): the credentials the task names, as files under their mount
  path or as environment variables, and the keys the copy steps use; values never travel in the pod spec;
- `osmo-download`, an init container that fills each `{{input:N}}` before the task starts (another task's output
  from the pool's data store, an `s3://` URL, a dataset of the store);
- `osmo-upload`, a native sidecar (an init container with restartPolicy Always, Kubernetes 1.29+) that uploads
  `{{output}}` once the task has succeeded: to the pool's data store (what later tasks read) and to each `outputs`
  URL or dataset. The user container's command is wrapped by `sh` so that it writes its exit code, waits for the
  upload and exits with its own code (1 when its upload failed).

Both copy steps run `osmo_copy.py` (standard library only) with `python3 -c` in the image the admin chose
(OSMO_DATA_COPY_IMAGE). Where a task's data lives in the store: `<prefix>/<user>/<workflow id>/<group>/`; a dataset:
`<prefix>/datasets/<name>/`.
"""

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scheduling.specs import data, osmo_tokens

COPY_SCRIPT = (Path(__file__).parent / "osmo_copy.py").read_text()
DATA_VOLUME = "osmo-data"  # the name scheduling.specs.jobs gives it too
DONE = f"{osmo_tokens.DATA_DIR}/.done"
UPLOADED = f"{osmo_tokens.DATA_DIR}/.uploaded"
STORE = "STORE"
COPY_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
# Runs the task's own command, keeps its exit code, waits for the upload sidecar, exits with the task's code (or 1
# when the task succeeded and its upload did not).
WRAPPER = ('"$@"; code=$?; echo "$code" > ' + DONE + '; while [ ! -f ' + UPLOADED + ' ]; do sleep 1; done; '
           'if [ "$code" = 0 ] && [ "$(cat ' + UPLOADED + ')" != 0 ]; then exit 1; fi; exit "$code"')


@dataclass(frozen=True)
class Store:
    """A pool's data store (its S3 endpoint, bucket and key prefix)."""

    endpoint: str
    bucket: str
    prefix: str = ""
    region: str = "us-east-1"


@dataclass
class PodData:
    """What dispatch adds to one attempt's pods. `secret_data`: the Secret's entries in clear (only ever sent to
    the API server, base64 as the Secret's `data`)."""

    secret: str
    mounts: dict[str, tuple[str, list[str]]] = field(default_factory=dict)  # credential -> (path, its keys)
    env: dict[str, tuple[str, str]] = field(default_factory=dict)  # ENV -> (credential, key)
    downloads: list[dict] = field(default_factory=list)
    uploads: list[dict] = field(default_factory=list)
    copy_creds: list[str] = field(default_factory=list)  # the copy steps' credential labels (STORE, C0, ...)
    secret_data: dict[str, str] = field(default_factory=dict)
    endpoint: str = ""
    region: str = "us-east-1"

    @property
    def empty(self) -> bool:
        return not (self.mounts or self.env or self.downloads or self.uploads)


def store_path(store: Store, *parts: str) -> str:
    return "/".join(p.strip("/") for p in (store.prefix, *parts) if p and p.strip("/"))


def plan(*, secret: str, inputs: list[data.TaskInput], outputs: list[data.TaskOutput],
         credentials: list[data.CredentialUse], payloads: dict[str, dict[str, str]], store: Store | None,
         owner: str, workflow: str, group: str, data_credentials: dict[str, str]) -> PodData:
    """The pod's data for one task. `payloads`: each credential the task or its URLs use (name -> its payload),
    `data_credentials`: for a URL's bucket, the name of the user's DATA credential whose endpoint is that bucket
    (else the store's keys are used). A task in a workflow always saves `{{output}}` to the store, when its pool has
    one, so that later tasks can read it."""
    pod = PodData(secret, endpoint=store.endpoint if store else "", region=store.region if store else "us-east-1")
    for use in credentials:
        payload = payloads.get(use.name, {})
        for key, value in payload.items():
            pod.secret_data[f"{use.name}.{key}"] = value
        if use.path:
            pod.mounts[use.name] = (use.path, sorted(payload))
        for env, key in use.env.items():
            pod.env[env] = (use.name, key)
    if store is None:
        return pod
    labels: dict[str, str] = {}

    def cred_for(bucket: str) -> str:
        name = data_credentials.get(bucket)
        if not name:
            return STORE
        if name not in labels:
            labels[name] = f"C{len(labels)}"
            payload = payloads.get(name, {})
            pod.secret_data[f"copy.{labels[name]}.id"] = payload.get("access_key_id", "")
            pod.secret_data[f"copy.{labels[name]}.key"] = payload.get("access_key", "")
        return labels[name]

    for n, item in enumerate(inputs):
        dest = osmo_tokens.input_dir(n)
        if item.task:
            bucket, prefix = store.bucket, store_path(store, owner, workflow, item.group)
        elif item.dataset:
            bucket, prefix = store.bucket, store_path(store, "datasets", item.dataset)
        else:
            bucket, prefix = data.split_url(item.url)
        pod.downloads.append({"bucket": bucket, "prefix": prefix, "dest": dest, "regex": item.regex,
                              "cred": cred_for(bucket) if item.url else STORE})
    if workflow:
        pod.uploads.append({"bucket": store.bucket, "prefix": store_path(store, owner, workflow, group),
                            "source": osmo_tokens.OUTPUT_DIR, "regex": "", "cred": STORE})
    for item in outputs:
        if item.dataset:
            bucket, prefix = store.bucket, store_path(store, "datasets", item.dataset)
        else:
            bucket, prefix = data.split_url(item.url)
        pod.uploads.append({"bucket": bucket, "prefix": prefix, "source": osmo_tokens.OUTPUT_DIR,
                            "regex": item.regex, "cred": cred_for(bucket) if item.url else STORE,
                            **({"replicas": list(item.replicas)} if item.replicas else {})})
    if pod.downloads or pod.uploads:
        store_keys = payloads.get("", {})  # the store's own keys
        pod.secret_data["copy.STORE.id"] = store_keys.get("access_key_id", "")
        pod.secret_data["copy.STORE.key"] = store_keys.get("access_key", "")
        pod.copy_creds = [STORE, *labels.values()]
    return pod


def secret_manifest(name: str, namespace: str, labels: dict[str, str], entries: dict[str, str],
                    owner: dict[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": labels}
    if owner:
        metadata["ownerReferences"] = [{"apiVersion": owner.get("apiVersion") or "batch/v1",
                                        "kind": owner.get("kind") or "Job", "name": owner["metadata"]["name"],
                                        "uid": owner["metadata"]["uid"], "controller": True,
                                        "blockOwnerDeletion": True}]
    return {"metadata": metadata, "type": "Opaque", "immutable": True,
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in sorted(entries.items())}}


def _ref(secret: str, key: str) -> dict:
    return {"valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _copy_container(name: str, image: str, pod: PodData, step: str) -> dict[str, Any]:
    plan_doc = {"endpoint": pod.endpoint, "region": pod.region, "downloads": pod.downloads, "uploads": pod.uploads,
                "done": DONE, "uploaded": UPLOADED}
    env = [{"name": "OSMO_COPY_PLAN", "value": json.dumps(plan_doc, sort_keys=True)}]
    for label in pod.copy_creds:
        env += [{"name": f"OSMO_COPY_{label}_ID", **_ref(pod.secret, f"copy.{label}.id")},
                {"name": f"OSMO_COPY_{label}_KEY", **_ref(pod.secret, f"copy.{label}.key")}]
    return {"name": name, "image": image, "command": ["python3", "-c", COPY_SCRIPT, step], "env": env,
            "resources": COPY_RESOURCES, "volumeMounts": [{"name": DATA_VOLUME, "mountPath": osmo_tokens.DATA_DIR}]}


def apply(pod_spec: dict[str, Any], pod: PodData, image: str, user_container: str = "user") -> None:
    """Adds the pod's data to `pod_spec` (a Job's pod template spec), in place."""
    if pod.empty:
        return
    containers = pod_spec.get("containers") or []
    user = next((c for c in containers if c.get("name") == user_container), containers[0] if containers else None)
    if user is None:
        return
    volumes = pod_spec.setdefault("volumes", [])
    mounts = user.setdefault("volumeMounts", [])
    if (pod.downloads or pod.uploads) and not any(v.get("name") == DATA_VOLUME for v in volumes):
        volumes.append({"name": DATA_VOLUME, "emptyDir": {}})  # else the Job's own (scheduling.specs.jobs)
    if (pod.downloads or pod.uploads) and not any(m.get("mountPath") == osmo_tokens.DATA_DIR for m in mounts):
        mounts.append({"name": DATA_VOLUME, "mountPath": osmo_tokens.DATA_DIR})
    for index, (credential, (path, keys)) in enumerate(sorted(pod.mounts.items())):
        volume = f"osmo-credential-{index}"
        volumes.append({"name": volume, "secret": {"secretName": pod.secret, "defaultMode": 0o400, "items": [
            {"key": f"{credential}.{key}", "path": key} for key in keys]}})
        mounts.append({"name": volume, "mountPath": path, "readOnly": True})
    env = user.setdefault("env", [])
    for name, (credential, key) in sorted(pod.env.items()):
        env.append({"name": name, **_ref(pod.secret, f"{credential}.{key}")})
    init = pod_spec.setdefault("initContainers", [])
    if pod.downloads:
        init.append(_copy_container("osmo-download", image, pod, "download"))
    if pod.uploads:
        init.append({**_copy_container("osmo-upload", image, pod, "finish"), "restartPolicy": "Always"})
        command = [*(user.get("command") or []), *(user.get("args") or [])]
        user["command"], user["args"] = ["/bin/sh", "-c", WRAPPER, "osmo-task", *command], []
