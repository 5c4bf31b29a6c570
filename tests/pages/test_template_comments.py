"""Django's `{# ... #}` comments end on their line: one spread over lines is printed on the page as text."""

from pathlib import Path

import pytest

TEMPLATES = sorted((Path(__file__).resolve().parents[2] / "templates").rglob("*.html"))


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_every_short_comment_closes_on_its_line(template):
    open_lines = [number for number, line in enumerate(template.read_text().splitlines(), 1)
                  if line.count("{#") != line.count("#}")]
    assert not open_lines, f"{template}: a {{# comment spans lines {open_lines}; use {{% comment %}}"


def test_a_page_shows_no_template_comment(admin_client):
    assert b"{#" not in admin_client.get("/").content
