"""``flow diff``: what changed between two versions of a run (spec 11.2), and git's driver."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from promptflow_resume import Limits, RunOptions, resume_run, start_run
from promptflow_resume.api import StartRequest
from promptflow_resume.sharing.diff import diff_files, diff_revision, textconv_text
from tests.support.flowproc import REPO, flow, flow_env

WORKFLOW = """\
---
description: Greet, then sum up
provider: scripted
---
## Step 1: Greet
Say hello.

## Step 2: Sum up
Sum it up.
"""

SCRIPT = {"replies": ["Hello from the first step.", "All summed up."]}


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run stopped on its turn budget (old.md, as committed), then edited by hand and
    resumed to completion (progress.md), in a git repository."""
    folder = tmp_path_factory.mktemp("diff")
    (folder / "greet.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (folder / "script.json").write_text(json.dumps(SCRIPT), encoding="utf-8")
    progress = folder / "run" / "progress.md"
    request = StartRequest(
        folder / "greet.prompt.md", progress=progress, recording=folder / "script.json"
    )
    first = start_run(request, RunOptions(workspace=folder, limits=Limits(max_turns=1)))
    assert first.run.status == "budget_exhausted"
    shutil.copyfile(progress, folder / "old.md")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    subprocess.run([*git, "add", "."], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-qm", "stopped"], cwd=folder, check=True)
    text = progress.read_text(encoding="utf-8")
    assert text.count("Hello from the first step.") == 1
    progress.write_text(text.replace("Hello from the first step.", "Hello, edited."), "utf-8")
    shutil.copyfile(progress, folder / "edited.md")
    done = resume_run(progress, RunOptions(workspace=folder, limits=Limits(max_turns=5)))
    assert done.run.status == "completed", done.run.reason
    return folder / "old.md", progress


def test_a_resumed_run_names_the_appended_entries_and_the_hand_edit(
    versions: tuple[Path, Path],
) -> None:
    old, new = versions
    change = diff_files(old, new)
    data = change.to_dict()
    assert data["same_run"] and not data["empty"]
    assert data["old"]["entries"] == 3 and data["new"]["entries"] == 5
    edited = data["edited"]
    assert [e["id"] for e in edited] == [2]
    assert "-Hello from the first step.\n+Hello, edited.\n" in edited[0]["diff"]
    appended = [e["id"] for e in data["appended"]]
    assert appended == [4, 5]  # the note that the run was resumed, the reply
    assert {"field": "sum-up", "old": "running", "new": "completed"} in data["steps"]
    assert {"field": "status", "old": "budget_exhausted", "new": "completed"} in data["state"]
    assert {"field": "config.budget.max_turns", "old": 1, "new": 5} in data["settings"]
    assert data["usage"]["turns"] == 1 and data["usage"]["attempts"] == 1
    assert data["removed"] == []
    # The resume took the edit up: the newer file's digests match its text again.
    assert edited[0]["by_hand"] is False
    shown = change.to_markdown()
    assert "## Edited: entry 2 · assistant · greet" in shown
    assert "- sum-up: running → completed" in shown


def test_an_edit_not_yet_resumed_is_marked_by_hand(versions: tuple[Path, Path]) -> None:
    old, _ = versions
    change = diff_files(old, old.parent / "edited.md")
    assert [(e.id, e.by_hand) for e in change.edited] == [(2, True)]
    assert change.appended == [] and change.steps == [] and change.state == []
    assert "## Edited by hand: entry 2 · assistant · greet" in change.to_markdown()


def test_against_a_git_revision_and_the_cli(versions: tuple[Path, Path]) -> None:
    old, new = versions
    assert diff_revision(new, "HEAD").to_dict() == {
        **diff_files(old, new).to_dict(),
        "old": {**diff_files(old, new).old.to_dict(), "label": f"{new}@HEAD"},
    }
    done = flow("diff", "run/progress.md", "--rev", "HEAD", "--json", cwd=old.parent)
    assert done.returncode == 0, done.stderr
    assert [e["id"] for e in json.loads(done.stdout)["edited"]] == [2]
    missing = flow("diff", "run/progress.md", "--rev", "nope", cwd=old.parent)
    assert missing.returncode == 14 and "Traceback" not in missing.stderr
    assert "revision 'nope'" in missing.stderr
    option = flow("diff", "run/progress.md", "--rev", "--output=written.txt", cwd=old.parent)
    assert option.returncode == 9 and "is not a git revision" in option.stderr
    assert not (old.parent / "written.txt").exists()
    usage = flow("diff", "run/progress.md", cwd=old.parent)
    assert usage.returncode == 9 and "two progress files" in usage.stderr


def test_git_diff_through_the_textconv_driver_reads_as_the_change(
    versions: tuple[Path, Path],
) -> None:
    old, new = versions
    folder = old.parent
    (folder / ".gitattributes").write_text("**/progress.md diff=flow\n", encoding="utf-8")
    command = f"{sys.executable} -m promptflow_resume diff --textconv"
    subprocess.run(["git", "config", "diff.flow.textconv", command], cwd=folder, check=True)
    env = {**flow_env(), "PYTHONPATH": str(REPO)}
    shown = subprocess.run(
        ["git", "diff", "HEAD", "--", "run/progress.md"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    changed = [line for line in shown.splitlines() if line[:1] in "+-" and line[:3] not in "+++---"]
    assert any(line.startswith("-status: budget_exhausted (turn budget used") for line in changed)
    assert "+status: completed" in changed
    assert "+step sum-up: completed (1 turns, 0 tokens, 0.000000 USD)" in changed
    assert "-    Hello from the first step." in changed
    assert "+    Hello, edited." in changed
    assert "+entry 5 · assistant · sum-up" in changed
    # The view of one file is stable: the same file gives the same text.
    assert textconv_text(new) == textconv_text(new)


def test_textconv_of_a_file_that_does_not_parse_is_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "progress.md"
    broken.write_text("---\nnot: [a progress file\n", encoding="utf-8")
    assert textconv_text(broken) == "---\nnot: [a progress file\n"
    done = flow("diff", "--textconv", "progress.md", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "---\nnot: [a progress file\n"
    bad = flow("diff", "progress.md", "progress.md", cwd=tmp_path)
    assert bad.returncode == 4 and "Traceback" not in bad.stderr


def test_after_a_rewind_the_replaced_entries_are_removed_and_appended(tmp_path: Path) -> None:
    from promptflow_resume.sharing.rewind import rewind

    (tmp_path / "greet.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    script = {"replies": ["Hello from the first step.", "All summed up.", "Summed again."]}
    (tmp_path / "script.json").write_text(json.dumps(script), encoding="utf-8")
    progress = tmp_path / "run" / "progress.md"
    request = StartRequest(
        tmp_path / "greet.prompt.md", progress=progress, recording=tmp_path / "script.json"
    )
    assert start_run(request, RunOptions(workspace=tmp_path)).run.status == "completed"
    shutil.copyfile(progress, tmp_path / "old.md")
    rewind(progress, "sum-up")
    assert resume_run(progress, RunOptions(workspace=tmp_path)).run.status == "completed"
    # No lock file is left beside the run for `git add -A` to commit (nor by rewind).
    assert not (progress.parent / "progress.md.lock").exists()

    change = diff_files(tmp_path / "old.md", progress)
    assert change.edited == []  # nothing was edited: entries 3 and 4 were replaced
    assert [(e.id, e.role) for e in change.removed] == [(3, "user"), (4, "assistant")]
    assert [(e.id, e.role) for e in change.appended] == [(3, "user"), (4, "note"), (5, "assistant")]
    shown = change.to_markdown()
    assert "role=" not in shown and "## Edited" not in shown
    assert "- entry 4 · assistant · sum-up: All summed up." in shown.split("## Removed")[1]
