"""Signing in through the pages' own form, in Chromium (the browser tests' one sign-in)."""

from urllib.parse import quote

USERNAME, PASSWORD = "ops", "pw-ops-123"  # the `staff` fixture of tests/conftest.py
# The ceiling of every wait on a page: it only turns a hang into a failure, so no load on a busy machine reaches it.
HANG_MS = 60_000


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


# htmx marks an element that has a request in flight (htmx-request), a target being swapped (htmx-swapping) and the
# swapped elements until they have settled (htmx-settling); each step adds the next mark before it takes its own
# away, and a swapped `load` region starts its request while it is swapped in.
HTMX_BUSY = ".htmx-request, .htmx-swapping, .htmx-settling"


def htmx_settled(page) -> None:
    """Waits until the page has loaded and htmx has nothing in flight, being swapped or settling: the `load`
    regions' requests (started as htmx processes the page, before the load event) have been answered and swapped
    in. What networkidle (500 ms without a request) waited for, without waiting out the half second, and reached
    between two polls of a live page as well. Then one turn of the page's event loop, so that the events queued by
    the last swap (a policy violation's report among them) have been dispatched."""
    page.wait_for_function(f"() => document.readyState === 'complete' && !document.querySelector({HTMX_BUSY!r})")
    page.evaluate("() => new Promise((done) => setTimeout(done, 0))")


def htmx_answered(page) -> None:
    """Waits until no htmx request is in flight (its answer in), for a page whose timers are Playwright's clock,
    where settling (a timer) waits for the clock to move. (A function, not an expression: the policy refuses the
    eval an expression would need.)"""
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
