"""Signing in through the pages' own form, in Chromium (the browser tests' one sign-in)."""

from urllib.parse import quote

USERNAME, PASSWORD = "ops", "pw-ops-123"  # the `staff` fixture of tests/conftest.py


def sign_in(page, live_server, path: str = "/", *, username: str = USERNAME, password: str = PASSWORD,
            admin: bool = False) -> None:
    """Signs in through the sign-in page (the admin's own with `admin`), asking to go on to `path`, and waits until
    the browser is there. Staff by default."""
    login = "/admin/login/" if admin else "/accounts/login/"
    page.goto(f"{live_server.url}{login}?next={quote(path)}")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("input[type=submit]" if admin else "button[type=submit]")
    page.wait_for_url(f"{live_server.url}{path}")


def csp_refusals(page) -> list[str]:
    """The Content-Security-Policy refusals the page logs from now on (a test asserts the list stays empty)."""
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text)
            if "Content Security Policy" in message.text else None)
    return refused


def fits_the_width(page, width: int) -> None:
    """No element sticks out of the window, but inside a scrolling table or a pre (named when one does)."""
    wide = page.evaluate("""[...document.querySelectorAll('body *')]
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && !e.closest('.table-scroll, pre'))
        .map(e => `${e.tagName}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`).slice(0, 15)""")
    assert page.evaluate("document.documentElement.scrollWidth") <= width, wide
