"""The whole prompt as its author meant it: one prompt when asked, shared sections, editor
variables, custom instructions, ask mode and model display names."""

from __future__ import annotations

import shutil
from pathlib import Path

from promptflow_resume.progress import load_progress
from promptflow_resume.workflow import load_workflow, parse_workflow
from promptflow_resume.workflow.instructions import recorded_instructions
from tests import support
from tests.support.flowproc import flow, flow_env

COPILOT = support.FIXTURES / "copilot"


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


def _explain(where: Path, *extra: str) -> tuple[int, str, Path]:
    _copy(where, "explain-selection.prompt.md", "explain-selection.script.yaml")
    (where / "code.py").write_text("def add(a, b):\n    return a + b\n")
    args = ("run", "explain-selection.prompt.md", "--recording", "explain-selection.script.yaml")
    result = flow(*args, "--progress", "run/progress.md", "--new", *extra, cwd=where)
    return result.returncode, result.stderr, where / "run" / "progress.md"


def test_selection_and_file_come_from_the_command_line(tmp_path: Path) -> None:
    code, err, progress = _explain(tmp_path / "p", "--selection", "@code.py", "--file", "code.py")
    assert code == 0, err
    run, _ = load_progress(progress)
    prompt = next(e for e in run.transcript if e.role == "user").content
    # ${input:Audience|a new contributor} is not a valid input: sent as written, not refused.
    assert prompt.startswith(
        "Explain this code from code.py to ${input:Audience|a new contributor}:"
    )
    assert prompt.endswith("def add(a, b):\n    return a + b\n")
    code, err, _ = _explain(tmp_path / "q", "--selection", "x = 1")
    assert code == 9 and "${fileBasename} (pass --file PATH)" in err
    code, err, _ = _explain(tmp_path / "r", "--selection", "@missing.py", "--file", "code.py")
    assert code == 9 and "--selection @missing.py: cannot read missing.py" in err
    assert "Traceback" not in err


def test_ask_mode_offers_no_edits_and_display_names_become_model_ids() -> None:
    wf = load_workflow(COPILOT / "explain-selection.prompt.md")
    # tools: ['codebase', 'editFiles', 'runCommands'] in `mode: ask`: reading only.
    assert wf.tools == ("codebase_search", "search_files", "list_files", "read_file")
    assert wf.model == "gpt-4.1" and wf.provider == "scripted"  # the file's provider wins
    agent = parse_workflow(
        "---\nmodel: Claude Sonnet 4 (copilot)\ntools: [editFiles]\n---\nDo it.\n", path="a.md"
    )
    assert (agent.provider, agent.model) == ("anthropic", "claude-sonnet-4-0")
    assert "replace_string_in_file" in agent.tools
    codex = parse_workflow("---\nmodel: GPT-5.1-Codex (Preview) (copilot)\n---\nGo.\n", path="c.md")
    assert (codex.provider, codex.model) == ("openai", "gpt-5.1-codex")
    plain = parse_workflow("---\nmodel: my-local-model\n---\nDo it.\n", path="b.md")
    assert (plain.provider, plain.model) == (None, "my-local-model")


def _with_instructions(where: Path) -> Path:
    _copy(where, "two-steps.prompt.md", "two-steps.script.yaml")
    (where / ".github" / "instructions").mkdir(parents=True)
    (where / ".github" / "copilot-instructions.md").write_text("Use British spelling.\n")
    folder = where / ".github" / "instructions"
    (folder / "all.instructions.md").write_text("---\napplyTo: '**'\n---\nBe brief.\n")
    (folder / "py.instructions.md").write_text("---\napplyTo: '**/*.py'\n---\nType hints.\n")
    (folder / "ts.instructions.md").write_text("---\napplyTo: 'src/**/*.ts'\n---\nNo any.\n")
    (where / "AGENTS.md").write_text("Run the tests before you finish.\n")
    (where / "app.py").write_text("x = 1\n")
    return where


def test_custom_instructions_are_included_recorded_and_a_change_is_reported(
    tmp_path: Path,
) -> None:
    where = _with_instructions(tmp_path / "p")
    args = ("run", "two-steps.prompt.md", "--recording", "two-steps.script.yaml")
    more = ("--progress", "run/progress.md", "--new", "--file", "app.py")
    crash = flow_env(FLOW_CRASH_AT="engine.model_replied")
    assert flow(*args, *more, cwd=where, env=crash).returncode == -9
    run, _ = load_progress(where / "run" / "progress.md")
    system = run.transcript[0]
    assert system.role == "system" and system.content.startswith("Read the request below.")
    used = recorded_instructions(system.content)
    assert list(used) == [
        ".github/copilot-instructions.md",
        ".github/instructions/all.instructions.md",
        ".github/instructions/py.instructions.md",  # applies to --file app.py
        "AGENTS.md",
    ]
    assert "Be brief." in system.content and "No any." not in system.content
    (where / "AGENTS.md").write_text("Never run the tests.\n")
    resumed = flow("resume", "run/progress.md", "--file", "app.py", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert "custom instructions changed since the run started: AGENTS.md (changed)" in (
        resumed.stderr
    )
    run, _ = load_progress(where / "run" / "progress.md")
    assert "Run the tests before you finish." in run.transcript[0].content  # as recorded


def test_no_instructions_leaves_them_out(tmp_path: Path) -> None:
    where = _with_instructions(tmp_path / "p")
    args = ("run", "two-steps.prompt.md", "--recording", "two-steps.script.yaml")
    more = ("--progress", "run/progress.md", "--new", "--no-instructions", "--single-prompt")
    assert flow(*args, *more, cwd=where).returncode == 0
    run, _ = load_progress(where / "run" / "progress.md")
    assert all("Custom instructions" not in e.content for e in run.transcript)
