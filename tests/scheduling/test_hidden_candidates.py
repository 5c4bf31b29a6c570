"""A project's default pool list may name a pool the submitter may not see: the API's dry run, its refusal and its
answer to a submission tell that candidate as "(a pool you may not see)", never by name, as the lists and the
submit form do (`Access.visible_pool_names`). A pool the caller named in the request is their own word: shown."""

import json

import pytest
from django.core.management.base import CommandError

from pools.config import writes
from pools.models import ConfigKind
from scheduling.submit.submission import HIDDEN_POOL
from tests.scheduling.conftest import body, project, seed_pool
from tests.support.commands import run

pytestmark = pytest.mark.django_db
SECRET = "secretpool-zq"


@pytest.fixture
def hidden_default(world):
    """vision's default list: training (the researcher's) and a pool no role of theirs names."""
    writes.import_document(ConfigKind.POOL, {"pools": {SECRET: {**seed_pool(), "name": SECRET}}}, author="tests")
    project("vision", pools={"training": {"deserved": 4, "limit": 12}}, users=["researcher"],
            default_pools=["training", SECRET])


def test_the_dry_run_does_not_name_a_default_pool_the_caller_may_not_see(researcher_api, hidden_default):
    response = researcher_api.post("/api/workloads/?dry_run=1", body(), format="json")
    assert response.status_code == 200, response.json()
    assert SECRET not in response.content.decode()
    candidates = response.json()["candidates"]
    assert [(c["pool"], c["accepted"]) for c in candidates] == [("training", True), (HIDDEN_POOL, False)]
    assert candidates[1]["code"] == "ACCESS"


def test_a_refusal_lists_the_callers_pools_and_hides_the_others(researcher_api, hidden_default):
    response = researcher_api.post("/api/workloads/", body(resources={"gpu": 16}), format="json")
    assert response.status_code == 400, response.json()
    assert SECRET not in response.content.decode()
    answer = response.json()
    assert [c["pool"] for c in answer["candidates"]] == ["training", HIDDEN_POOL]
    assert "training: " in answer["detail"] and f"{HIDDEN_POOL}: " in answer["detail"]
    assert "more than any node of platform training/h100 has" in answer["detail"]  # their own pool, as before


def test_a_submission_answer_hides_the_refused_default(researcher_api, hidden_default):
    response = researcher_api.post("/api/workloads/", body(), format="json")
    assert response.status_code == 201, response.json()
    assert SECRET not in response.content.decode()
    assert [c["pool"] for c in response.json()["refused_candidates"]] == [HIDDEN_POOL]


def test_a_pool_the_caller_named_is_shown_with_its_refusal(researcher_api, hidden_default):
    response = researcher_api.post("/api/workloads/?dry_run=1", body(pools=["training", SECRET]), format="json")
    assert response.status_code == 200, response.json()
    assert [c["pool"] for c in response.json()["candidates"]] == ["training", SECRET]


def test_the_cli_dry_run_and_refusal_as_a_user_hide_it_too(hidden_default, tmp_path):
    path = tmp_path / "job.json"
    path.write_text(json.dumps(body()))
    output = run("workload", "submit", "-f", str(path), "--dry-run", "--as-user", "researcher")
    assert f"Pool {HIDDEN_POOL} refuses (ACCESS)" in output and SECRET not in output
    path.write_text(json.dumps(body(resources={"gpu": 16})))
    with pytest.raises(CommandError) as refused:
        run("workload", "submit", "-f", str(path), "--as-user", "researcher")
    assert f"  {HIDDEN_POOL}: " in str(refused.value) and SECRET not in str(refused.value)


def test_staff_see_every_candidate_by_name(hidden_default, django_user_model):
    from rest_framework.test import APIClient

    staff = APIClient()
    staff.force_authenticate(django_user_model.objects.create_user("boss", is_staff=True))
    response = staff.post("/api/workloads/?dry_run=1", body(), format="json")
    assert response.status_code == 200, response.json()
    candidates = response.json()["candidates"]
    assert [c["pool"] for c in candidates] == ["training", SECRET] and candidates[1].get("code") != "ACCESS"
