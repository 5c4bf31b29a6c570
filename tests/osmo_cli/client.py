"""A client that speaks exactly the HTTP of NVIDIA's OSMO CLI (NVIDIA/OSMO, src/cli, 6.4.0), written from its
documented behaviour: `osmo login URL --method token --token T` posts `{"token": T}` to
`/api/auth/jwt/access_token`, keeps the JWT of the answer's `token` (reading its `exp` and `name` from the
payload without checking the signature), sends it as `Authorization: Bearer` with `Content-Type:
application/json` and `x-osmo-client-version` on every call, and posts the same path again when `exp` is less
than 3 s away. Errors, as `handle_response` in src/lib/utils/client.py reads them: a 4xx JSON body with an
`error_code` raises with its `message` (a submission's `USAGE` or `RESOURCE` as a submission error, which the
CLI prints after "Workflow submit failed:"), any other 4xx with the body's text as it is."""

import base64
import json
import time
from dataclasses import dataclass

import requests

CLIENT_VERSION = "6.4.0"
EXPIRE_WINDOW = 3  # the CLI refreshes a token that expires within 3 s


class OsmoError(Exception):
    def __init__(self, status: int, text: str):
        super().__init__(f"{status}: {text[:500]}")
        self.status, self.text = status, text
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        coded = isinstance(body, dict) and "error_code" in body
        self.code = body["error_code"] if coded else None
        self.message = body["message"] if coded else text  # what the CLI prints
        self.submission = self.code in ("USAGE", "RESOURCE")


def claims(jwt: str) -> dict:
    """As the CLI reads a JWT: the payload, base64url, unchecked."""
    _, payload, _ = jwt.split(".")
    return json.loads(base64.urlsafe_b64decode(payload + "==").decode("utf-8"))


@dataclass
class OsmoClient:
    url: str
    access_token: str = ""
    id_token: str = ""
    refreshes: int = 0

    # ---- osmo login / the refresh before each call ----------------------------------------------------------
    def login(self, token: str) -> dict:
        self.access_token = token
        answer = requests.post(f"{self.url}/api/auth/jwt/access_token", json={"token": token}, timeout=60)
        if answer.status_code >= 300:
            raise OsmoError(answer.status_code, answer.text)
        self.id_token = answer.json()["token"]
        return answer.json()

    def refresh_if_expiring(self) -> None:
        if claims(self.id_token)["exp"] - EXPIRE_WINDOW < time.time():
            answer = requests.post(f"{self.url}/api/auth/jwt/access_token", json={"token": self.access_token},
                                   timeout=60)
            if answer.status_code >= 300:
                raise OsmoError(answer.status_code, f"Unable to refresh login token: {answer.text}")
            self.id_token = answer.json()["token"]
            self.refreshes += 1

    @property
    def name(self) -> str:
        return claims(self.id_token).get("name", "")

    # ---- ServiceClient.request -------------------------------------------------------------------------------
    def request(self, method: str, endpoint: str, payload=None, params=None, text: bool = False,
                version_header: bool = True):
        self.refresh_if_expiring()
        headers = {"Authorization": f"Bearer {self.id_token}", "Content-Type": "application/json",
                   "User-Agent": f"osmo-cli/{CLIENT_VERSION}"}
        if version_header:
            headers["x-osmo-client-version"] = CLIENT_VERSION
        answer = requests.request(method, f"{self.url}/{endpoint}", params=params, json=payload, headers=headers,
                                  timeout=60, stream=text)
        if answer.status_code >= 400:
            raise OsmoError(answer.status_code, answer.text)
        if text:
            return [line.decode("utf-8") for line in answer.iter_lines()]
        return json.loads(answer.text)

    # ---- the commands, each as the CLI sends it ---------------------------------------------------------------
    def pool_list(self, pools=()):
        return self.request("GET", "/api/pool_quota", params={"pools": list(pools), "all_pools": not pools})

    def profile_list(self):
        return self.request("GET", "api/profile/settings")

    def profile_set_pool(self, pool: str):
        return self.request("POST", "api/profile/settings", payload={"pool": pool}, params={})

    def default_pool(self) -> str:
        pool = self.profile_list().get("profile", {}).get("pool")
        if pool:
            return pool
        names = {p["name"] for s in self.pool_list()["node_sets"] for p in s["pools"]}
        if len(names) == 1:
            return next(iter(names))
        raise OsmoError(0, "No default pool set.")

    def resource_list(self, pools=(), platforms=(), all_pools=False):
        pools = list(pools) or [self.default_pool()]
        known = self.request("GET", "/api/pool", params={})["pools"]
        for name in pools:
            if name not in known:
                raise OsmoError(0, f"Pool {name} does not exist!")
        params = {"pools": pools, "all_pools": all_pools}
        if platforms:
            params["platforms"] = list(platforms)
        return self.request("GET", "api/resources", params=params)

    def resource_info(self, node: str):
        return self.request("GET", f"api/resources/{node}")

    def submit(self, text: str, pool: str | None = None, set_variables=(), dry_run=False, priority=None):
        """`osmo workflow submit FILE [--pool P] [--set K=V ...] [--dry-run]`: a templated file (or a dry run) is
        posted with dry_run=True first; a templated file's answer `spec` is read as YAML and submitted."""
        import yaml

        pool = pool or self.default_pool()
        params = {"priority": priority} if priority else {}
        templated = any(marker in text for marker in ("{%", "{{", "{#", "default-values"))
        data = {"file": text, "set_variables": list(set_variables), "set_string_variables": [],
                "uploaded_templated_spec": None}
        result = None
        if templated or dry_run:
            params["dry_run"] = True
            result = self.request("POST", f"api/pool/{pool}/workflow", payload=data, params=params)
            if dry_run:
                return result
            params["dry_run"] = False
        if templated:
            data["uploaded_templated_spec"] = data["file"]
            document = yaml.safe_load(result["spec"])
        else:
            document = yaml.safe_load(text)
        data["file"] = yaml.dump(document)
        return self.request("POST", f"api/pool/{pool}/workflow", payload=data, params=params)

    def workflow_list(self, count=20):
        return self.request("GET", "api/workflow", params={"order": "DESC", "all_pools": True, "limit": count,
                                                            "offset": 0})

    def query(self, name: str):
        return self.request("GET", f"api/workflow/{name}", params={"verbose": False})

    def logs(self, name: str, task=None, last_n_lines=None, error=False):
        params = {}
        if last_n_lines:
            params["last_n_lines"] = last_n_lines
        if task:
            params["task_name"] = task
        return self.request("GET", f"api/workflow/{name}/{'error_logs' if error else 'logs'}", params=params,
                            text=True)

    def events(self, name: str, task=None):
        return self.request("GET", f"api/workflow/{name}/events", params={"task_name": task} if task else {},
                            text=True)

    def spec(self, name: str, template=False):
        return self.request("GET", f"api/workflow/{name}/spec", params={"use_template": template}, text=True)

    def cancel(self, name: str):
        return self.request("POST", f"api/workflow/{name}/cancel", params={"force": False})

    def token_list(self):
        return self.request("GET", "api/auth/access_token")

    def user_list(self, count=100):
        return self.request("GET", "api/auth/user", params={"count": count})

    def version(self):
        return self.request("GET", "api/version", version_header=False)

    # ---- osmo credential set/list/delete (src/cli/credential.py) --------------------------------------------
    def credential_set(self, name: str, cred_type: str, payload: dict):
        """`osmo credential set NAME --type T --payload k=v ...`: a GENERIC payload is wrapped in `credential`."""
        body = {"credential": payload} if cred_type == "GENERIC" else payload
        return self.request("POST", f"api/credentials/{name}", payload={f"{cred_type.lower()}_credential": body})

    def credential_list(self):
        return self.request("GET", "api/credentials")

    def credential_delete(self, name: str):
        return self.request("DELETE", f"api/credentials/{name}")


# A plain one-task workflow file, as OSMO's tutorials write one.
PLAIN = """workflow:
  name: plain-train
  resources:
    default: {gpu: 1, cpu: 2, memory: 4Gi}
  tasks:
  - name: trainer
    image: nvcr.io/nvidia/pytorch:24.05-py3
    command: [python, train.py]
"""
