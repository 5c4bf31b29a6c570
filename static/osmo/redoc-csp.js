"use strict";
// Loaded before Redoc, which was not written for a policy of 'self' only (OSMO_CSP):
// - it writes its styles into <style> elements (styled-components, through their CSSOM sheet), which the
//   policy refuses once in the document (Redoc then stops, "error 17"): they stay out of the document and
//   their rules go to a constructed sheet that the document adopts (CSSOM, which the policy allows);
// - its footer logo comes from cdn.redoc.ly: not loaded (and api-docs.js turns search off: its worker is a blob).
(function () {
  const adopted = new WeakMap();
  const native = Object.getOwnPropertyDescriptor(HTMLStyleElement.prototype, "sheet");
  const adopt = (style) => {
    if (!adopted.has(style)) {
      const sheet = new CSSStyleSheet();
      sheet.replaceSync(style.textContent);
      adopted.set(style, sheet);
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    }
    return adopted.get(style);
  };
  Object.defineProperty(HTMLStyleElement.prototype, "sheet", {
    configurable: true,
    get() {
      return adopted.get(this) || native.get.call(this);
    },
  });
  const insertBefore = Node.prototype.insertBefore;
  Node.prototype.insertBefore = function (node, child) {
    return node instanceof HTMLStyleElement ? (adopt(node), node) : insertBefore.call(this, node, child);
  };
  const appendChild = Node.prototype.appendChild;
  Node.prototype.appendChild = function (node) {
    return node instanceof HTMLStyleElement ? (adopt(node), node) : appendChild.call(this, node);
  };
  const remote = (value) => /^https?:/.test(String(value));
  const setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    return this instanceof HTMLImageElement && name === "src" && remote(value)
      ? undefined : setAttribute.call(this, name, value);
  };
  const src = Object.getOwnPropertyDescriptor(HTMLImageElement.prototype, "src");
  Object.defineProperty(HTMLImageElement.prototype, "src", {
    configurable: true,
    get() {
      return src.get.call(this);
    },
    set(value) {
      if (!remote(value)) {
        src.set.call(this, value);
      }
    },
  });
})();
