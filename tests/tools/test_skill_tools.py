"""``load_skill`` and the read tools' reach into skill folders: a skill outside the workspace
(the user's skills folder) is readable, nothing else outside is (docs/spec.md 1.10)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from promptflow_resume.tools import TOOLS, ToolContext, call_tool
from promptflow_resume.tools.tool import Tool
from promptflow_resume.workflow.skillset import find_skills

SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "skills"


@pytest.fixture
def setup(tmp_path: Path) -> tuple[ToolContext, dict[str, Tool], Path]:
    """A workspace, and a user skills folder beside it holding one real skill, one skill the
    model may not load, and a file that belongs to no skill."""
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("print('a')\n")
    home = tmp_path / "home"
    user = home / ".copilot" / "skills"
    shutil.copytree(SKILLS / "async-profiler", user / "async-profiler")
    hidden = user / "hidden"
    hidden.mkdir()
    (hidden / "SKILL.md").write_text(
        "---\nname: hidden\ndescription: d\ndisable-model-invocation: true\n---\nSecret body.\n"
    )
    (hidden / "notes.txt").write_text("hidden notes\n")
    (user / "stray.txt").write_text("not in any skill\n")
    (home / "private.txt").write_text("private\n")
    found = find_skills(work, home=home)
    ctx = ToolContext(work, skills=found.skills)
    names = ("load_skill", "read_file", "list_files", "search_files")
    tools = {n: TOOLS.load(n)(None, work) for n in names}  # type: ignore[arg-type]
    return ctx, tools, user


def test_load_skill_returns_the_body_the_hash_and_the_files(
    setup: tuple[ToolContext, dict[str, Tool], Path],
) -> None:
    ctx, tools, user = setup
    result = call_tool(tools, "load_skill", {"name": "async-profiler"}, ctx)
    assert not result.is_error
    (skill,) = [s for s in ctx.skills if s.name == "async-profiler"]
    folder = (user / "async-profiler").resolve().as_posix()
    first, blank, heading = result.content.splitlines()[:3]
    assert first == f"Skill `async-profiler` (sha256:{skill.digest}) from `{folder}/SKILL.md`"
    assert (blank, heading) == ("", "# async-profiler")
    assert result.content.endswith(
        f"Files in the skill's folder `{folder}` (relative to it; read one with read_file at "
        f"`{folder}/<file>`, run a script with run_in_terminal):\n"
        "- scripts/analyze_collapsed.py"
    )
    assert tools["load_skill"].idempotent


def test_load_skill_reads_the_skill_afresh(
    setup: tuple[ToolContext, dict[str, Tool], Path],
) -> None:
    ctx, tools, user = setup
    skill_md = user / "async-profiler" / "SKILL.md"
    skill_md.write_text(skill_md.read_text().replace("# async-profiler\n", "# Profiling\n", 1))
    result = call_tool(tools, "load_skill", {"name": "async-profiler"}, ctx)
    (listed,) = [s for s in ctx.skills if s.name == "async-profiler"]
    assert "\n\n# Profiling\n" in result.content
    assert f"(sha256:{listed.digest})" not in result.content.splitlines()[0]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"name": "nope"}, "there is no skill named `nope`; the skills here are: `async-profiler`"),
        ({"name": "hidden"}, "there is no skill named `hidden`"),
        ({}, "invalid arguments"),
    ],
)
def test_load_skill_errors_are_results(
    setup: tuple[ToolContext, dict[str, Tool], Path], arguments: dict[str, str], message: str
) -> None:
    ctx, tools, _ = setup
    result = call_tool(tools, "load_skill", arguments, ctx)
    assert result.is_error and message in result.content


def test_a_skill_broken_since_it_was_found_cannot_be_loaded(
    setup: tuple[ToolContext, dict[str, Tool], Path],
) -> None:
    ctx, tools, user = setup
    (user / "async-profiler" / "SKILL.md").write_text("---\nname: Async\n---\n")
    result = call_tool(tools, "load_skill", {"name": "async-profiler"}, ctx)
    assert result.is_error and "cannot be loaded now" in result.content


def test_the_read_tools_reach_a_skills_folder_outside_the_workspace(
    setup: tuple[ToolContext, dict[str, Tool], Path],
) -> None:
    ctx, tools, user = setup
    script = (user / "async-profiler" / "scripts" / "analyze_collapsed.py").as_posix()
    read = call_tool(tools, "read_file", {"path": script, "limit": 1}, ctx)
    assert not read.is_error and read.content.startswith("#!/usr/bin/env python3\n")
    listed = call_tool(tools, "list_files", {"path": f"{user}/async-profiler"}, ctx)
    assert listed.content.splitlines() == ["SKILL.md", "scripts/"]
    found = call_tool(
        tools, "search_files", {"pattern": "def parse_collapsed", "path": script}, ctx
    )
    assert not found.is_error and "def parse_collapsed" in found.content
    # A relative path that climbs out of the workspace into the skill works the same way.
    climb = call_tool(
        tools, "read_file", {"path": "../home/.copilot/skills/async-profiler/SKILL.md"}, ctx
    )
    assert not climb.is_error and climb.content.startswith("---\nname: async-profiler\n")


@pytest.mark.parametrize(
    "target",
    [
        "home/private.txt",  # outside every skill
        "home/.copilot/skills/stray.txt",  # in the skills folder, in no skill
        "home/.copilot/skills/hidden/notes.txt",  # a skill the model may not load
        "home/.copilot/skills/async-profiler/../hidden/notes.txt",  # out of the skill by ..
        "home/.copilot/skills/async-profiler/link.txt",  # out of the skill by a link
    ],
)
def test_nothing_else_outside_the_workspace_is_readable(
    setup: tuple[ToolContext, dict[str, Tool], Path], target: str
) -> None:
    ctx, tools, user = setup
    (user / "async-profiler" / "link.txt").symlink_to(user.parent.parent / "private.txt")
    path = f"{ctx.workspace.parent}/{target}"
    for name, arguments in (
        ("read_file", {"path": path}),
        ("list_files", {"path": path}),
        ("search_files", {"pattern": "e", "path": path}),
    ):
        result = call_tool(tools, name, arguments, ctx)
        assert result.is_error, (name, result.content)
        assert "outside the workspace" in result.content
        assert "private" not in result.content.replace("private.txt", "")


def test_without_skills_the_workspace_boundary_is_unchanged(
    setup: tuple[ToolContext, dict[str, Tool], Path],
) -> None:
    ctx, tools, user = setup
    script = (user / "async-profiler" / "SKILL.md").as_posix()
    result = call_tool(tools, "read_file", {"path": script}, replace(ctx, skills=()))
    assert result.is_error and "outside the workspace" in result.content
    # Files inside the workspace read as before, skills or not.
    inside = call_tool(tools, "read_file", {"path": "src/a.py"}, ctx)
    assert inside.content == "print('a')\n"
