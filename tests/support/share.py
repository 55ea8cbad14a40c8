"""Helpers for the share, fork, rewind, log and clean tests: a small project and real runs.

The project holds a three-step workflow whose command tools really run in the working
directory (``bump`` is not idempotent and appends to ``counter.txt``; ``listing`` prints more
than its ``max_output``, so its full output goes to a sidecar file) and a script for the
``scripted`` provider, so every run here is a real run of the engine.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from promptflow_resume.api import (
    GivenInputs,
    Limits,
    RunOptions,
    StartRequest,
    resume_run,
    start_run,
)
from promptflow_resume.progress.model import Run

WORKFLOW = """\
---
description: Bump the release counter, draft notes and report on it
provider: scripted
commands:
  bump:
    description: Append one line to the release counter and print the count
    argv: ["sh", "-c", "echo bumped >> counter.txt && wc -l < counter.txt"]
    idempotent: false
  peek:
    description: Print the release counter
    argv: ["cat", "counter.txt"]
    idempotent: true
  listing:
    description: Print a long listing and the release notes file
    argv: ["sh", "-c", "seq 1 400; cat notes.txt"]
    idempotent: true
    max_output: 600
tools: [bump, peek, listing]
---
You are a careful release assistant.

## Step 1: Inspect
Bump the counter, then look at it and at the listing.

## Step 2: Draft
Draft release notes for ${input:audience:the team}.

## Step 3: Report
Write the final report.
"""

SCRIPT = """\
replies:
  - content: "I will bump the counter first."
    tool_calls:
      - {name: bump, arguments: {}}
    usage: {input_tokens: 100, output_tokens: 10}
  - content: "Now the counter and the listing."
    tool_calls:
      - {name: peek, arguments: {}}
      - {name: listing, arguments: {}}
    usage: {input_tokens: 150, output_tokens: 12}
  - content: "The counter holds one line."
    usage: {input_tokens: 200, output_tokens: 8}
  - content: "Draft: the counter was bumped once."
    usage: {input_tokens: 250, output_tokens: 9}
  - content: "Report: the release counter stands at 1."
    usage: {input_tokens: 300, output_tokens: 11}
"""

STEPS = ("inspect", "draft", "report")


def make_project(root: Path, *, notes: str = "release notes: nothing secret\n") -> Path:
    """Write the workflow, its script and the files its tools read into ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "release.prompt.md").write_text(WORKFLOW, encoding="utf-8")
    (root / "release.script.yaml").write_text(SCRIPT, encoding="utf-8")
    (root / "notes.txt").write_text(notes, encoding="utf-8")
    return root


def start(
    project: Path,
    *,
    max_turns: int | None = None,
    progress: Path | None = None,
    inputs: dict[str, str] | None = None,
) -> tuple[Run, Path]:
    """Run the workflow in ``project`` (the working directory) until it completes or stops."""
    outcome = start_run(
        StartRequest(
            project / "release.prompt.md",
            GivenInputs(inputs or {}),
            recording=project / "release.script.yaml",
            progress=progress or project / ".flow" / "runs" / "r1" / "progress.md",
        ),
        RunOptions(limits=Limits(max_turns=max_turns), workspace=project),
    )
    return outcome.run, outcome.path


def resume(path: Path, workspace: Path, *, max_turns: int | None = 50) -> Run:
    """Resume the run at ``path`` with its tools working in ``workspace``."""
    return resume_run(path, RunOptions(limits=Limits(max_turns=max_turns), workspace=workspace)).run


def conversation(run: Run) -> list[tuple[str, str | None, str]]:
    """The transcript as (role, step, content) without flow's own notes."""
    return [(e.role, e.step, e.content) for e in run.transcript if e.role != "note"]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes), to prove nothing changed."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def clone(project: Path, target: Path) -> Path:
    """A copy of ``project`` as a fresh clone would have it: no .flow folder, no locks."""
    shutil.copytree(
        project, target, ignore=shutil.ignore_patterns(".flow", "*.lock", "*.owner", ".git")
    )
    return target
