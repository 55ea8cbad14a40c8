"""Runs that load real skills (tests/fixtures/skills) and run their scripts, as ``flow``
processes with the scripted provider: the load is a recorded call with the skill's hash, and a
skill changed between attempts is reported on resume (docs/spec.md 1.10)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from promptflow_resume.progress import load_progress
from promptflow_resume.workflow.skillfile import load_skill
from tests.support.flowproc import flow, flow_env

SKILLS = Path(__file__).resolve().parents[1] / "fixtures" / "skills"

WORKFLOW = """\
---
description: Find the hottest method of a profile
provider: scripted
tools: ['run_in_terminal', 'read_file']
---
Which method has the most self-time in profile.collapsed?
"""

SCRIPT = """\
replies:
  - tool_calls:
      - name: load_skill
        arguments: {name: async-profiler}
  - tool_calls:
      - name: read_file
        arguments: {path: .github/skills/async-profiler/scripts/analyze_collapsed.py, limit: 3}
  - tool_calls:
      - name: run_in_terminal
        arguments:
          command: >-
            python3 .github/skills/async-profiler/scripts/analyze_collapsed.py
            profile.collapsed --self-time --top 3
  - "java/util/HashMap.get has the most self-time."
"""
PROFILE = (
    "app/Main.main;app/Cache.lookup;java/util/HashMap.get 70\n"
    "app/Main.main;app/Render.draw 20\n"
    "app/Main.main 10\n"
)
RUN = ("--recording", "hot.script.yaml", "--progress", "run/progress.md", "--new")


def project(where: Path, script: str = SCRIPT) -> Path:
    """A workspace with the async-profiler skill in .github/skills and a profile to read."""
    skills = where / ".github" / "skills"
    skills.mkdir(parents=True)
    shutil.copytree(SKILLS / "async-profiler", skills / "async-profiler")
    (where / "profile.collapsed").write_text(PROFILE)
    (where / "hot.prompt.md").write_text(WORKFLOW)
    (where / "hot.script.yaml").write_text(script)
    return where


def results(path: Path) -> list[tuple[str | None, str, bool]]:
    run, _ = load_progress(path)
    return [(e.tool, e.content, e.is_error) for e in run.transcript if e.role == "tool_result"]


def test_a_run_loads_a_skill_and_runs_its_python_script_with_consent(tmp_path: Path) -> None:
    where = project(tmp_path / "p")
    done = flow("run", "hot.prompt.md", *RUN, "--allow-commands", "python3 *", cwd=where)
    assert done.returncode == 0, done.stderr
    path = where / "run" / "progress.md"
    skill, _ = load_skill(where / ".github/skills/async-profiler/SKILL.md")
    assert skill is not None
    run, _ = load_progress(path)
    # The first entry lists the skill with its hash; the load is a recorded call with it.
    system = run.transcript[0]
    assert system.role == "system"
    assert f"- `async-profiler` (sha256:{skill.digest}): Install, run, and analyze" in (
        system.content
    )
    (load, loaded, load_error), (read, source, _), (terminal, output, error) = results(path)
    assert (load, read, terminal) == ("load_skill", "read_file", "run_in_terminal")
    assert not load_error and not error
    assert loaded.startswith(
        f"Skill `async-profiler` (sha256:{skill.digest}) from "
        "`.github/skills/async-profiler/SKILL.md`\n\n# async-profiler\n"
    )
    assert loaded.endswith("- scripts/analyze_collapsed.py")
    assert source.startswith("#!/usr/bin/env python3\n")
    assert output.startswith("exit code: 0\n")
    assert re.search(r"java/util/HashMap\.get +70 +70\.0%", output)
    # The call and its hash are in the file a person reads too.
    text = path.read_text()
    assert f"Skill `async-profiler` (sha256:{skill.digest})" in text


def test_without_consent_the_skills_script_is_refused_and_the_run_goes_on(tmp_path: Path) -> None:
    where = project(tmp_path / "p")
    broken = where / ".claude" / "skills" / "notes"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("---\nname: notes\n---\nTake notes.\n")
    done = flow("run", "hot.prompt.md", *RUN, cwd=where)
    assert done.returncode == 0, done.stderr
    # A broken skill is named once, with its first problem, and left out.
    assert " ".join(done.stderr.split()).count("skill skipped: ") == 1
    assert "error: $.description: a skill needs `description`" in done.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    assert "`notes`" not in run.transcript[0].content
    _, _, (_, output, error) = results(where / "run" / "progress.md")
    assert error and "the command was not run" in output


def test_no_skills_offers_neither_the_list_nor_the_tool(tmp_path: Path) -> None:
    where = project(tmp_path / "p")
    done = flow("run", "hot.prompt.md", *RUN, "--no-skills", cwd=where)
    assert done.returncode == 0, done.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    assert not any("## Skills" in e.content for e in run.transcript if e.role == "system")
    (tool, content, error), *_ = results(where / "run" / "progress.md")
    assert tool == "load_skill" and error
    assert "load_skill" in content and "not" in content


def test_a_user_skill_outside_the_workspace_runs_its_bash_script(tmp_path: Path) -> None:
    """The conventional-commits skill in ~/.copilot/skills: its files are read by absolute
    path although they lie outside the workspace, and its bash script runs on the repository."""
    home = Path.home()  # the test's own temporary home (tests/conftest.py)
    user_skills = home / ".copilot" / "skills"
    user_skills.mkdir(parents=True)
    shutil.copytree(
        SKILLS / "conventional-commits-enforcer", user_skills / "conventional-commits-enforcer"
    )
    folder = (user_skills / "conventional-commits-enforcer").as_posix()
    where = tmp_path / "repo"
    where.mkdir()
    git = ("git", "-c", "user.name=T", "-c", "user.email=t@example.com")
    subprocess.run(("git", "init", "-q"), cwd=where, check=True)
    for message in ("feat(parser): add strict mode", "fixed the crash."):
        (where / "log.txt").write_text(message)
        subprocess.run((*git, "add", "log.txt"), cwd=where, check=True)
        subprocess.run((*git, "commit", "-q", "-m", message), cwd=where, check=True)
    (where / "lint.prompt.md").write_text(
        "---\nprovider: scripted\ntools: ['run_in_terminal', 'read_file']\n---\n"
        "Check the commit messages of this repository.\n"
    )
    (where / "lint.script.yaml").write_text(
        "replies:\n"
        "  - tool_calls:\n"
        "      - name: load_skill\n"
        "        arguments: {name: conventional-commits-enforcer}\n"
        "  - tool_calls:\n"
        "      - name: read_file\n"
        f"        arguments: {{path: '{folder}/extract-commits.sh', limit: 2}}\n"
        "      - name: read_file\n"
        f"        arguments: {{path: '{home.as_posix()}/.gitconfig'}}\n"
        "  - tool_calls:\n"
        "      - name: run_in_terminal\n"
        f"        arguments: {{command: 'bash {folder}/extract-commits.sh'}}\n"
        "  - The second message is not a Conventional Commit.\n"
    )
    (home / ".gitconfig").write_text("[user]\n\tname = Private\n")
    done = flow(
        "run",
        "lint.prompt.md",
        "--recording",
        "lint.script.yaml",
        "--progress",
        "run/progress.md",
        "--new",
        # A wildcard never covers the program bash runs (spec 10.7): the exact command does.
        "--allow-commands",
        f"bash {folder}/extract-commits.sh",
        cwd=where,
    )
    assert done.returncode == 0, done.stderr
    found = results(where / "run" / "progress.md")
    (_, loaded, _), (_, script, script_error), (_, private, private_error), (_, out, error) = found
    assert loaded.startswith("Skill `conventional-commits-enforcer` (sha256:")
    assert loaded.splitlines()[0].endswith(f" from `{folder}/SKILL.md`")
    assert "- extract-commits.sh" in loaded
    assert not script_error and script.startswith("#!/usr/bin/env bash\n# extract-commits.sh")
    # Outside the workspace, only the skill's folder is readable.
    assert private_error and "outside the workspace" in private and "Private" not in private
    assert not error and "|||feat(parser): add strict mode|||" in out
    assert "|||fixed the crash.|||" in out


FAIL_ONCE = SCRIPT + "failures:\n  1: {transient: false, reason: auth, message: bad key}\n"
FAIL_ONCE += "state: hot.state.json\n"


def test_a_skill_changed_between_attempts_is_reported_on_resume(tmp_path: Path) -> None:
    where = project(tmp_path / "p", FAIL_ONCE)
    failed = flow("run", "hot.prompt.md", *RUN, "--allow-commands", "python3 *", cwd=where)
    assert failed.returncode == 10, failed.stderr  # the provider's error, after the load
    path = where / "run" / "progress.md"
    ((_, loaded, _),) = results(path)
    old = re.match(r"Skill `async-profiler` \(sha256:([0-9a-f]{16})\)", loaded)
    assert old is not None
    script = where / ".github/skills/async-profiler/scripts/analyze_collapsed.py"
    script.write_text(script.read_text().replace("Total samples", "All samples"))
    new, _ = load_skill(where / ".github/skills/async-profiler/SKILL.md")
    assert new is not None and new.digest != old.group(1)
    resumed = flow("resume", "run/progress.md", "--allow-commands", "python3 *", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    listed = (
        "skills changed since the run started: async-profiler (changed); the run goes on "
        "with the list recorded in its first entry"
    )
    loaded_note = (
        f"skill `async-profiler` loaded in entry 5 (sha256:{old.group(1)}) changed since "
        f"(now sha256:{new.digest}); the model keeps the recorded text until it loads the "
        "skill again"
    )
    flat = " ".join(resumed.stderr.split())
    assert listed in flat and loaded_note in flat
    run, _ = load_progress(path)
    assert listed in run.attempts[-1].notes and loaded_note in run.attempts[-1].notes
    # The recorded load is what it was: the old text is not silently replaced.
    assert results(path)[0][1] == loaded
    # The script that ran is the changed one.
    assert "All samples : 100" in results(path)[2][1]


def test_an_unchanged_skill_is_not_reported_on_resume(tmp_path: Path) -> None:
    where = project(tmp_path / "p", FAIL_ONCE)
    flow("run", "hot.prompt.md", *RUN, "--allow-commands", "python3 *", cwd=where)
    resumed = flow("resume", "run/progress.md", "--allow-commands", "python3 *", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    assert "skill" not in resumed.stderr.lower()


def test_a_sub_workflows_run_may_load_the_skills_too(tmp_path: Path) -> None:
    where = project(tmp_path / "p")
    (where / "parent.prompt.md").write_text(
        "---\nprovider: scripted\n---\n## Step 1: Profile {#profile}\n> workflow: child.prompt.md\n"
    )
    (where / "child.prompt.md").write_text(
        "---\nprovider: scripted\ntools: ['read_file']\n---\nLook at the profile.\n"
    )
    (where / "sub.script.yaml").write_text(
        "replies:\n  - tool_calls:\n      - name: load_skill\n"
        "        arguments: {name: async-profiler}\n  - done\n"
    )
    args = ("--recording", "sub.script.yaml", "--progress", "run/progress.md", "--new")
    done = flow("run", "parent.prompt.md", *args, cwd=where)
    assert done.returncode == 0, done.stderr
    child = where / "run" / "progress.steps" / "profile" / "progress.md"
    ((tool, loaded, error),) = results(child)
    assert tool == "load_skill" and not error
    assert loaded.startswith("Skill `async-profiler` (sha256:")


def test_a_load_in_flight_at_a_crash_runs_again_on_resume(tmp_path: Path) -> None:
    where = project(tmp_path / "p")
    crash = flow_env(FLOW_CRASH_AT="engine.tool_start_recorded")
    killed = flow("run", "hot.prompt.md", *RUN, cwd=where, env=crash)
    assert killed.returncode == -9, killed.stderr
    run, _ = load_progress(where / "run" / "progress.md")
    assert [(f.tool, f.idempotent) for f in run.in_flight] == [("load_skill", True)]
    resumed = flow("resume", "run/progress.md", "--allow-commands", "python3 *", cwd=where)
    assert resumed.returncode == 0, resumed.stderr
    tools = [tool for tool, _, _ in results(where / "run" / "progress.md")]
    assert tools == ["load_skill", "read_file", "run_in_terminal"]
