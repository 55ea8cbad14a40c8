"""flow's own files stay out of git: the process that creates ``.flow/`` writes
``.flow/.gitignore`` (``*``), so after ``flow run`` in a real repository ``git status`` shows
nothing from ``.flow/``, nor does the ``get_changed_files`` tool the model calls during the run.
An existing ``.flow/`` (or its ``.gitignore``) is never changed, and ``flow share`` warns when
its copy would be ignored."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from promptflow_resume.flowfolder import GITIGNORE_TEXT
from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

WORKFLOW = """\
---
description: Write a note and look at the changes
provider: scripted
tools: [edit/createFile, changes]
---
Write note.txt, then list the changes.
"""

SCRIPT = """\
replies:
  - content: "Writing the note."
    tool_calls:
      - {name: create_file, arguments: {path: note.txt, content: "hello\\n"}}
  - content: "Looking at the changes."
    tool_calls:
      - {name: get_changed_files, arguments: {}}
  - content: "Done: note.txt is new."
"""


def _git(where: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=where,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def _repo(where: Path) -> Path:
    where.mkdir()
    _git(where, "init", "-q")
    (where / "notes.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (where / "notes.script.yaml").write_text(SCRIPT, encoding="utf-8")
    _git(where, "add", ".")
    _git(where, "commit", "-qm", "workflow")
    return where


def _run(where: Path) -> Path:
    result = flow("run", "notes.prompt.md", "--recording", "notes.script.yaml", cwd=where)
    assert result.returncode == 0, result.stderr
    [progress] = (where / ".flow" / "runs").glob("*/progress.md")
    return progress


def test_after_flow_run_git_sees_nothing_of_flow(tmp_path: Path) -> None:
    where = _repo(tmp_path / "repo")
    progress = _run(where)
    assert (where / ".flow" / ".gitignore").read_text(encoding="utf-8") == GITIGNORE_TEXT
    assert GITIGNORE_TEXT.splitlines()[-1] == "*"
    # Only the model's own change is left for git to show.
    assert _git(where, "status", "--porcelain", "--untracked-files=all") == "?? note.txt\n"
    # The changes tool, called while the run's files were being written, showed the same.
    run, _ = load_progress(progress)
    [changes] = [
        e for e in run.transcript if e.role == "tool_result" and e.tool == "get_changed_files"
    ]
    assert "note.txt" in changes.content
    assert ".flow" not in changes.content


def test_an_existing_flow_folder_and_gitignore_are_left_alone(tmp_path: Path) -> None:
    where = _repo(tmp_path / "mine")
    (where / ".flow").mkdir()
    (where / ".flow" / ".gitignore").write_text("*.lock\n", encoding="utf-8")
    _run(where)
    assert (where / ".flow" / ".gitignore").read_text(encoding="utf-8") == "*.lock\n"

    # A .flow/ made by a person, without a .gitignore (runs committed on purpose), stays so.
    other = _repo(tmp_path / "shared")
    (other / ".flow").mkdir()
    _run(other)
    assert not (other / ".flow" / ".gitignore").exists()
    assert any(
        line.startswith("?? .flow/") for line in _git(other, "status", "--porcelain").splitlines()
    )


def test_share_into_flow_folder_warns_and_share_elsewhere_does_not(tmp_path: Path) -> None:
    where = _repo(tmp_path / "repo")
    progress = _run(where)
    inside = flow("share", str(progress), "-o", ".flow/shared/run.md", cwd=where)
    assert inside.returncode == 0, inside.stderr
    assert (where / ".flow" / "shared" / "run.md").exists()
    assert (
        "warning: .flow/shared/run.md is under a .flow/ folder whose .gitignore (written by "
        "flow) ignores everything: `git add` skips it. Commit it with `git add -f`, or share "
        "it outside .flow/ (the default is ./<run-id>.md)."
    ) in inside.stderr
    _git(where, "add", "-f", ".flow/shared/run.md")  # what the warning says works
    assert "A  .flow/shared/run.md" in _git(where, "status", "--porcelain")

    outside = flow("share", str(progress), "-o", "docs/runs/run.md", cwd=where)
    assert outside.returncode == 0, outside.stderr
    assert "warning" not in outside.stderr
    assert "?? docs/" in _git(where, "status", "--porcelain")
