"""``flow show``: the run in the terminal (snapshot) and as a self-contained HTML page."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from promptflow_resume.cli import main
from promptflow_resume.progress import load_progress, render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.show.html import html_page
from promptflow_resume.show.timeline import duration_text, timeline
from tests import support

ROOT = support.REPO
EXAMPLE = ROOT / "workflows" / "examples" / "triage-todos.progress.md"


class TextSnapshot(SingleFileSnapshotExtension):
    """One readable ``.txt`` file per snapshot: the terminal output as a person sees it."""

    file_extension = "txt"
    _write_mode = WriteMode.TEXT


@pytest.fixture
def progress(tmp_path: Path) -> Path:
    run = example_run()
    entry = run.transcript[4]  # its sidecar file is not part of the example
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    path = tmp_path / "progress.md"
    path.write_text(render(run), encoding="utf-8")
    return path


def test_flow_show_prints_the_timeline_and_the_conversation(
    progress: Path, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    before = progress.read_bytes()
    assert main(["show", str(progress), "--width", "100", "--lines", "2"]) == 0
    shown = capsys.readouterr().out
    assert shown == snapshot.use_extension(TextSnapshot)
    assert progress.read_bytes() == before  # only read
    # Markdown is rendered (no fence markers, no heading hashes), tool outputs collapsed.
    assert "```markdown" not in shown and "\n## " not in shown
    assert "\n… 3 more lines\n" in shown
    assert "│ inspect │ completed   │   +1s │  18s │     2 │" in shown
    assert "│ report  │ interrupted │  +20s │  12s │     0 │" in shown


def test_flow_show_of_the_example_renders_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", str(EXAMPLE), "--width", "120", "--lines", "2"]) == 0
    shown = capsys.readouterr().out
    assert "Task list" in shown and "## Task list" not in shown
    assert " 1 Reject negative quantities in total_value" in shown
    assert "→ find_todos(" in shown


def test_flow_show_of_a_missing_file_is_one_line_and_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["show", str(tmp_path / "nope.md")])
    captured = capsys.readouterr()
    assert code != 0 and "Traceback" not in captured.err
    assert "nope.md" in captured.err


def test_the_timeline_has_each_steps_time_turns_tokens_and_cost() -> None:
    rows = timeline(example_run())
    # The run was interrupted in "report": the file records it running, a reader sees it stopped.
    assert [(r.step, r.status, r.recorded_status) for r in rows] == [
        ("inspect", "completed", "completed"),
        ("report", "interrupted", "running"),
    ]
    inspect, report = rows
    assert (inspect.offset, inspect.seconds, inspect.turns) == (1.0, 18.0, 2)
    assert inspect.tokens == 1840 + 212 and inspect.cost_usd == pytest.approx(0.000403)
    assert report.seconds == 12.0  # still running: up to the run's last update
    assert [duration_text(s) for s in (None, 5, 185, 7260)] == ["—", "5s", "3m 05s", "2h 01m"]


# --- the HTML page -------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (apt-get install chromium; .ci/run installs it)",
)


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium with console messages logged to stderr (``INFO:CONSOLE`` lines)."""
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def _page(tmp_path: Path, source: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    out = tmp_path / "pages" / "run.html"
    assert main(["show", str(source), "--html", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    return out


def test_the_page_is_self_contained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], progress: Path
) -> None:
    page = _page(tmp_path, progress, capsys).read_text(encoding="utf-8")
    assert "default-src 'none'" in page  # the browser may load nothing
    assert not re.search(r"<(?:link|img|iframe)\b|\bsrc=", page)
    assert "<script" not in page.replace('<script type="application/json"', "")
    # Raw HTML in a message is shown as text; a Markdown image as its text.
    run = example_run()
    run.transcript[5].content = '<img src="https://example.com/x.png"> ![logo](https://e.com/l.png)'
    page = html_page(run)
    assert "&lt;img src=" in page and "<img" not in page  # an image becomes a link


@needs_chromium
def test_the_page_in_a_real_browser(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = _page(tmp_path, EXAMPLE, capsys)
    run, _ = load_progress(EXAMPLE)
    result = _chromium("--dump-dom", page.as_uri())
    assert _console(result.stderr) == []  # no errors, no blocked loads
    dom = result.stdout
    # The conversation: one section per entry, the answer rendered from Markdown.
    assert len(re.findall(r'<section class="entry ', dom)) == len(run.transcript)
    answer = dom[dom.index('id="entry-11"') :]
    assert "<h2>Task list</h2>" in answer and "<ol>" in answer
    assert "language-markdown" not in dom
    # Tool outputs collapse: short ones open, long ones closed until clicked.
    results = [e for e in run.transcript if e.role == "tool_result"]
    assert dom.count("<details") == len(results)
    assert dom.count("<details open") == 1  # the 6-line one; the 33-line file is closed
    # The time line chart: one group per step with its facts.
    chart = dom[dom.index('<svg class="chart" id="timeline"') : dom.index("</svg>")]
    assert chart.count('<g class="step"') == len(run.steps)
    assert "2,266 tokens" in chart and "3 turns" in chart
    shot = tmp_path / "page.png"
    result = _chromium(
        "--hide-scrollbars", "--window-size=1100,2400", f"--screenshot={shot}", page.as_uri()
    )
    assert _console(result.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000  # a page, not a blank


@needs_chromium
def test_the_console_check_sees_errors_and_blocked_loads(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'\"></head><body>"
        '<img src="https://example.com/a.png"></body></html>',
        encoding="utf-8",
    )
    assert _console(_chromium("--dump-dom", bad.as_uri()).stderr)


def test_flow_show_json_has_the_time_line(
    progress: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", str(progress), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run_id"] == "20261121-232529-release-a1b2" and data["entries"] == 8
    assert [(s["step"], s["seconds"], s["tokens"]) for s in data["steps"]] == [
        ("inspect", 18.0, 2052),
        ("report", 12.0, 0),
    ]


def test_diffs_in_tool_outputs_are_coloured_line_by_line() -> None:
    run = example_run()
    run.transcript[3].content = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old <line>\n+new line\n"
    page = html_page(run)
    assert '<span class="del">-old &lt;line&gt;</span>' in page
    assert '<span class="add">+new line</span>' in page
    assert '<span class="hunk">@@ -1 +1 @@</span>' in page
    assert "--- a/x\n+++ b/x" in page  # file headers are not counted as lines removed/added


def test_no_escape_sequence_from_the_file_reaches_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A shared progress file is input from anyone: it must not retitle or clear the terminal.
    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    run.workflow.name = "notes\x1b]0;owned\x07"
    run.transcript[5].content = "evil \x1b[2J and \x1b[31mred\x1b[0m\r done"
    run.transcript[3].tool = "git\x1b[1Alog"
    run.transcript[3].content = "line\x1b[31m\n" * 8
    path = tmp_path / "progress.md"
    path.write_text(render(run), encoding="utf-8")
    assert main(["show", str(path), "--width", "100"]) == 0
    shown = capsys.readouterr().out
    assert not [c for c in shown if ord(c) < 32 and c not in "\n"]
    assert "evil \u241b[2J" in shown


def test_the_page_marks_an_entry_edited_by_hand(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], progress: Path
) -> None:
    run, _ = load_progress(progress)
    entry = next(e for e in run.transcript if e.role == "assistant" and e.content)
    line = entry.content.split("\n", 1)[0]
    text = progress.read_text(encoding="utf-8")
    progress.write_text(text.replace(line, line + " (by hand)", 1), encoding="utf-8")
    page = _page(tmp_path, progress, capsys).read_text(encoding="utf-8")
    assert page.count("edited by hand") == 1
    assert f'class="entry assistant edited" id="entry-{entry.id}"' in page


def test_tool_output_and_code_keep_their_indentation() -> None:
    from io import StringIO

    from rich.console import Console

    from promptflow_resume.show.console import terminal_view

    run = example_run()
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    python = "def total(items):\n    if not items:\n\treturn 0\n    return sum(items)\n"
    run.transcript[3].content = python
    entry.content = '{\n  "todos": [\n    {"line": 12}\n  ]\n}\n'
    run.transcript[5].content = "Here:\n\n```python\ndef f():\n        return 1\n```\n"
    console = Console(file=StringIO(), width=100, color_system=None)
    console.print(terminal_view(run, result_lines=10))
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\n    if not items:\n" in shown
    assert "\n    return 0\n" in shown  # a tab: to the next multiple of four
    assert '\n  "todos": [\n    {"line": 12}\n  ]\n' in shown
    assert "        return 1" in shown
