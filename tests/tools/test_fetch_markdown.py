"""``fetch_webpage`` gives the model Markdown, as the editor's fetch tool does: a real page
served by a local HTTP server comes back with its headings, links (made absolute), lists,
table and code, without its scripts and styles, and still bounded in size."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptflow_resume.tools.consent import Consent
from promptflow_resume.tools.fetch import MAX_FETCH_CHARS, FetchWebpage
from promptflow_resume.tools.tool import ToolContext

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Release guide · Acme docs</title>
  <link rel="stylesheet" href="/static/site.css">
  <style>body { font-family: sans-serif } .nav { display: flex }</style>
  <script>window.analytics = { track: function () { stealCookies(); } };</script>
</head>
<body>
  <nav class="nav"><a href="/">Home</a> <a href="../api/">API</a></nav>
  <main>
    <h1>Releasing a version</h1>
    <p>Read the <a href="checklist.html">checklist</a> first, then the
       <a href="https://example.org/policy">policy</a>. Jump to <a href="#steps">the steps</a>.</p>
    <h2 id="steps">Steps</h2>
    <ol>
      <li>Bump <code>version_info</code> in <em>setup.cfg</em>.</li>
      <li>Tag the commit.</li>
    </ol>
    <h3>Supported versions</h3>
    <table>
      <thead><tr><th>Version</th><th>Status</th></tr></thead>
      <tbody>
        <tr><td>2.x</td><td>active</td></tr>
        <tr><td>1.x</td><td>security fixes</td></tr>
      </tbody>
    </table>
    <pre><code>git tag -s v2.1.0
git push --tags</code></pre>
    <img src="img/flow.png" alt="release flow">
  </main>
  <script src="/static/app.js"></script>
  <script>document.write("tracking pixel")</script>
  <noscript>Enable JavaScript</noscript>
</body>
</html>
"""

EXPECTED = """\
# Release guide · Acme docs

[Home](http://127.0.0.1:PORT/) [API](http://127.0.0.1:PORT/docs/api/)

# Releasing a version

Read the [checklist](http://127.0.0.1:PORT/docs/guide/checklist.html) first, then the
[policy](https://example.org/policy). Jump to [the steps](#steps).

## Steps

1. Bump `version_info` in *setup.cfg*.
2. Tag the commit.

### Supported versions

| Version | Status |
| --- | --- |
| 2.x | active |
| 1.x | security fixes |

```
git tag -s v2.1.0
git push --tags
```

![release flow](http://127.0.0.1:PORT/docs/guide/img/flow.png)"""


class _Site(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.startswith("/docs/guide/release"):
            body = PAGE.encode("utf-8")
            kind = "text/html; charset=utf-8"
        elif self.path == "/big":
            body = ("<p>" + "word " * 60_000 + "</p>").encode()
            kind = "text/html"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def site() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_port
    httpd.shutdown()
    httpd.server_close()


def _fetch(url: str, tmp_path: Path) -> str:
    allowed = ToolContext(tmp_path, consent=Consent(hosts=("127.0.0.1",)))
    result = FetchWebpage().run({"url": url}, allowed)
    assert not result.is_error, result.content
    return result.content


def test_a_page_comes_back_as_markdown(site: int, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{site}/docs/guide/release.html"
    content = _fetch(url, tmp_path)
    head, _, text = content.partition("\n\n")
    assert head == f"{url} (HTTP 200, text/html)"
    assert text == EXPECTED.replace("PORT", str(site))
    for dropped in ("stealCookies", "tracking pixel", "font-family", "Enable JavaScript"):
        assert dropped not in content


def test_the_markdown_stays_bounded(site: int, tmp_path: Path) -> None:
    content = _fetch(f"http://127.0.0.1:{site}/big", tmp_path)
    text = content.partition("\n\n")[2]
    assert text.endswith(f"\n[text cut at {MAX_FETCH_CHARS} characters]")
    assert len(text) <= MAX_FETCH_CHARS + 50
