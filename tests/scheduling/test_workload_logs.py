"""Reading a workload's logs by every door (issue 26 points 1, 2 and 7), against the stand-in API server through the
real client: the test plays the kubelet (pods and their log lines in the stand-in) and the Job controller, the
sync's list stores what they say, and the web, the CLI and the OSMO path read the logs live, followed, or from the
archive once the pods are gone."""

import threading

import pytest
from rest_framework.test import APIClient

from pools.models import Project
from scheduling.decisions import log_lines
from scheduling.management.logs import print_log
from scheduling.models import LogArchive, Status, Workload
from scheduling.run import log_archive, sweeps
from scheduling.run.cycle import run_cycle
from scheduling.run.dispatch import dispatch
from tests.scheduling.test_lifecycle import admit_and_dispatch, job_status, observe
from tests.support.commands import run
from tests.support.lifecycle import put_pod
from tests.support.streams import read_in_background
from tests.waiting import until

pytestmark = pytest.mark.django_db


@pytest.fixture
def wired(world, standin, tmp_path):
    """The world's backend talks to the stand-in (the web's and the CLI's reads go through `shared_cluster_for`)."""
    run("backend", "add", "default", "--kubeconfig", standin.kubeconfig(tmp_path / "web-kubeconfig"))
    return standin


def kubelet_pod(standin, workload: Workload, index: int, phase: str = "Running", *, exit_code: int | None = None,
                node: str = "training-h100-000") -> str:
    """Replica `index` of the workload's Job as the kubelet reports it, its containers those of the Job's template;
    its name."""
    job = standin.job(workload.job_name, namespace=workload.namespace)
    template = job["spec"]["template"]
    state = {"running": {"startedAt": "2026-11-25T10:00:00Z"}} if exit_code is None else \
        {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}}
    name = f"{workload.job_name}-{index}-abcde"
    obj = {"metadata": {"name": name, "namespace": workload.namespace,
                        "labels": {**template["metadata"]["labels"], "batch.kubernetes.io/job-name": workload.job_name},
                        "annotations": {"batch.kubernetes.io/job-completion-index": str(index)}},
           "spec": {**template["spec"], "nodeName": node},
           "status": {"phase": phase, "podIP": f"10.1.0.{index + 1}", "containerStatuses": [
               {"name": c["name"], "state": state} for c in template["spec"]["containers"]]}}
    put_pod(standin, obj)
    return name


def running(api, kube, standin, **fields) -> tuple[Workload, str]:
    workload = admit_and_dispatch(api, kube, **fields)
    pod = kubelet_pod(standin, workload, 0)
    for index in range(1, workload.replicas):
        kubelet_pod(standin, workload, index, node=f"training-h100-{index % 2:03d}")
    workload = observe(kube, workload)
    assert workload.status == Status.RUNNING
    return workload, pod


def gone(standin, kube, workload: Workload, job_name: str | None = None) -> None:
    """The Job's TTL (or a lost node): the Job and its pods leave the cluster, and the sync sees them go."""
    job_name = job_name or workload.job_name
    for pod in [p for p in standin._collections["pods"].objects if f"/{job_name}-" in p]:
        namespace, name = pod.split("/")
        standin.delete_pod(name, namespace=namespace)
    kube.delete_job(workload.namespace, job_name)
    observe(kube, workload)


def logs_url(workload: Workload, **query) -> str:
    params = "&".join(f"{key}={value}" for key, value in query.items())
    return f"/api/workloads/{workload.pk}/logs" + (f"?{params}" if params else "")


def test_a_running_replicas_log_is_read_live_and_followed_as_lines_are_written(wired, kube, researcher_api):
    workload, pod = running(researcher_api, kube, wired)
    wired.append_log(pod, "epoch 1 loss 2.31", "epoch 2 loss 1.87", namespace=workload.namespace)
    answer = researcher_api.get(logs_url(workload))
    assert answer.status_code == 200, answer.content
    assert answer.content == b"epoch 1 loss 2.31\nepoch 2 loss 1.87\n"
    assert (answer["X-Log-Source"], answer["X-Log-Pod"], answer["X-Log-Container"], answer["X-Log-Node"]) == \
        ("live", pod, "user", "training-h100-000")
    assert researcher_api.get(logs_url(workload, tail=1)).content == b"epoch 2 loss 1.87\n"
    as_json = researcher_api.get(logs_url(workload, format="json")).json()
    assert (as_json["source"], as_json["node"], as_json["ip"], as_json["text"]) == \
        ("live", "training-h100-000", "10.1.0.1", "epoch 1 loss 2.31\nepoch 2 loss 1.87\n")

    followed = researcher_api.get(logs_url(workload, follow=1))
    assert followed.streaming and followed["X-Log-Source"] == "live"
    received, done = read_in_background(followed)
    until(lambda: b"".join(received).endswith(b"loss 1.87\n"), "the log so far")
    wired.append_log(pod, "epoch 3 loss 1.52", namespace=workload.namespace)
    until(lambda: b"".join(received).endswith(b"epoch 3 loss 1.52\n"), "the line written after the follow began")
    wired.end_log(pod, namespace=workload.namespace)
    until(done.is_set, "the stream to end with the container")
    assert b"".join(received) == b"epoch 1 loss 2.31\nepoch 2 loss 1.87\nepoch 3 loss 1.52\n"  # no resume marker


def test_a_failed_replica_keeps_its_job_and_its_log_is_read_from_the_archive_once_the_pods_are_gone(
        wired, kube, researcher_api, settings):
    settings.OSMO_LOG_ARCHIVE_BYTES = 64
    workload, _ = running(researcher_api, kube, wired, replicas=2)
    first = kubelet_pod(wired, workload, 0, "Failed", exit_code=3)
    second = kubelet_pod(wired, workload, 1, node="training-h100-001")
    wired.append_log(first, *[f"step {i}" for i in range(10)], "Traceback: CUDA out of memory",
                     namespace=workload.namespace)
    wired.append_log(second, "replica 1 waits at the barrier", namespace=workload.namespace)
    workload = observe(kube, workload)
    # One replica failed, the Job has not: the Job controller fails it (backoffLimit 0); nothing is deleted.
    assert workload.status == Status.RUNNING and not workload.stop_status
    job_status(wired, workload, "Failed", "BackoffLimitExceeded")
    workload = observe(kube, workload)
    assert (workload.status, workload.exit_code) == (Status.FAILED, 3)
    assert wired.job_deletions == []  # the Job and its pods stay until ttlSecondsAfterFinished
    assert wired.job(workload.job_name, namespace=workload.namespace)["spec"]["ttlSecondsAfterFinished"] == \
        settings.OSMO_JOB_TTL_SECONDS
    assert sorted(LogArchive.objects.values_list("replica", "state")) == [(0, "PENDING"), (1, "PENDING")]

    assert researcher_api.get(logs_url(workload))["X-Log-Source"] == "live"  # its pod is still there
    assert log_archive.archive(workload.pk, clusters=lambda backend: kube) == {"KEPT": 2}
    assert log_archive.archive(workload.pk, clusters=lambda backend: kube) == {}  # idempotent
    gone(wired, kube, workload)

    answer = researcher_api.get(logs_url(workload))
    assert answer.status_code == 200 and answer["X-Log-Source"] == "archive"
    assert answer.content.endswith(b"step 9\nTraceback: CUDA out of memory\n")
    assert len(answer.content) <= 64 and not answer.content.startswith(b"step 0")  # the last 64 bytes, whole lines
    assert answer["X-Log-Truncated"] == "1"
    as_json = researcher_api.get(logs_url(workload, format="json", replica=1)).json()
    assert (as_json["source"], as_json["node"], as_json["text"]) == \
        ("archive", "training-h100-001", "replica 1 waits at the barrier\n")
    detail = researcher_api.get(f"/api/workloads/{workload.pk}/").json()
    assert [(p["replica"], p["node"], p["ip"], p["log"]) for p in detail["replica_pods"]] == [
        (0, "training-h100-000", "10.1.0.1", "archive"), (1, "training-h100-001", "10.1.0.2", "archive")]
    refused = researcher_api.get(logs_url(workload, previous=1))
    assert refused.status_code == 400 and refused.json()["field"] == "previous"


def test_attempt_one_is_read_after_attempt_two_started(wired, kube, researcher_api, settings):
    workload, first_pod = running(researcher_api, kube, wired, exit_actions={"RESCHEDULE": "137"})
    first_job = workload.job_name
    wired.append_log(first_pod, "attempt 1 was here", namespace=workload.namespace)
    kubelet_pod(wired, workload, 0, "Failed", exit_code=137)
    job_status(wired, workload, "Failed", "BackoffLimitExceeded")
    workload = observe(kube, workload)
    assert (workload.status, workload.attempt) == (Status.PENDING, 2)
    run_cycle()
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    second_pod = kubelet_pod(wired, workload, 0, node="training-h100-001")
    observe(kube, workload)
    wired.append_log(second_pod, "attempt 2 is here", namespace=workload.namespace)

    assert researcher_api.get(logs_url(workload)).content == b"attempt 2 is here\n"
    first = researcher_api.get(logs_url(workload, attempt=1))
    assert (first.content, first["X-Log-Source"], first["X-Log-Attempt"]) == (b"attempt 1 was here\n", "live", "1")
    sweeps.sweep(act=True, clusters=lambda backend: kube)  # the archive task's work, as `schedule --once` does it
    gone(wired, kube, workload, first_job)
    first = researcher_api.get(logs_url(workload, attempt=1))
    assert (first.content, first["X-Log-Source"]) == (b"attempt 1 was here\n", "archive")
    assert researcher_api.get(logs_url(workload, attempt=3)).json()["field"] == "attempt"
    described = run("workload", "describe", str(workload.pk))
    assert f"attempt 1 replica 0: pod {first_pod} on node training-h100-000, IP 10.1.0.1: Deleted" in described
    assert f"attempt 2 replica 0: pod {second_pod} on node training-h100-001, IP 10.1.0.1: Running" in described


def test_logs_are_refused_to_whoever_may_not_read_the_request_as_for_an_unknown_workload(
        wired, kube, researcher_api, world):
    workload, pod = running(researcher_api, kube, wired)
    wired.append_log(pod, "secret hyperparameters", namespace=workload.namespace)
    other = APIClient()
    other.force_authenticate(world["other"])  # not in project vision
    refused = other.get(logs_url(workload))
    unknown = other.get("/api/workloads/00000000-0000-4000-8000-000000000000/logs")
    assert refused.status_code == unknown.status_code == 404
    assert refused.json() == unknown.json()
    assert b"secret" not in refused.content
    assert APIClient().get(logs_url(workload)).status_code == 401
    page = APIClient()
    page.force_login(world["other"])
    assert page.get(f"/workloads/{workload.pk}/logs/").status_code == 404
    with pytest.raises(Exception, match="There is no workload"):
        run("workload", "logs", str(workload.pk), "--as-user", "other")
    # In project `default`, which every user belongs to: `other` sees the workload, not its request, nor its logs.
    # By hand: no door moves a workload to another project.
    Workload.objects.filter(pk=workload.pk).update(project=Project.objects.get(name=Project.DEFAULT_NAME))
    refused = other.get(logs_url(workload))
    assert refused.status_code == 403 and b"secret" not in refused.content
    assert other.get(f"/api/workloads/{workload.pk}/").status_code == 200
    assert page.get(f"/workloads/{workload.pk}/logs/").status_code == 403
    with pytest.raises(Exception, match="may not read the logs"):
        run("workload", "logs", str(workload.pk), "--as-user", "other")
    assert run("workload", "logs", str(workload.pk), "--as-user", "researcher") == "secret hyperparameters\n"


def test_bad_parameters_are_refused_naming_the_field(wired, kube, researcher_api):
    workload, _ = running(researcher_api, kube, wired)
    for query, field in (({"replica": "x"}, "replica"), ({"replica": 5}, "replica"), ({"tail": -1}, "tail"),
                         ({"follow": "maybe"}, "follow"), ({"container": "Bad_Name"}, "container"),
                         ({"since": "yesterday"}, "since"), ({"format": "xml"}, "format"),
                         ({"container": "sidecar"}, "container"), ({"since": "x" * 200}, "since")):
        answer = researcher_api.get(logs_url(workload, **query))
        assert answer.status_code == 400 and answer.json()["field"] == field, (query, answer.content)
    assert "container sidecar is not valid for pod" in researcher_api.get(
        logs_url(workload, container="sidecar")).json()["detail"]


def test_a_follow_ends_at_its_time_limit_with_a_marker_and_resumes_sending_each_line_once(
        wired, kube, researcher_api, settings):
    settings.OSMO_LOG_FOLLOW_SECONDS = 0.5
    workload, pod = running(researcher_api, kube, wired)
    moment = 1_800_000_000.1  # several lines of one instant: the token counts them
    wired.append_log(pod, "one", "two", namespace=workload.namespace, at=moment)
    first = b"".join(researcher_api.get(logs_url(workload, follow=1)).streaming_content)
    body, marker = first.rsplit(b"\n###", 1)
    assert body == b"one\ntwo"
    token = marker.decode().split("since=", 1)[1].strip()
    assert token == "2027-01-15T08:00:00.100000000Z~2" and log_lines.parse(token).count == 2
    wired.append_log(pod, "three", namespace=workload.namespace, at=moment)
    wired.append_log(pod, "four", namespace=workload.namespace, at=moment + 1)
    resumed = b"".join(researcher_api.get(logs_url(workload, follow=1, since=token)).streaming_content)
    assert resumed.startswith(b"three\nfour\n") and b"since=2027-01-15T08:00:01.100000000Z~1" in resumed
    again = researcher_api.get(logs_url(workload, since=token))  # a plain read resumes the same way
    assert again.content == b"three\nfour\n" and again["X-Log-Resume"] == "2027-01-15T08:00:01.100000000Z~1"


def test_the_cli_prints_logs_and_its_follow_resumes_across_windows_by_itself(wired, kube, researcher_api, settings):
    settings.OSMO_LOG_FOLLOW_SECONDS = 0.3
    workload, pod = running(researcher_api, kube, wired)
    wired.append_log(pod, "hello from the CLI", namespace=workload.namespace)
    assert run("workload", "logs", str(workload.pk)) == "hello from the CLI\n"
    assert run("logs", workload.name, "--as-user", "researcher") == "hello from the CLI\n"  # gpuctl's door
    path = f"/api/v1/namespaces/{workload.namespace}/pods/{pod}/log"

    def kubelet():  # writes a line once a few follow windows have passed, then the container exits
        until(lambda: len(wired.requests_to(path)) >= 4, "a few follow windows to pass")
        wired.append_log(pod, "written during a later window", namespace=workload.namespace)
        until(lambda: len(wired.requests_to(path)) >= 6, "more follow windows")
        wired.end_log(pod, namespace=workload.namespace)

    side = threading.Thread(target=kubelet, daemon=True)
    side.start()
    printed: list[str] = []
    assert print_log(printed.append, Workload.objects.select_related("pool").get(pk=workload.pk), follow=True) == \
        "live"
    side.join()
    assert "".join(printed) == "hello from the CLI\nwritten during a later window\n"  # once each, no marker


WORKFLOW = "workflow:\n  name: flow\n  tasks:\n  - name: train\n    image: busybox\n    command: [\"true\"]\n" \
           "    resource: default\n  resources:\n    default:\n      gpu: 1\n      cpu: 1\n      memory: 1Gi\n"


def test_the_osmo_logs_path_reads_a_task_and_the_submit_answer_points_there(wired, kube, researcher_api):
    answer = researcher_api.post("/api/pool/training/workflow?project=vision", {"file": WORKFLOW}, format="json")
    assert answer.status_code == 200, answer.json()
    name = answer.json()["name"]
    assert answer.json()["logs"].endswith(f"/api/workflow/{name}/logs?user=researcher")
    workload = Workload.objects.get(workflow=name)
    run_cycle()
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    pod = kubelet_pod(wired, workload, 0)
    observe(kube, workload)
    wired.append_log(pod, "osmo task output", namespace=workload.namespace)
    assert researcher_api.get(f"/api/workflow/{name}/logs?task={workload.group or workload.name}").content == \
        b"osmo task output\n"
    assert researcher_api.get(f"/api/workflow/{name}/logs").content == b"osmo task output\n"  # its only task
    assert researcher_api.get(f"/api/workflow/{name}/logs?task=nope").json()["field"] == "task"
    assert researcher_api.get("/api/workflow/no-such-flow-1/logs").status_code == 404


def test_the_page_panel_shows_where_it_ran_escapes_lines_and_polls_only_new_ones(wired, kube, researcher_api,
                                                                                  researcher_client):
    workload, pod = running(researcher_api, kube, wired)
    wired.append_log(pod, "<script>alert('x')</script> & more", namespace=workload.namespace)
    page = researcher_client.get(f"/workloads/{workload.pk}/")
    assert page.status_code == 200 and f'hx-get="/workloads/{workload.pk}/logs/"' in page.content.decode()
    panel = researcher_client.get(f"/workloads/{workload.pk}/logs/", HTTP_HX_REQUEST="true").content.decode()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in panel and "<script>alert" not in panel
    assert "training-h100-000" in panel and "10.1.0.1" in panel and "Live log" in panel
    assert f"/api/workloads/{workload.pk}/logs?attempt=1&amp;replica=0&amp;download=1" in panel
    followed = researcher_client.get(f"/workloads/{workload.pk}/logs/?follow=1&part=view",
                                     HTTP_HX_REQUEST="true").content.decode()
    poll = followed.split('id="log-poller" hx-get="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert "since=" in poll
    assert researcher_client.get(poll, HTTP_HX_REQUEST="true").content.decode().startswith('<div id="log-poller"')
    wired.append_log(pod, "a new line", namespace=workload.namespace)
    more = researcher_client.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert more.startswith("a new line\n<div id=\"log-poller\" hx-swap-oob=\"true\" hx-get=")
    download = researcher_api.get(logs_url(workload, download=1))
    assert download["Content-Disposition"] == f'attachment; filename="{workload.name}-a1-r0.log"'


def waiter(fragment: str) -> dict[str, str]:
    tag = fragment.split('<div id="log-wait"', 1)[1].split(">", 1)[0]
    return {key: value.replace("&amp;", "&") for key, value in
            (part.split('="', 1) for part in tag.strip().rstrip('"').split('" '))}


def test_with_no_pod_yet_the_panel_waits_and_a_choice_of_the_reader_is_never_undone_by_the_wait(
        wired, kube, researcher_api, researcher_client):
    """The waiter lives inside the view and is synced on the pickers' form: the first load waits for the whole panel,
    a choice of the pickers (Follow ticked) waits for that view with Follow kept, and a log shown waits no more."""
    workload = admit_and_dispatch(researcher_api, kube)  # dispatched: the Job exists, no pod yet
    panel = researcher_client.get(f"/workloads/{workload.pk}/logs/", HTTP_HX_REQUEST="true").content.decode()
    first = waiter(panel)
    assert first["hx-target"] == "#log-panel-body" and first["hx-swap"] == "outerHTML"
    assert first["hx-sync"] == "#log-form:abort" and "part=" not in first["hx-get"]
    assert panel.index('id="log-view"') < panel.index('id="log-wait"')  # replaced by the pickers' answer
    chosen = researcher_client.get(f"/workloads/{workload.pk}/logs/?follow=1&part=view&replica=0",
                                   HTTP_HX_REQUEST="true").content.decode()
    kept = waiter(chosen)
    assert kept["hx-target"] == "#log-view" and kept["hx-swap"] == "innerHTML"
    assert "part=view" in kept["hx-get"] and "follow=1" in kept["hx-get"] and kept["hx-sync"] == "#log-form:abort"
    pod = kubelet_pod(wired, workload, 0)
    observe(kube, workload)
    wired.append_log(pod, "first line", namespace=workload.namespace)
    shown = researcher_client.get(kept["hx-get"], HTTP_HX_REQUEST="true").content.decode()
    assert "first line" in shown and 'id="log-wait"' not in shown
    assert "since=" in shown.split('id="log-poller"', 1)[1].split(">", 1)[0]  # followed from there


def test_the_osmo_port_forward_path_answers_the_kubectl_line_to_the_tasks_pod(wired, kube, researcher_api, world):
    """OSMO's `workflow port-forward` asks for a tunnel through OSMO's router, which this site does not run: the
    answer (a 409 OSMO's CLI prints) names the running task's pod in a `kubectl port-forward` line per port."""
    name = researcher_api.post("/api/pool/training/workflow?project=vision", {"file": WORKFLOW},
                               format="json").json()["name"]
    path = f"/api/workflow/{name}/portforward/train"
    workload = Workload.objects.get(workflow=name)
    assert researcher_api.post(f"{path}?task_ports=8888").status_code == 409  # not running: nothing to forward to
    run_cycle()
    assert dispatch(workload.pk, clusters=lambda backend: kube) == "created"
    workload = Workload.objects.select_related("pool").get(pk=workload.pk)
    pod = kubelet_pod(wired, workload, 0)
    observe(kube, workload)
    answer = researcher_api.post(f"{path}?task_ports=8888&task_ports=6006", HTTP_X_OSMO_CLIENT_VERSION="6.0.0")
    assert answer.status_code == 409, answer.content
    lines = [f"kubectl port-forward -n {workload.namespace} pod/{pod} {port}:{port}" for port in (8888, 6006)]
    assert answer.json()["port_forward"] == lines and answer.json()["error_code"] == "USER"
    assert all(line in answer.json()["message"] for line in lines)
    assert researcher_api.post(f"{path}?task_ports=0").json()["field"] == "task_ports"
    assert researcher_api.post(f"/api/workflow/{name}/portforward/nope?task_ports=1").json()["field"] == "task"
    other = APIClient()
    other.force_authenticate(world["other"])
    assert other.post(f"{path}?task_ports=8888").status_code == 404  # another's workflow is not found
