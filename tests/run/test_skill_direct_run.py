"""A user-invocable skill run directly (``flow run path/SKILL.md --task TEXT``, docs/spec.md
1.11), and a real agent (tests/fixtures/agents) that loads a real skill (tests/fixtures/skills)
and runs its script, as ``flow`` processes with the scripted provider."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from promptflow_resume.base.errors import EXIT_INVALID_FILE, EXIT_WORKFLOW_CHANGED
from promptflow_resume.progress import load_progress
from tests.support import FIXTURES
from tests.support.flowproc import flow

PROFILE = (
    "app/Main.main;app/Cache.lookup;java/util/HashMap.get 70\n"
    "app/Main.main;app/Render.draw 20\n"
    "app/Main.main 10\n"
)
SCRIPT = """\
replies:
  - tool_calls:
      - name: run_in_terminal
        arguments:
          command: >-
            python3 .github/skills/async-profiler/scripts/analyze_collapsed.py
            profile.collapsed --self-time --top 3
  - "java/util/HashMap.get has the most self-time."
"""
SKILL = Path(".github/skills/async-profiler/SKILL.md")


def project(where: Path, script: str = SCRIPT) -> Path:
    """A workspace with the real async-profiler skill, a profile and a model script."""
    skills = where / ".github" / "skills"
    skills.mkdir(parents=True)
    shutil.copytree(FIXTURES / "skills" / "async-profiler", skills / "async-profiler")
    (where / "profile.collapsed").write_text(PROFILE)
    (where / "script.yaml").write_text(script)
    return where


def run_args(progress: str = "run/progress.md") -> tuple[str, ...]:
    return ("--provider", "scripted", "--recording", "script.yaml", "--progress", progress, "--new")


def test_a_skill_runs_directly_with_its_body_as_instructions_and_the_task_as_message(
    tmp_path: Path,
) -> None:
    where = project(tmp_path)
    done = flow(
        "run",
        str(SKILL),
        "--task",
        "Which method is hottest in profile.collapsed?",
        *run_args(),
        "--allow-commands",
        "python3 *",
        cwd=where,
    )
    assert done.returncode == 0, done.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    system, user = run.transcript[0], run.transcript[1]
    assert system.role == "system" and system.content.startswith("# async-profiler")
    assert "This is the skill `async-profiler`." in system.content
    assert "- scripts/analyze_collapsed.py" in system.content
    assert (user.role, user.content) == ("user", "Which method is hottest in profile.collapsed?")
    output = next(e.content for e in run.transcript if e.role == "tool_result")
    assert re.search(r"java/util/HashMap\.get +70 +70\.0%", output)
    assert run.status == "completed"


def test_a_skill_not_meant_for_people_is_refused_with_its_field(tmp_path: Path) -> None:
    where = project(tmp_path)
    skill = where / SKILL
    skill.write_text(skill.read_text().replace("---\n", "---\nuser-invocable: false\n", 1))
    done = flow("run", str(SKILL), "--task", "profile it", *run_args(), cwd=where)
    assert done.returncode == EXIT_INVALID_FILE
    assert "says `user-invocable: false`" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (where / "run").exists()


def test_a_skill_without_a_task_and_no_terminal_says_how_to_give_one(tmp_path: Path) -> None:
    where = project(tmp_path)
    done = flow("run", str(SKILL), *run_args(), cwd=where)
    assert done.returncode == 9
    assert "--task TEXT" in done.stderr


def test_a_script_of_the_skill_changed_between_attempts_is_a_changed_step(tmp_path: Path) -> None:
    where = project(tmp_path)
    first = flow("run", str(SKILL), "--task", "profile", *run_args(), "--max-turns", "1", cwd=where)
    assert first.returncode == 1, first.stderr  # budget: the step started, not finished
    script = where / ".github/skills/async-profiler/scripts/analyze_collapsed.py"
    script.write_text(script.read_text() + "\n# tuned\n")
    again = flow("resume", "run/progress.md", "--max-turns", "5", cwd=where)
    assert again.returncode == EXIT_WORKFLOW_CHANGED, again.stderr
    assert "task" in again.stderr


def test_a_real_agent_loads_a_real_skill_and_runs_its_script_with_consent(tmp_path: Path) -> None:
    script = SCRIPT.replace(
        "replies:\n",
        "replies:\n  - tool_calls:\n      - name: load_skill\n"
        "        arguments: {name: async-profiler}\n",
    )
    where = project(tmp_path, script)
    agents = where / ".github" / "agents"
    agents.mkdir()
    shutil.copy(FIXTURES / "agents" / "debug.agent.md", agents)
    task = ("--task", "Why is the service slow? profile.collapsed is a CPU profile.")
    agent = ".github/agents/debug.agent.md"
    refused = flow("run", agent, *task, *run_args("no/progress.md"), cwd=where)
    allowed = flow("run", agent, *task, *run_args(), "--allow-commands", "python3 *", cwd=where)
    assert refused.returncode == 0 and allowed.returncode == 0, allowed.stderr
    without, _ = load_progress(where / "no" / "progress.md")
    run, _ = load_progress(where / "run" / "progress.md")
    assert run.transcript[0].content.startswith("# Debug Mode Instructions")
    results = [(e.tool, e.is_error, e.content) for e in run.transcript if e.role == "tool_result"]
    (load, _, loaded), (terminal, error, output) = results
    assert (load, terminal, error) == ("load_skill", "run_in_terminal", False)
    assert loaded.startswith("Skill `async-profiler` (sha256:")
    assert re.search(r"java/util/HashMap\.get +70 +70\.0%", output)
    denied = [e for e in without.transcript if e.role == "tool_result" and e.is_error]
    assert len(denied) == 1 and "the user did not allow it" in denied[0].content
