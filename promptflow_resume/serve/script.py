"""The dashboard's one script (served as ``/static/serve.js``; the pages allow no inline
script): it listens to the page's event stream and puts what arrives in place. Without it the
pages still work, only not live."""

from __future__ import annotations

SCRIPT = """\
(function () {
  "use strict";
  var live = document.getElementById("flow-live");
  if (!live || !window.EventSource) { return; }
  var source = new EventSource(live.dataset.events);
  function swap(id, html) {
    var old = document.getElementById(id);
    if (old) { old.outerHTML = html; }
  }
  source.addEventListener("head", function (e) { swap("run-head", e.data); });
  source.addEventListener("actions", function (e) { swap("actions", e.data); });
  source.addEventListener("entries", function (e) {
    var box = document.getElementById("conversation");
    var end = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    box.insertAdjacentHTML("beforeend", e.data);
    if (end) { window.scrollTo(0, document.body.scrollHeight); }
  });
  source.addEventListener("rows", function (e) {
    var body = document.getElementById("runs-body");
    if (body) { body.innerHTML = e.data; }
  });
  source.addEventListener("waiting", function (e) {
    var count = document.getElementById("waiting");
    if (count) { count.textContent = e.data; }
  });
  source.addEventListener("reload", function () { source.close(); location.reload(); });
  document.documentElement.dataset.live = "on";
})();
"""
