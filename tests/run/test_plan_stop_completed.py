"""``flow status`` says what ``flow resume`` will do from one value, the plan's ``stop``: a
completed run whose workflow gained a step is resumable (resume runs the new step), and its
status says so instead of "nothing to do"."""

from __future__ import annotations

import json
from pathlib import Path

from promptflow_resume.api import RunOptions, run_status
from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow

WORKFLOW = """---
description: Say hello, then more
---
## Step 1: Hello
Say hello.
"""
ADDED = "\n## Step 2: More\nSay more.\n"


def test_a_completed_run_whose_workflow_gained_a_step_can_resume(tmp_path: Path) -> None:
    (tmp_path / "wf.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    ran = flow("run", "wf.prompt.md", "-p", "echo", "--progress", "run/progress.md", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    done = json.loads(flow("status", "run/progress.md", "--json", cwd=tmp_path).stdout)
    assert (done["stop"], done["can_resume"]) == ("completed", False)

    with open(tmp_path / "wf.prompt.md", "a", encoding="utf-8") as handle:
        handle.write(ADDED)
    status = flow("status", "run/progress.md", "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert (data["stop"], data["can_resume"], data["blocked"]) == (None, True, None)
    assert data["resume_from"] == "more"
    report = run_status(tmp_path / "run" / "progress.md", RunOptions(workspace=tmp_path))
    assert report.plan is not None and report.stop is report.plan.stop is None

    resumed = flow("resume", "run/progress.md", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(tmp_path / "run" / "progress.md")
    assert run.status == "completed" and run.steps["more"].status == "completed"
