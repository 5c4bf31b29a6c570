"""Work bounded inside one call, not only between calls (issue 42 point 1): the sandbox reads its clock between
operations, so a call whose time grows faster than its input is refused above OSMO_RENDER_MAX_SLOW_INPUT characters
(reverse searches, wordwrap), and codecs whose time is not linear (punycode) are not offered. The issue's 85-byte
template took a worker for 35 CPU s; it is a 400 naming the limit. CPU time is printed, never asserted."""

import time

import pytest

from pools.engine import sandbox
from tests.scheduling.test_osmo import submit_workflow
from tests.scheduling.test_render_budgets import assert_refused, workflow_with

pytestmark = pytest.mark.django_db

QUADRATIC = "{% set h = 'a'*999996 %}{% set nd = 'a'*249999 ~ 'b' ~ 'a'*249999 %}{{ h.rfind(nd) }}"


def test_the_85_byte_reverse_search_is_a_400_naming_the_limit(researcher_api):
    assert len(QUADRATIC) == 85
    started = time.process_time()
    response = submit_workflow(researcher_api, workflow_with(QUADRATIC), query="?dry_run=true", variables=())
    print(f"\nthe 85-byte rfind template: answered {response.status_code} in "
          f"{time.process_time() - started:.3f} CPU s (41 CPU s, answered 200, before the limit)")
    answer = assert_refused(response, 8, "OSMO_RENDER_MAX_SLOW_INPUT")
    assert "rfind() is given 1,499,995 characters" in answer["detail"]


@pytest.mark.parametrize("call", ["h.rindex(nd)", "h.rsplit(nd)", "h.rpartition(nd)", "h|wordwrap(1)"])
def test_every_slow_call_is_refused_above_the_limit(researcher_api, call):
    template = "{% set h = 'a'*20000 %}{% set nd = 'a'*5000 ~ 'b' %}{{ " + call + " }}"
    response = submit_workflow(researcher_api, workflow_with(template), query="?dry_run=true", variables=())
    assert_refused(response, 8, "OSMO_RENDER_MAX_SLOW_INPUT")


@pytest.mark.parametrize("template, shown", [("{{ 'a b a'.rfind('a') }}", "4"),
                                             ("{{ 'a b c'.rsplit() }}", "['a', 'b', 'c']"),
                                             ("{{ ('x' * 20000).rsplit() | length }}", "1"),
                                             ("{{ 'word word'|wordwrap(4) }}", "word\nword"),
                                             ("{{ 'é'.encode('utf-8') }}", "b'\\xc3\\xa9'")])
def test_small_or_linear_calls_still_render(template, shown):
    assert sandbox.render_text(template, {}) == shown


def test_a_codec_whose_time_is_not_linear_is_not_offered(researcher_api):
    response = submit_workflow(researcher_api, workflow_with("{{ ('\\u0100' * 3000).encode('punycode') }}"),
                               query="?dry_run=true", variables=())
    answer = assert_refused(response, 8)
    assert "the codec 'punycode' is not available in templates" in answer["detail"]
