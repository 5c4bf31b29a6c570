"""`manage.py workload submit|list|describe|cancel` and `manage.py schedule --once`."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduling.models import Status, Workload
from tests.scheduling.conftest import body
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def write(tmp_path, data, name="job.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_submit_schedule_describe_and_cancel_from_the_command_line(world, tmp_path):
    output = run("workload", "submit", "-f", write(tmp_path, body()), "--as-user", "researcher")
    assert "Pool training, platform h100 accepts" in output
    assert "submitted to project vision: PENDING" in output
    cycle = run("schedule", "--once")
    assert "1 admitted" in cycle and "ADMITTED" in cycle and "train-resnet: pool training, platform h100" in cycle
    assert "Sweep: dispatch 1 created" in cycle
    workload = Workload.objects.get()
    described = run("workload", "describe", str(workload.id)[:8])
    assert "Status:     SCHEDULING" in described and "Admitted:   pool training, platform h100" in described
    assert f"Job:        {workload.namespace}/{workload.job_name}" in described
    assert "Canceled" not in described
    assert "training (#" not in described
    canceled = run("workload", "cancel", "train-resnet", "--message", "wrong data")
    assert f"canceled; Job {workload.namespace}/{workload.job_name} deleted" in canceled
    assert Workload.objects.get().status == Status.FAILED_CANCELED
    assert "had already ended" in run("workload", "cancel", str(workload.id))


def test_schedule_once_says_why_the_rest_wait(world, tmp_path):
    for i in range(5):
        run("workload", "submit", "-f", write(tmp_path, body(name=f"w{i}")), "--as-user", "researcher")
    output = run("schedule", "--once")
    assert "4 admitted" in output and "1 still pending" in output
    assert "training (#1 in queue): QUOTA: Project vision has 4 of 4 guaranteed H100 GPUs in use" in output


def test_yaml_files_and_dry_runs(world, tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text("name: sweep\nproject: nlp\npriority: low\nimage: busybox\nresources: {gpu: 2}\n")
    output = run("workload", "submit", "-f", str(path), "--dry-run", "--as-user", "researcher")
    assert "would be admitted now to pool training" in output and not Workload.objects.exists()


def test_list_filters_and_scopes(world, tmp_path):
    run("workload", "submit", "-f", write(tmp_path, body()), "--as-user", "researcher")
    run("workload", "submit", "-f", write(tmp_path, body(name="sweep", project="nlp", priority="low")),
        "--as-user", "other")
    assert "sweep" in run("workload", "list", "--project", "nlp") and "train-resnet" not in run(
        "workload", "list", "--project", "nlp")
    assert "train-resnet" not in run("workload", "list", "--as-user", "other")
    rows = json.loads(run("workload", "list", "--status", "pending", "--format", "json"))
    assert {row["name"] for row in rows} == {"train-resnet", "sweep"}


def test_refusals_and_bad_input_are_one_paragraph(world, tmp_path):
    with pytest.raises(CommandError, match=r"Refused: no candidate pool can take this workload\.\n  training: "):
        run("workload", "submit", "-f", write(tmp_path, body(resources={"gpu": 64})), "--as-user", "researcher")
    with pytest.raises(CommandError, match=r"resources\.gpu"):
        run("workload", "submit", "-f", write(tmp_path, body(resources={"gpu": -1})), "--as-user", "researcher")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(CommandError, match="neither JSON nor YAML at line 2"):
        run("workload", "submit", "-f", str(bad), "--as-user", "researcher")
    with pytest.raises(CommandError, match="There is no workload 'nope'"):
        run("workload", "describe", "nope")
    with pytest.raises(CommandError, match="There is no user named 'ghost'"):
        run("workload", "list", "--as-user", "ghost")


def test_schedule_in_the_foreground_survives_a_database_error_and_goes_on(world, monkeypatch):
    from django.db import OperationalError

    from scheduling.management.commands import schedule
    from scheduling.run.cycle import CycleResult
    from scheduling.run.sweeps import SweepResult

    calls = []

    def flaky(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        if len(calls) == 3:
            raise KeyboardInterrupt  # the operator's Ctrl-C ends the loop
        return CycleResult(considered=2)

    monkeypatch.setattr(schedule, "run_cycle", flaky)
    monkeypatch.setattr(schedule, "sweep", lambda **kwargs: SweepResult(followed={"RUNNING": 1}))
    monkeypatch.setattr(schedule.time, "sleep", lambda seconds: None)
    out, err = StringIO(), StringIO()
    call_command("schedule", "--interval", "0.1", stdout=out, stderr=err)  # Ctrl-C stops it cleanly, exit 0
    assert out.getvalue().rstrip().endswith("Stopped.")
    assert "Cycle failed, retrying in 0.1 s: server closed the connection unexpectedly" in err.getvalue()
    assert "Cycle: 2 pending considered" in out.getvalue()
    assert "status moved: 1 RUNNING" in out.getvalue()
    assert len(calls) == 3


def test_schedule_once_reports_a_database_error_as_one_paragraph(world, monkeypatch):
    from django.db import OperationalError

    from scheduling.management.commands import schedule

    def broken(**kwargs):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(schedule, "run_cycle", broken)
    with pytest.raises(CommandError, match="could not connect to server"):
        call_command("schedule", "--once", stdout=StringIO())
