"""Credentials (issue 41 point 6): stored through OSMO's paths as `osmo credential` sends them and through the profile
page; listed by name, type and key names only; nobody else's to see, use or delete; a task naming one gets it from
its attempt's Secret in the project's namespace (env or files), and its value is in no answer, event, audit row, page,
log line or pod spec. The stand-in refuses a Secret as kube-apiserver does."""

import json

import pytest
from rest_framework.test import APIClient

from pools.cluster import ClusterError
from pools.cluster.kinds import SECRET
from pools.models import AuditEvent
from scheduling.models import Credential, Workload
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.osmo_cli.client import OsmoError
from tests.osmo_cli.test_osmo_cli import osmo  # noqa: F401 - the signed-in CLI client fixture

pytestmark = pytest.mark.django_db

VALUE = "hf_zq-credential-value-123"
USES = """
workflow:
  name: uses-creds
  resources:
    default: {cpu: 1, gpu: 1, memory: 1Gi}
  tasks:
  - name: fetch
    image: ubuntu:24.04
    command: [sh, -c, "test -n \\"$HF_TOKEN\\" && ls /root/.keys"]
    credentials:
      hf: {HF_TOKEN: token}
      keys: /root/.keys
"""


def seen_nowhere(*texts) -> bool:
    return all(VALUE not in text for text in texts)


def test_the_cli_sets_lists_and_deletes_and_no_value_is_ever_answered(osmo, world, client, caplog):  # noqa: F811
    answer = osmo.credential_set("hf", "GENERIC", {"token": VALUE})
    assert answer == {"credentials": [{"cred_name": "hf", "cred_type": "GENERIC", "profile": "", "keys": ["token"]}]}
    osmo.credential_set("s3-data", "DATA", {"access_key_id": "AKIA", "access_key": VALUE,
                                            "endpoint": "s3://team-bucket"})
    listed = osmo.credential_list()
    assert [(c["cred_name"], c["cred_type"], c["profile"]) for c in listed["credentials"]] == [
        ("hf", "GENERIC", ""), ("s3-data", "DATA", "s3://team-bucket")]
    osmo.credential_set("hf", "GENERIC", {"token": VALUE + "2", "user": "me"})  # replaced, as the CLI's set does
    assert Credential.objects.get(name="hf").keys == ["token", "user"]
    assert Credential.objects.get(name="hf").payload()["token"] == VALUE + "2"

    row = Credential.objects.get(name="s3-data")
    client.force_login(world["researcher"])
    page = client.get("/profile/").content.decode()
    assert "s3-data" in page and "access_key_id" in page
    audits = " ".join(AuditEvent.objects.values_list("summary", flat=True))
    assert "credential hf" in audits
    assert seen_nowhere(json.dumps(listed), row.sealed, page, audits, caplog.text)

    with pytest.raises(OsmoError) as refused:
        osmo.credential_set("9bad", "GENERIC", {"k": "v"})
    assert refused.value.status == 400 and json.loads(refused.value.text)["field"] == "name"
    with pytest.raises(OsmoError) as refused:
        osmo.credential_set("d", "DATA", {"access_key_id": "x", "endpoint": "s3://b-1"})
    assert json.loads(refused.value.text)["field"] == "data_credential.access_key"

    assert osmo.credential_delete("hf")["credentials"][0]["cred_name"] == "hf"
    with pytest.raises(OsmoError) as missing:
        osmo.credential_delete("hf")
    assert missing.value.status == 404


def test_another_user_neither_sees_uses_nor_deletes_ones_credential(world, researcher_api):
    researcher_api.post("/api/credentials/hf", {"generic_credential": {"credential": {"token": VALUE}}},
                        format="json")
    other = APIClient()
    other.force_authenticate(world["other"])
    assert other.get("/api/credentials").json() == {"credentials": []}
    assert other.delete("/api/credentials/hf").status_code == 404
    response = other.post("/api/pool/training/workflow?project=nlp", {"file": USES.replace("      keys: /root/.keys\n",
                                                                                          "")}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "workflow.groups[0].credentials.hf"
    assert "you have no credential named hf" in response.json()["detail"]
    assert Credential.objects.filter(name="hf").count() == 1 and not Workload.objects.exists()


def test_a_key_the_credential_lacks_is_a_400_naming_it(researcher_api):
    researcher_api.post("/api/credentials/hf", {"generic_credential": {"credential": {"token": VALUE}}},
                        format="json")
    researcher_api.post("/api/credentials/keys", {"generic_credential": {"credential": {"id_rsa": "k"}}},
                        format="json")
    response = researcher_api.post("/api/pool/training/workflow?project=vision",
                                   {"file": USES.replace("HF_TOKEN: token", "HF_TOKEN: tokn")}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "workflow.groups[0].credentials.hf.HF_TOKEN"


def test_a_task_gets_its_credentials_from_its_attempts_secret_and_nowhere_else(standin, kube, researcher_api,
                                                                               caplog):
    standin.strict_namespaces = True
    researcher_api.post("/api/credentials/hf", {"generic_credential": {"credential": {"token": VALUE}}},
                        format="json")
    researcher_api.post("/api/credentials/keys", {"generic_credential": {"credential": {"id_rsa": VALUE,
                                                                                        "known_hosts": "h"}}},
                        format="json")
    response = researcher_api.post("/api/pool/training/workflow?project=vision", {"file": USES}, format="json")
    assert response.status_code == 200, response.json()
    run_cycle()
    workload = Workload.objects.get()
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"

    (job,) = standin.jobs()
    (secret,) = standin.core_objects("secrets")
    namespace = job["metadata"]["namespace"]
    assert secret["metadata"]["namespace"] == namespace
    assert secret["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]  # gone with the Job
    assert sorted(secret["data"]) == ["hf.token", "keys.id_rsa", "keys.known_hosts"]
    spec = job["spec"]["template"]["spec"]
    user = spec["containers"][0]
    secret_name = secret["metadata"]["name"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret_name, "key": "hf.token"}}} in user["env"]
    (volume,) = [v for v in spec["volumes"] if "secret" in v]
    assert volume["secret"]["items"] == [{"key": "keys.id_rsa", "path": "id_rsa"},
                                         {"key": "keys.known_hosts", "path": "known_hosts"}]
    assert {"name": volume["name"], "mountPath": "/root/.keys", "readOnly": True} in user["volumeMounts"]

    detail = researcher_api.get(f"/api/workloads/{workload.pk}/").content.decode()
    events = " ".join(workload.events.values_list("message", flat=True))
    workflow = researcher_api.get(f"/api/workflow/{workload.workflow}").content.decode()
    audits = " ".join(AuditEvent.objects.values_list("summary", flat=True))
    assert seen_nowhere(json.dumps(job), detail, events, workflow, audits, caplog.text, json.dumps(workload.request))


@pytest.mark.parametrize(("data", "field"), [
    ({"bad/key": "dg=="}, "data[bad/key]"),
    ({"..x": "dg=="}, "data[..x]"),
    ({"k": "not base64!"}, "data[k]"),
    ({"k": "A" * (1_400_000)}, "data"),
])
def test_the_stand_in_refuses_a_secret_as_the_api_server_does(standin, kube, data, field):
    body = {"metadata": {"name": "s-1", "namespace": "team"}, "data": data}
    with pytest.raises(ClusterError) as refused:
        kube.create_object(SECRET, body, namespace="team")
    assert refused.value.status == 422 and field in refused.value.message
    assert "not base64!" not in refused.value.message  # a value is never echoed
    with pytest.raises(ClusterError) as named:
        kube.create_object(SECRET, {"metadata": {"name": "Bad_Name"}, "data": {}}, namespace="team")
    assert named.value.status == 422


def test_the_profile_page_sets_and_deletes_a_credential_and_never_shows_its_value(world, client):
    client.force_login(world["researcher"])
    saved = client.post("/profile/credentials/", {"name": "wandb", "type": "GENERIC",
                                                  "payload": f"api_key={VALUE}\nentity=team\n"})
    assert saved.status_code == 302
    page = client.get("/profile/").content.decode()
    assert "wandb" in page and "api_key, entity" in page and VALUE not in page
    refused = client.post("/profile/credentials/", {"name": "data", "type": "DATA", "payload": f"access_key={VALUE}"})
    assert refused.status_code == 400 and VALUE not in refused.content.decode()
    assert "data_credential.access_key_id: field is required" in refused.content.decode()
    assert client.post("/profile/credentials/wandb/delete/").status_code == 302
    assert not Credential.objects.exists()
    assert client.post("/profile/credentials/wandb/delete/").status_code == 404
