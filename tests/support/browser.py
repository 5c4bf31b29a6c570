"""Signing in through the pages' own form, in Chromium (the browser tests' one sign-in)."""

from urllib.parse import quote, urlparse

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


class Gate:
    """Holds the page's requests that `matches` (a Playwright Request) on their way (Playwright's route), so that a
    test decides when their answer lands: a race of the page made to happen, at the moment the test chooses. With
    `once`, only the first is held and every later one goes through; else each is held until `release`. Every other
    request of `paths` goes through (or to the next Gate of the same paths)."""

    def __init__(self, page, paths: set[str], matches, *, once: bool = True):
        self.page, self.matches, self.once = page, matches, once
        self.held: list = []
        self.passed = False
        page.route(lambda url: urlparse(url).path in paths, self._handle)

    def _handle(self, route, request) -> None:
        if self.matches(request) and not (self.once and self.passed):
            self.passed = True
            self.held.append(route)
        else:
            route.fallback()  # to another Gate on the same paths, if any, else on its way

    def wait_held(self) -> None:
        """Until a request is held: the page's event loop is turned so that Playwright hands the route over (the
        HANG_MS ceiling turns a request that never comes into a failure)."""
        turns = HANG_MS // 10
        while not self.held and turns:
            self.page.evaluate("() => new Promise((done) => setTimeout(done, 10))")
            turns -= 1
        assert self.held, "no request was held"

    def release(self, count: int | None = None) -> None:
        """Lets the first `count` held requests (all by default) go on to the server; their answers land."""
        count = len(self.held) if count is None else count
        held, self.held = self.held[:count], self.held[count:]
        for route in held:
            route.continue_()


def is_poll_of(path: str):
    """A GET of `path` sent by htmx (a live region's poll, or its refresh)."""
    return lambda request: (request.method == "GET" and urlparse(request.url).path == path
                            and request.headers.get("hx-request") == "true")


# The GET requests htmx has had answered since `count_answers`, whatever became of the element that sent them.
COUNT_ANSWERS = """() => { window.__answers = 0;
  document.addEventListener("htmx:afterRequest", (event) => {
    if (event.detail.requestConfig && event.detail.requestConfig.verb === "get") window.__answers += 1; }); }"""


def count_answers(page) -> None:
    page.evaluate(COUNT_ANSWERS)


def wait_answers(page, count: int) -> None:
    """Until htmx has had `count` GET answers in all since count_answers (each swapped in or not, by then)."""
    page.wait_for_function(f"() => window.__answers >= {int(count)}")


def answers(page) -> int:
    return page.evaluate("() => window.__answers")
