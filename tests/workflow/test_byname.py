"""``flow run NAME``: an agent or a skill found by name, as ``flow agents`` and ``flow skills``
list them (issue 43, item 2: "workflow file gem-planner does not exist")."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptflow_resume.base.errors import FileNotFoundFlowError
from promptflow_resume.progress import load_progress
from promptflow_resume.workflow.byname import target
from tests.support.flowproc import flow

PLANNER = "---\nname: gem-planner\ndescription: Plans\n---\nYou plan the work.\n"


def workspace(tmp_path: Path) -> Path:
    agents = tmp_path / ".github" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.agent.md").write_text(PLANNER, encoding="utf-8")
    skill = tmp_path / ".github" / "skills" / "pdf-tools"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: pdf-tools\ndescription: Fill PDF forms\n---\nUse pdftk.\n", encoding="utf-8"
    )
    (tmp_path / "notes.prompt.md").write_text("Summarise.\n", encoding="utf-8")
    return tmp_path


def test_names_resolve_as_the_lists_show_them(tmp_path: Path) -> None:
    where = workspace(tmp_path)
    agents = where / ".github" / "agents"
    # The agent's name: or its file name, without case; then a skill's name.
    assert target("gem-planner", where) == agents / "planner.agent.md"
    assert target("GEM-Planner", where) == agents / "planner.agent.md"
    assert target("planner", where) == agents / "planner.agent.md"
    assert target("pdf-tools", where) == (where / ".github/skills/pdf-tools/SKILL.md").resolve()
    # A path is a path, whether or not it exists (the loader says it does not).
    assert target(where / "notes.prompt.md", where) == where / "notes.prompt.md"
    assert target("missing.prompt.md", where) == Path("missing.prompt.md")
    own = tmp_path / "mine"
    own.mkdir()
    (own / "gem-planner.agent.md").write_text(PLANNER.replace("plan", "draft"), encoding="utf-8")
    assert target("gem-planner", where, agent_dirs=(own,)) == own / "gem-planner.agent.md"


def test_a_name_found_nowhere_names_the_folders_and_what_they_hold(tmp_path: Path) -> None:
    where = workspace(tmp_path)
    with pytest.raises(FileNotFoundFlowError) as missing:
        target("gem-implementer", where)
    message = missing.value.message
    assert message.startswith("`gem-implementer` is not a file, and no agent or skill has")
    assert "agents found: gem-planner" in message and "skills found: pdf-tools" in message
    assert missing.value.exit_code == 5


def test_flow_run_runs_an_agent_by_name(tmp_path: Path) -> None:
    where = workspace(tmp_path)
    done = flow(
        "run", "gem-planner", "--task", "Plan it.", "--provider", "echo", "--new",
        "--progress", "run/progress.md", cwd=where,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.workflow.path.endswith(".github/agents/planner.agent.md")
    assert run.transcript[0].content.startswith("You plan the work.")
