"""``flow serve`` in a real browser: the system's Chromium driven by Playwright (no browser is
downloaded). A run advancing shows in the list and on its page without a reload; a click on
Approve writes the decision and a click on Resume completes the run; the hostile fixture runs
no script. Set ``FLOW_SCREENSHOTS=docs/images`` to refresh the guide's screenshots."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from promptflow_resume.progress import load_progress, render
from tests.support import REPO, xss
from tests.support.flowproc import flow, flow_env
from tests.support.serve import Server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import Browser, Page, sync_playwright
except ImportError:  # pragma: no cover - dev installs it
    sync_playwright = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="headless Chromium is not installed (apt-get install chromium; .ci/run installs it)",
    ),
    pytest.mark.skipif(
        sync_playwright is None, reason="playwright is not installed (pip install -e '.[dev]')"
    ),
]

#: Where screenshots go: the guide's images when asked, else the test's temp folder.
SHOTS = os.environ.get("FLOW_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium for the module."""
    assert sync_playwright is not None and CHROMIUM is not None
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


class Watched:
    """A page whose dialogs and console errors are recorded."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


def _page(browser: Browser, width: int = 1280) -> Watched:
    context = browser.new_context(viewport={"width": width, "height": 900})
    return Watched(context.new_page())


def _shot(page: Page, name: str, tmp_path: Path) -> None:
    folder = REPO / SHOTS if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=False)
    assert (folder / name).stat().st_size > 10_000


def _until(check: Callable[[], bool], seconds: float = 20) -> None:
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, "not within the time allowed"
        time.sleep(0.1)


def test_a_live_run_advances_in_the_list_and_on_its_page(browser: Browser, tmp_path: Path) -> None:
    # Four steps of three paced tool calls: each step ends (and is folded) about once a second.
    script = REPO / "tests" / "support" / "long_run.py"
    runner = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), "3", "--steps", "4", "--pace", "0.35"],
        env=flow_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    progress = tmp_path / "run" / "progress.md"
    try:
        _until(progress.exists)
        with Server(tmp_path) as server:
            watched = _page(browser)
            page = watched.page
            page.goto(server.url)
            assert page.url.endswith(f":{server.port}/")  # the token left the address bar
            _until(lambda: page.evaluate("document.documentElement.dataset.live") == "on")
            page.evaluate("window.__same_page = 1")
            steps = page.locator("#runs-body td.steps").first
            first = steps.inner_text()
            _until(lambda: steps.inner_text() not in (first, ""))  # advanced, no reload
            assert page.evaluate("window.__same_page") == 1
            page.locator("#runs-body a").first.click()
            page.wait_for_selector("#conversation section")
            page.evaluate("window.__same_page = 2")
            count = page.locator("#conversation section").count
            before = count()
            _until(lambda: count() > before + 2)  # entries arrive while the run writes
            assert page.evaluate("window.__same_page") == 2
            runner.wait(timeout=60)
            _until(lambda: page.locator("#status").inner_text() == "completed")
            run, _ = load_progress(progress)
            _until(lambda: count() == len(run.transcript))
            assert watched.errors == [] and watched.dialogs == []
    finally:
        if runner.poll() is None:
            runner.kill()
        runner.wait()


APPROVAL_WORKFLOW = """---
description: Write a file after reading the notes
provider: scripted
tools: [create_file, read_file]
approve: [edit]
---
## Step 1: Write
Write the file.
"""
APPROVAL_SCRIPT = """replies:
  - content: "Writing."
    tool_calls:
      - {name: read_file, arguments: {path: notes.md}}
      - {name: create_file, arguments: {path: a.txt, content: "A"}}
  - content: "Done."
"""


def test_approve_in_the_page_then_resume_completes_the_run(
    browser: Browser, tmp_path: Path
) -> None:
    (tmp_path / "wf.prompt.md").write_text(APPROVAL_WORKFLOW, encoding="utf-8")
    (tmp_path / "wf.script.yaml").write_text(APPROVAL_SCRIPT, encoding="utf-8")
    (tmp_path / "notes.md").write_text("ship on Friday\n", encoding="utf-8")
    started = flow(
        "run", "wf.prompt.md", "--recording", "wf.script.yaml", "--progress", "run/progress.md",
        "--new", cwd=tmp_path,
    )  # fmt: skip
    assert started.returncode == 15, started.stderr
    progress = tmp_path / "run" / "progress.md"
    # Two older runs beside it, for the list to show more than one.
    for name, status in (("release-notes", "interrupted"), ("release-check", "completed")):
        other = xss.plain_run()
        other.run_id, other.status = f"20261121-232529-{name}", status
        other.reason = None if status == "completed" else other.reason
        path = tmp_path / ".flow" / "runs" / other.run_id / "progress.md"
        path.parent.mkdir(parents=True)
        path.write_text(render(other), encoding="utf-8")
    with Server(tmp_path) as server:
        watched = _page(browser)
        page = watched.page
        page.goto(server.url)
        assert page.locator(".needs").inner_text() == "approval"
        assert page.locator("#runs-body tr").count() == 3
        _shot(page, "serve-list.png", tmp_path)
        page.locator("#runs-body a").first.click()
        page.wait_for_selector("#approvals")
        _shot(page, "serve-approval.png", tmp_path)
        page.locator("#approve").click()
        assert "approved: call_0_1" in page.locator("#note").inner_text()
        run, _ = load_progress(progress)
        assert [(a.call_id, a.decision) for a in run.approvals] == [("call_0_1", "approved")]
        assert run.approvals[0].by and run.approvals[0].host  # recorded as flow approve does
        page.locator("#resume").click()
        _until(lambda: page.locator("#status").inner_text() == "completed", 60)
        # The file says completed a moment before the process has ended.
        _until(lambda: "exit code 0" in page.locator("#process h2").inner_text())
        assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "A"
        _shot(page, "serve-run.png", tmp_path)
        assert watched.errors == [] and watched.dialogs == []
    run, _ = load_progress(progress)
    assert run.status == "completed" and run.approvals == []


def test_the_hostile_fixture_runs_no_script(browser: Browser, tmp_path: Path) -> None:
    xss.plant(tmp_path)
    with Server(tmp_path) as server:
        watched = _page(browser)
        page = watched.page
        page.goto(server.url)
        urls = [f"{server.base}/"]
        for name in ("xss-a", "xss-b"):
            urls.append(f"{server.base}/run/0/.flow/runs/{name}/progress.md")
        for url in urls:
            page.goto(url)
            page.wait_for_load_state("load")
            time.sleep(0.3)
            assert page.evaluate(f"typeof window.{xss.FLAG}") == "undefined", url
            # Every detail opened (an ontoggle payload would fire on a real toggle).
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = !d.open)")
            for link in page.locator("#conversation a").all()[:20]:
                assert not (link.get_attribute("href") or "").startswith("javascript")
        time.sleep(0.3)
        assert page.evaluate(f"typeof window.{xss.FLAG}") == "undefined"
        assert watched.dialogs == []
        assert watched.errors == []  # not even a blocked load: nothing tried to load
