"""Every door names the project (issue 44, point 5): a gpuctl job file's `job.project` and `create -f --project`, and
a refusal for quota in the `default` project that says, in the door's own syntax, how to choose another."""

import pytest
from django.core.management.base import CommandError

from scheduling.models import Workload
from tests.scheduling.test_osmo import JOB
from tests.support.commands import run

pytestmark = pytest.mark.django_db


def job_file(tmp_path, text: str = JOB):
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return str(path)


def test_a_job_file_names_its_project_and_the_command_line_wins(world, tmp_path):
    named = job_file(tmp_path, JOB.replace("  priority: medium\n", "  priority: low\n  project: nlp\n"))

    assert "project nlp" in run("create", "-f", named, "--as-user", "researcher")
    run("delete", "job", "qwen-sft")
    assert "project vision" in run("create", "-f", named, "--as-user", "researcher", "--project", "vision")
    assert list(Workload.objects.order_by("submitted_at").values_list("project__name", flat=True)) == ["nlp", "vision"]


def test_a_project_the_submitter_is_not_in_is_refused_naming_the_field(world, tmp_path):
    with pytest.raises(CommandError, match="Project secret does not exist or you are not a member"):
        run("create", "-f", job_file(tmp_path), "--as-user", "researcher", "--project", "secret")


def test_a_refusal_for_quota_in_default_says_how_to_name_another_project_in_each_door(world, tmp_path,
                                                                                      researcher_api):
    # researcher is in two projects, so a file that names none goes to `default`, which has no quota in training.
    with pytest.raises(CommandError) as refused:
        run("create", "-f", job_file(tmp_path), "--as-user", "researcher")
    assert "Project default" in str(refused.value)
    assert "job.project: NAME in the job file (or create -f FILE --project NAME)" in str(refused.value)

    answer = researcher_api.post("/api/workloads/", {"name": "t", "image": "busybox", "pools": ["training"],
                                                     "resources": {"gpu": 2}}, format="json")
    assert answer.status_code in (400, 403), answer.json()
    assert 'name another project with "project": "NAME" in the request body' in answer.json()["detail"]
    named = researcher_api.post("/api/workloads/", {"name": "t", "image": "busybox", "pools": ["training"],
                                                    "project": "nlp", "resources": {"gpu": 2}}, format="json")
    assert "another project" not in str(named.json())
