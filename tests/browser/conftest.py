"""Playwright driving Debian's Chromium (/usr/bin/chromium; never a downloaded browser) against
pytest-django's live server."""

import os
import shutil
from pathlib import Path

import pytest

from tests.support.browser import HANG_MS

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"]
# The pages' live regions poll and the new-workload form waits before its dry run (osmo_site/settings.py: 5 s, 2 s
# and 300 ms on a site). A test that waits for a change to show waits for the next poll, and each change of a form
# field waits out the delay: shorter here, the page shows the same thing sooner. test_csp.py's poll-pause test
# moves Playwright's clock by the site's own period instead.
POLL_MS = 500
DRY_RUN_DELAY_MS = 20
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("Chromium is missing: `apt-get install -y chromium` (.ci/run does this)")
    return path


@pytest.fixture(scope="session")
def browser():
    # Playwright's sync API runs an event loop in this thread; the tests still touch the database
    # synchronously between page actions, which is safe here.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import expect, sync_playwright

    # Every wait on a page ends on what it waits for; the ceiling (`expect`'s own default is 5 s) only turns a hang
    # into a failure, so that no load reaches it.
    expect.set_options(timeout=HANG_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture(autouse=True)
def short_polls(settings):
    settings.LIVE_POLL_MS = settings.LOG_POLL_MS = settings.LOG_WAIT_MS = POLL_MS
    settings.DRY_RUN_DELAY_MS = DRY_RUN_DELAY_MS


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 900}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(HANG_MS)  # Playwright's own is 30 s
    yield page
    context.close()


@pytest.fixture
def screenshot(tmp_path_factory):
    """Pictures go to the README's docs/screenshots/ only with DOCS_SCREENSHOTS=1 (to refresh them); any other run
    writes them to a temporary directory, so that running the tests never rewrites tracked files."""
    folder = SCREENSHOTS if os.environ.get("DOCS_SCREENSHOTS") == "1" else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)

    def take(page, name: str, *, full_page: bool = False, size: tuple[int, int] | None = None) -> Path:
        """`size` (width, height) widens the window for this picture only, for tables wider than 1440 px."""
        path = folder / f"{name}.png"
        before = page.viewport_size
        if size:
            page.set_viewport_size({"width": size[0], "height": size[1]})
        try:
            page.screenshot(path=str(path), full_page=full_page)
        finally:
            if size and before:
                page.set_viewport_size(before)
        return path

    return take
