"""``flow show``: the run in the terminal (snapshot) and as a self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from promptflow_resume.cli import main
from promptflow_resume.progress import render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.show.timeline import duration_text, timeline

ROOT = Path(__file__).resolve().parent.parent
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
    assert "│ inspect │ completed │   +1s │  18s │     2 │" in shown


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
    assert [(r.step, r.status) for r in rows] == [("inspect", "completed"), ("report", "running")]
    inspect, report = rows
    assert (inspect.offset, inspect.seconds, inspect.turns) == (1.0, 18.0, 2)
    assert inspect.tokens == 1840 + 212 and inspect.cost_usd == pytest.approx(0.000403)
    assert report.seconds == 12.0  # still running: up to the run's last update
    assert [duration_text(s) for s in (None, 5, 185, 7260)] == ["—", "5s", "3m 05s", "2h 01m"]
