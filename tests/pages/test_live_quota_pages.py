"""The quota pages refresh their figures like the live tables: every 5 s while the tab is visible (static/osmo/
pages.js drops polls while it is hidden, and while the focus is in a quota cell). Each region's fragment answers
the figures of the moment: here, after a project's pods grow from 8 to 12 GPUs in alpha-pool."""

import re

import pytest

from tests.pages import quota_world
from tests.pages.conftest import body, fragment
from tests.pages.test_quotas import cell
from tests.support.fleet import ALPHA

pytestmark = pytest.mark.django_db
VISION = f"{ALPHA}/research/vision"


def poller(text: str, region: str) -> str:
    """The opening tag of the element with id `region`."""
    return re.search(rf'<div id="{region}"[^>]*>', text).group(0)


def grow_vision():
    quota_world.pods("proj-vision", "a-0001", 2, count=2, pool=ALPHA, prefix="more")


def test_the_quotas_page_polls_every_5s_unless_a_cell_has_the_focus(staff_client, projects_and_quotas):
    tag = poller(body(staff_client.get("/quotas/")), "quotas-table")
    assert 'hx-trigger="every 5s, quotas-changed from:body"' in tag
    assert 'data-poll-paused-within=".quota-cell"' in tag and 'hx-sync="this:drop"' in tag


def test_the_quotas_fragment_answers_the_figures_of_the_moment(staff_client, projects_and_quotas):
    before = body(fragment(staff_client, "/quotas/", target="quotas-table"))
    grow_vision()
    after = body(fragment(staff_client, "/quotas/", target="quotas-table"))

    assert cell(before, VISION, "gpu_allocated") == "8"
    assert cell(after, VISION, "gpu_allocated") == "12"
    assert cell(after, VISION, "gpu_over_quota") == "6"
    assert "<html" not in after


def test_a_project_page_polls_its_quotas_every_5s_unless_a_cell_has_the_focus(member_client, projects_and_quotas):
    tag = poller(body(member_client.get("/projects/vision/")), "project-quotas")
    assert 'hx-trigger="every 5s, quotas-changed from:body"' in tag and 'hx-get="/projects/vision/"' in tag
    assert 'data-poll-paused-within=".quota-cell"' in tag and 'hx-sync="this:drop"' in tag


def test_a_project_pages_quota_fragment_answers_the_figures_of_the_moment(member_client, projects_and_quotas):
    before = body(fragment(member_client, "/projects/vision/", target="project-quotas"))
    grow_vision()
    after = body(fragment(member_client, "/projects/vision/", target="project-quotas"))

    assert after.lstrip().startswith('<div id="project-quotas"') and "<html" not in after
    assert cell(before, VISION, "gpu_allocated") == "8"
    assert cell(after, VISION, "gpu_allocated") == "12"
    assert "Members" not in after  # only the region that moves


def test_the_projects_table_polls_and_its_fragment_answers_the_figures_of_the_moment(member_client,
        projects_and_quotas):
    page = body(member_client.get("/projects/"))
    assert 'hx-trigger="every 5s"' in poller(page, "projects-table")
    grow_vision()
    after = body(fragment(member_client, "/projects/", target="projects-table"))

    assert re.search(r'<tr data-key="vision".*?data-col="gpu_allocated" class="num[^"]*"[^>]*>12<', after, re.S)
    assert "<html" not in after
