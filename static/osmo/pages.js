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

// Polls (hx-trigger "every Ns") run only while the tab is visible, and not while the focus is inside an element
// matching the polling element's data-poll-paused-within (a refresh would replace what is being typed). htmx's
// trigger filters ("every 5s [...]") would say the same, but htmx runs them as code (eval), which the content
// security policy refuses. htmx:trigger precedes every request started by an event or by `load`, never a poll's.
//
// A poll already on its way when the user starts working is not paused: its answer is not swapped in (that once)
// while the region it would replace holds what the user is working on: the focus inside data-poll-paused-within, a
// field changed and not saved (typed, ticked, chosen; or refused by the server, aria-invalid), or an element with its
// own request in flight (a quota cell's save: replaced, it would lose its answer, a refusal or the fresh cell). The
// next poll brings the fresh state once the user is done. The same for the live region's own request on an event
// (quotas-changed from:body, sent by another cell's save: a refresh). Never a request of another element (a save, a
// sort or page link, the filters) or the region's `load`: their answers are always swapped in. Only swaps that
// replace: an appending poll's answer (a log's lines) always is.
(function () {
  let triggered = null;
  const refreshes = new WeakSet();  // the `etc` object htmx gives each request, for a live region's refreshes
  function isPoll(elt) {
    return /\bevery\b/.test(elt.getAttribute("hx-trigger") || "");
  }
  function pausedBy(elt) {
    const within = elt.getAttribute("data-poll-paused-within");
    const active = document.activeElement;
    return Boolean(within && active && active.closest && active.closest(within));
  }
  function changed(field) {
    if (field.type === "checkbox" || field.type === "radio") return field.checked !== field.defaultChecked;
    if (field.tagName === "SELECT") {
      const options = Array.from(field.options);
      if (field.multiple) return options.some(function (o) { return o.selected !== o.defaultSelected; });
      const chosen = options.findIndex(function (o) { return o.defaultSelected; });
      return field.selectedIndex !== (chosen < 0 ? 0 : chosen);
    }
    if (field.tagName === "TEXTAREA" || field.tagName === "INPUT") return field.value !== field.defaultValue;
    return false;
  }
  function busy(region, elt) {
    const active = document.activeElement;
    if (active && region.contains(active) && pausedBy(elt)) return true;
    if (region.querySelector(".htmx-request, [aria-invalid=true]")) return true;  // the region's own: not a descendant
    return Array.from(region.querySelectorAll("input, select, textarea")).some(changed);
  }
  document.addEventListener("htmx:trigger", function (event) { triggered = event.target; });
  document.addEventListener("htmx:confirm", function (event) {
    const elt = event.detail.elt;
    const cause = event.detail.triggeringEvent;
    const poll = !cause && triggered !== elt && isPoll(elt);
    triggered = null;
    if (poll && (document.visibilityState !== "visible" || pausedBy(elt))) {
      event.preventDefault();
      return;
    }
    // The live region's own request on an event (quotas-changed from:body; a bubbled event's target may be inside)
    const refresh = poll || (cause && isPoll(elt));
    if (refresh && event.detail.etc) refreshes.add(event.detail.etc);
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    const detail = event.detail;
    if (!detail.shouldSwap || detail.isError || !detail.etc || !refreshes.has(detail.etc)) return;
    const elt = detail.requestConfig && detail.requestConfig.elt;
    const swap = (elt && elt.getAttribute("hx-swap")) || "innerHTML";
    if (!/^(outerHTML|innerHTML)\b/.test(swap)) return;
    const regions = [detail.target, elt].filter(function (el, i, all) { return el && all.indexOf(el) === i; });
    if (regions.some(function (region) { return busy(region, elt || region); })) detail.shouldSwap = false;
  });
})();

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
