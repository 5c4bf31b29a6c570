"""The data copy that runs in a task's pod (OSMO's inputs and outputs): `download` before the task starts (an init
container), `upload` once it has ended (a native sidecar). Standard library only, so that any image with Python 3
runs it (OSMO_DATA_COPY_IMAGE, default python:3.12-alpine): an S3 client (ListObjectsV2, GetObject, PutObject,
signed with AWS Signature Version 4) over urllib. It is passed to `python3 -c` as it is, and reads its plan from the
environment:

- OSMO_COPY_PLAN: JSON `{"endpoint", "region", "downloads": [{"bucket", "prefix", "dest", "regex", "cred"}],
  "uploads": [{"bucket", "prefix", "source", "regex", "cred", "replicas"?}], "done": path, "uploaded": path}`;
- OSMO_COPY_<CRED>_ID / OSMO_COPY_<CRED>_KEY: each credential's keys (from the attempt's Secret, never the plan).

`upload` waits for the task's wrapper to write `done` (its exit code), uploads only after a success (as OSMO does:
a failed or canceled task's output is not uploaded), then writes `uploaded` (0, or 1 when the upload failed), which
the wrapper waits for before it exits. Exit codes: 0 done, 1 a copy failed (the message says which object).
"""

import datetime
import hashlib
import hmac
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

CHUNK = 1 << 20
TIMEOUT = 60


def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def _request(plan: dict, cred: str, method: str, bucket: str, key: str = "", query: dict | None = None,
             body: bytes = b"", stream=None):
    """One signed request, path-style (`endpoint/bucket/key`), as every S3-compatible store takes it."""
    endpoint = urllib.parse.urlsplit(plan["endpoint"])
    region = plan.get("region") or "us-east-1"
    access_id = os.environ.get(f"OSMO_COPY_{cred}_ID", "")
    secret = os.environ.get(f"OSMO_COPY_{cred}_KEY", "")
    now = datetime.datetime.now(datetime.UTC)
    stamp, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    path = "/" + urllib.parse.quote(bucket) + ("/" + urllib.parse.quote(key, safe="/~") if key else "")
    path = (endpoint.path.rstrip("/") + path) if endpoint.path not in ("", "/") else path
    pairs = sorted((urllib.parse.quote(k, safe="~"), urllib.parse.quote(str(v), safe="~"))
                   for k, v in (query or {}).items())
    canonical_query = "&".join(f"{k}={v}" for k, v in pairs)
    payload_hash = "UNSIGNED-PAYLOAD" if stream is not None else hashlib.sha256(body).hexdigest()
    headers = {"host": endpoint.netloc, "x-amz-content-sha256": payload_hash, "x-amz-date": stamp}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, path, canonical_query, *(f"{k}:{headers[k]}" for k in sorted(headers)), "",
                           signed, payload_hash])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key_bytes = _sign(_sign(_sign(_sign(f"AWS4{secret}".encode(), day), region), "s3"), "aws4_request")
    signature = hmac.new(key_bytes, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (f"AWS4-HMAC-SHA256 Credential={access_id}/{scope}, SignedHeaders={signed}, "
                                f"Signature={signature}")
    url = f"{endpoint.scheme}://{endpoint.netloc}{path}" + (f"?{canonical_query}" if canonical_query else "")
    data = stream if stream is not None else (body if method == "PUT" else None)
    if data is not None:  # else urllib sends a form's content type, and a server may read the body as a form
        headers["content-type"] = "application/octet-stream"
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    return urllib.request.urlopen(request, timeout=TIMEOUT)


def _keys(plan: dict, cred: str, bucket: str, prefix: str):
    """Every key under `prefix`, page by page."""
    token = None
    while True:
        query = {"list-type": "2", "prefix": prefix}
        if token:
            query["continuation-token"] = token
        with _request(plan, cred, "GET", bucket, query=query) as answer:
            tree = ET.fromstring(answer.read())
        space = tree.tag.partition("}")[0] + "}" if tree.tag.startswith("{") else ""
        for item in tree.iter(f"{space}Contents"):
            yield item.find(f"{space}Key").text
        if (tree.findtext(f"{space}IsTruncated") or "").lower() != "true":
            return
        token = tree.findtext(f"{space}NextContinuationToken")


def _inside(root: str, relative: str) -> str:
    target = os.path.realpath(os.path.join(root, relative))
    if not target.startswith(os.path.realpath(root) + os.sep):
        raise ValueError(f"{relative!r} would be written outside {root}")
    return target


def download(plan: dict) -> None:
    for item in plan.get("downloads", []):
        prefix = item["prefix"].strip("/")
        base = prefix + "/" if prefix else ""
        pattern = re.compile(item["regex"]) if item.get("regex") else None
        os.makedirs(item["dest"], exist_ok=True)
        count = 0
        for key in _keys(plan, item["cred"], item["bucket"], base):
            relative = key[len(base):]
            if not relative or relative.endswith("/") or (pattern and not pattern.search(relative)):
                continue
            target = _inside(item["dest"], relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with _request(plan, item["cred"], "GET", item["bucket"], key) as answer, open(target, "wb") as out:
                while chunk := answer.read(CHUNK):
                    out.write(chunk)
            count += 1
        print(f"osmo-copy: {count} objects from s3://{item['bucket']}/{base} into {item['dest']}", flush=True)


def upload(plan: dict) -> None:
    index = os.environ.get("JOB_COMPLETION_INDEX", "")  # set by the Job controller in every container of its pods
    for item in plan.get("uploads", []):
        if "replicas" in item and not (index.isdigit() and int(index) in item["replicas"]):
            continue  # another task's output: an OSMO group's tasks each upload their own
        source, prefix = item["source"], item["prefix"].strip("/")
        pattern = re.compile(item["regex"]) if item.get("regex") else None
        count = 0
        for folder, _, files in os.walk(source):
            for name in sorted(files):
                path = os.path.join(folder, name)
                relative = os.path.relpath(path, source).replace(os.sep, "/")
                if pattern and not pattern.search(relative):
                    continue
                key = f"{prefix}/{relative}" if prefix else relative
                with open(path, "rb") as handle:
                    _request(plan, item["cred"], "PUT", item["bucket"], key, body=handle.read()).close()
                count += 1
        print(f"osmo-copy: {count} objects from {source} to s3://{item['bucket']}/{prefix}", flush=True)


def finish(plan: dict) -> int:
    """The sidecar: wait for the task's exit code, upload after a success, tell the wrapper how it went."""
    while not os.path.exists(plan["done"]):
        time.sleep(1)
    with open(plan["done"]) as handle:
        code = handle.read().strip()
    result = 0
    if code == "0":
        try:
            upload(plan)
        except Exception as exc:
            print(f"osmo-copy: upload failed: {exc}", file=sys.stderr, flush=True)
            result = 1
    with open(plan["uploaded"], "w") as handle:
        handle.write(str(result))
    while True:  # a native sidecar runs until the pod's main container has ended; the kubelet then stops it
        time.sleep(3600)


def main(argv: list[str]) -> int:
    plan = json.loads(os.environ["OSMO_COPY_PLAN"])
    try:
        if argv[:1] == ["download"]:
            download(plan)
        elif argv[:1] == ["upload"]:
            upload(plan)
        elif argv[:1] == ["finish"]:
            return finish(plan)
        else:
            print("usage: osmo_copy.py download|upload|finish", file=sys.stderr)
            return 2
    except Exception as exc:
        print(f"osmo-copy: {argv[0]} failed: {exc}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
