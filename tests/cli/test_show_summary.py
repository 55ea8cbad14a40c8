"""``flow show --summary``: a run as Markdown sized for a pull request comment (spec 11.1)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from promptflow_resume.cli import main
from promptflow_resume.progress import render
from promptflow_resume.progress.examples import example_run
from promptflow_resume.progress.model import Approval, StepState, Usage
from promptflow_resume.progress.state import RunState
from promptflow_resume.show.prsummary import SUMMARY_LIMIT, pr_summary, summary_text
from tests import support
from tests.support.flowproc import flow

EXAMPLE = support.REPO / "workflows" / "examples" / "triage-todos.progress.md"
GITHUB_LIMIT = 65_536


def test_summary_of_the_example_shows_status_steps_settings_and_links(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = EXAMPLE.read_bytes()
    assert main(["show", str(EXAMPLE), "--summary", "--report-link", "run.html"]) == 0
    text = capsys.readouterr().out
    assert EXAMPLE.read_bytes() == before
    assert text.startswith("## ✅ flow: triage-todos — completed\n")
    # The time is the example's own (whole seconds, however long its regeneration took).
    assert re.search(r"\| 1 \| collect \| ✅ completed \| \d+s \| 3 \| 2,266 \| \$0\.0004 \|", text)
    assert "| Provider | replay |" in text and "| Model | gpt-4o-mini |" in text
    assert "| Budget | max_turns: 12 |" in text
    assert "| Tools offered | `find_todos`, `read_file` |" in text
    assert "| Inputs | folder: workflows/examples/sample-app |" in text
    assert "- Report: [HTML report](run.html)" in text
    assert len(text) < GITHUB_LIMIT


def _held(n: int) -> Approval:
    return Approval(
        call_id=f"call-{n}",
        tool="run_command",
        step="inspect",
        entry=3,
        preview="rm -rf | build " * 40,
        why="matches --approve run_command",
    )


def test_a_huge_run_is_capped_under_the_limit(tmp_path: Path) -> None:
    run = example_run()
    steps = {f"step-{n}": StepState(status="completed", usage=Usage(turns=3)) for n in range(900)}
    run = replace(
        run,
        status="awaiting_approval",
        steps=steps,
        inputs={f"input{n}": "x" * 5000 for n in range(300)},
        approvals=[_held(n) for n in range(400)],
        reason="r" * 10_000,
    )
    path = tmp_path / "progress.md"
    state = RunState("awaiting_approval", run.reason, run.status, None, True)
    text = summary_text(run, state, path)
    assert len(text) < SUMMARY_LIMIT
    assert "| … | 840 more steps | | | | | |" in text
    assert "| 900 | step-899 |" in text
    assert "| … | 380 more | | |" in text
    assert "and 280 more" in text
    # A pipe in a preview cannot break the table.
    assert "rm -rf \\| build" in text


def test_awaiting_approval_names_the_commands_and_the_line_to_edit(tmp_path: Path) -> None:
    run = replace(example_run(), status="awaiting_approval", approvals=[_held(1)])
    entry = run.transcript[4]
    entry.sidecar = entry.sidecar_sha256 = entry.sidecar_bytes = None
    path = tmp_path / "progress.md"
    path.write_text(render(run), encoding="utf-8")
    line = path.read_text(encoding="utf-8").splitlines().index("approvals:") + 1
    text = pr_summary(path)
    assert f"`flow approve {path} --call call-1`" in text
    assert f"under `approvals:` at `{path}:{line}`" in text


def test_summary_of_a_missing_file_is_one_paragraph_with_exit_5(tmp_path: Path) -> None:
    done = flow("show", "nothing.md", "--summary", cwd=tmp_path)
    assert done.returncode == 5
    assert "Traceback" not in done.stderr and "nothing.md" in done.stderr


def test_summary_refuses_options_that_do_not_go_with_it(tmp_path: Path) -> None:
    both = flow("show", str(EXAMPLE), "--summary", "--json", cwd=tmp_path)
    assert both.returncode == 9 and "--summary prints Markdown" in both.stderr
    alone = flow("show", str(EXAMPLE), "--report-link", "x.html", cwd=tmp_path)
    assert alone.returncode == 9 and "--report-link goes with --summary" in alone.stderr
