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
