"""The whole prompt as its author meant it: one prompt when asked, shared sections, editor
variables, custom instructions, ask mode and model display names."""

from __future__ import annotations

import shutil
from pathlib import Path

from promptflow_resume.progress import load_progress
from tests.flowproc import flow, flow_env

COPILOT = Path(__file__).parent / "fixtures" / "copilot"


def _copy(where: Path, *names: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for name in names:
        shutil.copy(COPILOT / name, where / name)
    return where


def test_single_prompt_runs_the_file_as_one_step_and_resumes_so(tmp_path: Path) -> None:
    where = _copy(tmp_path / "p", "two-steps.prompt.md", "two-steps.script.yaml")
    args = ("run", "two-steps.prompt.md", "--recording", "two-steps.script.yaml")
    more = ("--progress", "run/progress.md", "--new", "--single-prompt")
    killed = flow(*args, *more, cwd=where, env=flow_env(FLOW_CRASH_AT="engine.model_replied"))
    assert killed.returncode == -9, killed.stderr
    resumed = flow("resume", "run/progress.md", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    assert list(run.steps) == ["main"] and run.status == "completed"
    prompt = next(e for e in run.transcript if e.role == "user")
    assert "## Step 1: Plan" in prompt.content and "## Step 2: Do" in prompt.content
    answers = [e.content for e in run.transcript if e.role == "assistant"]
    assert answers == ["Planned and done in one answer."]
