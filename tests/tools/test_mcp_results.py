"""What an MCP tool's result becomes: a large text is cut to a preview in the progress file and
in the model's next request while a sidecar keeps it whole; images and binary resources get a
sidecar with the extension of their media type, and ``flow show --html`` shows the images.

Real servers only: ``tests/support/mcp_results_server.py`` (the ``mcp`` SDK) over stdio, and the
local OpenAI-protocol server of ``tests/support/providers_server.py`` as the model.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from promptflow_resume.api import RunOptions, StartRequest, start_run
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.sidecar import sidecar_extension
from promptflow_resume.tools.builtin import ReadFile
from promptflow_resume.tools.mcp_records import DEFAULT_MAX_OUTPUT
from promptflow_resume.tools.tool import ToolContext
from tests import support
from tests.cli.test_show import _chromium, _console, needs_chromium
from tests.support.flowproc import flow
from tests.support.mcp_results_server import PDF, PNG, big_lines
from tests.support.providers_server import Canned, ModelServer, openai_completion, openai_tool_call
from tests.support.trust import trusted

SERVER = support.SUPPORT / "mcp_results_server.py"
#: The size of the text result, as in the report: a 1 MB file read by server-filesystem.
BIG = 1_033_293

WORKFLOW = """---
description: Read what the results server returns
provider: openai
model: gpt-4o
tools: ['results/*']
---
## Step 1: Fetch
Fetch the result and say what it holds.
"""


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


def _workspace(tmp_path: Path, config: dict[str, object] | None = None) -> Path:
    where = tmp_path / "ws"
    (where / ".vscode").mkdir(parents=True)
    (where / "fetch.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    entry = {"command": sys.executable, "args": [str(SERVER)], **(config or {})}
    (where / ".vscode" / "mcp.json").write_text(
        json.dumps({"servers": {"results": entry}}), encoding="utf-8"
    )
    trusted(where)
    return where


def _run(where: Path, model: ModelServer, tool: str, arguments: dict[str, object]) -> Path:
    """One run whose model calls ``tool`` once, then answers; the progress file."""
    model.push(
        Canned(
            body=openai_completion(None, [openai_tool_call("call_1", tool, json.dumps(arguments))])
        ),
        Canned(body=openai_completion("Done.")),
    )
    progress = where / "run" / "progress.md"
    outcome = start_run(
        StartRequest(where / "fetch.prompt.md", progress=progress),
        RunOptions(base_url=model.url + "/v1", workspace=where),
    )
    assert outcome.exit_code == 0, outcome.run.last_error
    return progress


def test_a_large_text_result_is_a_preview_and_the_sidecar_keeps_it_whole(
    tmp_path: Path, model: ModelServer
) -> None:
    where = _workspace(tmp_path)
    progress = _run(where, model, "big_text", {"size": BIG})
    expected = big_lines(BIG).encode()

    # The progress file holds a preview, not the megabyte.
    assert progress.stat().st_size < DEFAULT_MAX_OUTPUT + 20_000
    run, _ = load_progress(progress)
    (result,) = [e for e in run.transcript if e.role == "tool_result"]
    assert result.sidecar is not None and result.sidecar.endswith(".txt")
    sidecar = progress.parent / result.sidecar
    assert hashlib.sha256(sidecar.read_bytes()).hexdigest() == hashlib.sha256(expected).hexdigest()
    assert result.sidecar_bytes == BIG

    # The model's next request carries the preview: head, tail, how much was cut, where the
    # whole is (a path read_file accepts), and nothing near the whole text.
    sent = model.requests[1].body["messages"][-1]
    assert sent["role"] == "tool"
    text = sent["content"]
    assert len(text.encode()) < DEFAULT_MAX_OUTPUT + 1_000
    assert text.startswith("line 0000001: the quick brown fox")
    assert expected.decode()[-200:] in text
    assert f"of {BIG} bytes not shown" in text
    relative = sidecar.relative_to(where).as_posix()
    assert f"{BIG:,} bytes) is kept in {relative}" in text
    assert "read_file" in text
    # ... and read_file does read it there, from any line.
    page = ReadFile().run({"path": relative, "offset": 10_000, "limit": 2}, ToolContext(where))
    assert not page.is_error
    assert "line 0010000: the quick brown fox" in page.content


def test_the_cap_is_set_per_server(tmp_path: Path, model: ModelServer) -> None:
    where = _workspace(tmp_path, {"flow": {"max_output": "4KB"}})
    progress = _run(where, model, "big_text", {"size": 50_000})
    text = model.requests[1].body["messages"][-1]["content"]
    assert len(text.encode()) < 4_000 + 500
    assert "of 50000 bytes not shown" in text
    assert progress.stat().st_size < 20_000


def test_a_text_under_the_cap_stays_whole_without_a_sidecar(
    tmp_path: Path, model: ModelServer
) -> None:
    where = _workspace(tmp_path)
    progress = _run(where, model, "big_text", {"size": 5_000})
    run, _ = load_progress(progress)
    (result,) = [e for e in run.transcript if e.role == "tool_result"]
    assert result.sidecar is None
    assert model.requests[1].body["messages"][-1]["content"] == big_lines(5_000)


@pytest.mark.parametrize(
    ("tool", "extension", "data"), [("picture", ".png", PNG), ("report", ".pdf", PDF)]
)
def test_binary_results_get_the_extension_of_their_media_type(
    tmp_path: Path, model: ModelServer, tool: str, extension: str, data: bytes
) -> None:
    where = _workspace(tmp_path)
    progress = _run(where, model, tool, {})
    run, _ = load_progress(progress)
    (result,) = [e for e in run.transcript if e.role == "tool_result"]
    assert result.sidecar is not None and result.sidecar.endswith(extension)
    assert (progress.parent / result.sidecar).read_bytes() == data


@pytest.mark.parametrize(
    ("media_type", "extension"),
    [
        ("image/png", ".png"),
        ("image/jpeg", ".jpg"),
        ("IMAGE/WEBP; q=1", ".webp"),
        ("application/pdf", ".pdf"),
        ("audio/wav", ".wav"),
        ("application/x-made-up", ""),
        ("../../etc", ""),
        (None, ""),
    ],
)
def test_sidecar_extension(media_type: str | None, extension: str) -> None:
    assert sidecar_extension(media_type) == extension


class _Page(HTMLParser):
    """The images and links of a page, and its content security policy."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str | None]] = []
        self.links: list[str] = []
        self.csp = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "img":
            self.images.append(found)
        elif tag == "a" and found.get("href"):
            self.links.append(found["href"] or "")
        elif tag == "meta" and found.get("http-equiv") == "Content-Security-Policy":
            self.csp = found.get("content") or ""


def test_the_html_report_shows_images_inline_and_links_other_sidecars(
    tmp_path: Path, model: ModelServer
) -> None:
    where = _workspace(tmp_path)
    progress = _run(where, model, "picture", {})
    model.push(
        Canned(body=openai_completion(None, [openai_tool_call("call_2", "report", "{}")])),
        Canned(body=openai_completion("Done.")),
    )
    other = start_run(
        StartRequest(where / "fetch.prompt.md", progress=progress.parent / "other.md"),
        RunOptions(base_url=model.url + "/v1", workspace=where),
    )
    assert other.exit_code == 0

    out = tmp_path / "report" / "run.html"
    done = flow("show", str(progress), "--html", str(out), cwd=where)
    assert done.returncode == 0, done.stderr
    page = _Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.csp.startswith("default-src 'none'") and "img-src data:" in page.csp
    (image,) = page.images
    assert image["src"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
    assert "call_1-picture.png" in (image["alt"] or "")

    out = progress.parent / "other.html"
    done = flow("show", str(progress.parent / "other.md"), "--html", str(out), cwd=where)
    assert done.returncode == 0, done.stderr
    page = _Page()
    page.feed(out.read_text(encoding="utf-8"))
    assert page.images == []
    (link,) = [link for link in page.links if link.endswith(".pdf")]
    assert link == "other.files/call_2-report.pdf"
    assert (out.parent / link).read_bytes() == PDF


def _swap_sidecar(progress: Path, data: bytes) -> None:
    """Replace the run's one sidecar with ``data`` and record its new digest and size, as a
    hostile author of a shared run could."""
    run, _ = load_progress(progress)
    (entry,) = [e for e in run.transcript if e.sidecar]
    assert entry.sidecar is not None and entry.sidecar_sha256 is not None
    path = progress.parent / entry.sidecar
    old = path.read_bytes()
    path.write_bytes(data)
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    text = progress.read_text(encoding="utf-8")
    assert entry.sidecar_sha256 in text
    text = text.replace(entry.sidecar_sha256, digest)
    text = text.replace(f"bytes={len(old)}", f"bytes={len(data)}")
    progress.write_text(text, encoding="utf-8")


def test_a_sidecar_that_only_claims_to_be_an_image_is_linked_not_shown(
    tmp_path: Path, model: ModelServer
) -> None:
    where = _workspace(tmp_path)
    progress = _run(where, model, "picture", {})
    svg = (
        b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><script>alert(2)</script></svg>'
    )
    _swap_sidecar(progress, svg)
    out = tmp_path / "run.html"
    done = flow("show", str(progress), "--html", str(out), cwd=where)
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    assert page.images == []
    assert [link for link in page.links if link.endswith(".png")] == [
        "ws/run/progress.files/call_1-picture.png"
    ]
    assert "alert" not in text and "data:image/svg" not in text


@needs_chromium
def test_the_report_with_an_image_in_a_real_browser(tmp_path: Path, model: ModelServer) -> None:
    where = _workspace(tmp_path)
    progress = _run(where, model, "picture", {})
    out = tmp_path / "pages" / "run.html"
    done = flow("show", str(progress), "--html", str(out), cwd=where)
    assert done.returncode == 0, done.stderr
    result = _chromium("--dump-dom", out.as_uri())
    assert _console(result.stderr) == []  # the data: image is allowed, nothing is blocked
    assert '<img src="data:image/png;base64,' in result.stdout
    shot = tmp_path / "page.png"
    result = _chromium(
        "--hide-scrollbars", "--window-size=900,1200", f"--screenshot={shot}", out.as_uri()
    )
    assert _console(result.stderr) == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
