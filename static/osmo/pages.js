// Live refresh keeps the reader's place: scroll offsets of [data-keep-scroll] regions and keyboard
// focus (by element id) survive the swap of a table fragment. Everything works without this file.
(function () {
  let saved = null;
  document.addEventListener("htmx:beforeSwap", function () {
    const active = document.activeElement;
    saved = { focus: active && active.id ? active.id : null, scroll: {} };
    document.querySelectorAll("[data-keep-scroll][id]").forEach(function (el) {
      saved.scroll[el.id] = [el.scrollLeft, el.scrollTop];
    });
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (!saved) return;
    Object.entries(saved.scroll).forEach(function ([id, offsets]) {
      const el = document.getElementById(id);
      if (el) { el.scrollLeft = offsets[0]; el.scrollTop = offsets[1]; }
    });
    if (saved.focus && document.activeElement === document.body) {
      const el = document.getElementById(saved.focus);
      if (el) el.focus({ preventScroll: true });
    }
    saved = null;
  });
})();

// A refused quota cell answers 422 with the refusal inside the cell's form: swap it in like a success.
document.addEventListener("htmx:beforeSwap", function (event) {
  if (event.detail.xhr.status === 422 && event.detail.elt.closest && event.detail.elt.closest(".quota-cell")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

// A region marked data-swap-errors (the submit form's dry run) shows a 4xx answer too: it says what is wrong.
document.addEventListener("htmx:beforeSwap", function (event) {
  const status = event.detail.xhr.status;
  const target = event.detail.target;
  if (status >= 400 && status < 500 && target && target.closest && target.closest("[data-swap-errors]")) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

// Any other fragment's error (a poll of a workload since deleted, a server error, the network down) leaves the page
// and the fragment's last content as they are, with one line before the fragment saying what failed; the next
// successful answer for that fragment takes the line away. Never the whole document (the page keeps its navigation).
(function () {
  function noticeFor(target) {
    const prev = target.previousElementSibling;
    return prev && prev.classList.contains("fragment-error") ? prev : null;
  }
  function say(event, text) {
    const target = event.detail.target;
    if (!target || !target.parentNode || target === document.body) return;
    let notice = noticeFor(target);
    if (!notice) {
      notice = document.createElement("p");
      notice.className = "form-alert fragment-error";
      notice.setAttribute("role", "status");
      target.parentNode.insertBefore(notice, target);
    }
    notice.textContent = text;
  }
  document.addEventListener("htmx:responseError", function (event) {
    const xhr = event.detail.xhr;
    say(event, "This part could not be updated: the server answered " + xhr.status
      + (xhr.statusText ? " " + xhr.statusText : "") + ". Reload the page to try again.");
  });
  document.addEventListener("htmx:sendError", function (event) {
    say(event, "This part could not be updated: the server did not answer. It will be tried again.");
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    const target = event.detail.target;
    const notice = target && event.detail.shouldSwap && !event.detail.isError ? noticeFor(target) : null;
    if (notice) notice.remove();
  });
})();

// Polls (hx-trigger "every Ns") run only while the tab is visible, and not while the focus is inside an element
// matching the polling element's data-poll-paused-within (a refresh would replace what is being typed). htmx's
// trigger filters ("every 5s [...]") would say the same, but htmx runs them as code (eval), which the content
// security policy refuses. htmx:trigger precedes every request started by an event or by `load`, never a poll's.
(function () {
  let triggered = null;
  document.addEventListener("htmx:trigger", function (event) { triggered = event.target; });
  document.addEventListener("htmx:confirm", function (event) {
    const elt = event.detail.elt;
    const poll = !event.detail.triggeringEvent && triggered !== elt
      && /\bevery\b/.test(elt.getAttribute("hx-trigger") || "");
    triggered = null;
    if (!poll) return;
    const within = elt.getAttribute("data-poll-paused-within");
    const active = document.activeElement;
    if (document.visibilityState !== "visible" || (within && active && active.closest && active.closest(within))) {
      event.preventDefault();
    }
  });
})();
