"""A step the run stopped in shows how the run stopped, in every view: the file keeps the step
``running`` (it goes on mid-step on resume), but no view says a step runs in a failed,
budget-exhausted or held run (``runview.shown_step_status``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume import Limits, RunOptions, start_run
from promptflow_resume.api import StartRequest
from promptflow_resume.progress import load_progress
from promptflow_resume.show.prsummary import pr_summary
from promptflow_resume.show.report import run_json, terminal_report

WORKFLOW = """\
---
description: Write a file, then report
provider: scripted
tools: [create_file]
approve: [edit]
---
## Step 1: Write
Write it.

## Step 2: Report
Report.
"""

SCRIPTS = {
    # Two turns in "write": the turn budget of one stops the run in it.
    "budget_exhausted": 'replies:\n  - content: "Thinking."\n    tool_calls:\n'
    '      - {name: nope, arguments: {}}\n  - "Written."\n  - "Reported."\n',
    # A permanent provider error on the first call.
    "failed": 'replies: ["Written.", "Reported."]\n'
    "failures:\n  0: {transient: false, reason: auth, message: bad key}\n",
    # A held edit.
    "awaiting_approval": 'replies:\n  - content: "Writing."\n    tool_calls:\n'
    '      - {name: create_file, arguments: {path: a.txt, content: "A"}}\n'
    '  - "Written."\n  - "Reported."\n',
}


@pytest.mark.parametrize("stop", sorted(SCRIPTS))
def test_the_step_a_run_stopped_in_shows_how_it_stopped(tmp_path: Path, stop: str) -> None:
    (tmp_path / "wf.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (tmp_path / "script.yaml").write_text(SCRIPTS[stop], encoding="utf-8")
    progress = tmp_path / "run" / "progress.md"
    request = StartRequest(
        tmp_path / "wf.prompt.md", progress=progress, recording=tmp_path / "script.yaml"
    )
    options = RunOptions(workspace=tmp_path, limits=Limits(max_turns=1))
    assert start_run(request, options).run.status == stop
    run, _ = load_progress(progress)
    assert (run.status, run.steps["write"].status) == (stop, "running")  # the file's record

    steps = {s["step"]: s for s in run_json(progress)["steps"]}
    assert (steps["write"]["status"], steps["write"]["recorded_status"]) == (stop, "running")
    assert steps["report"]["status"] == "pending"

    summary = pr_summary(progress)
    [row] = [line for line in summary.splitlines() if line.startswith("| 1 | write |")]
    assert f" {stop} |" in row and "running" not in row

    from io import StringIO

    from rich.console import Console

    console = Console(file=StringIO(), width=160, color_system=None)
    console.print(terminal_report(progress))
    table = console.file.getvalue().split("Conversation")[0]  # type: ignore[attr-defined]
    assert "running" not in table and stop in table
