"""An input edited by hand in progress.md: named by status and log, used by unanswered prompts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptflow_resume.progress import load_progress
from tests.support.flowproc import flow

STORY = """\
---
description: Write a short story about an insect
inputs:
  topic:
    type: string
---
You are a storyteller.

## Step 1: Draft
Draft a story about ${input:topic}.

## Step 2: Polish
Polish the story about ${input:topic}.

## Step 3: Title
Give the story about ${input:topic} a title.
"""


def _stopped_in_step_2(workdir: Path) -> Path:
    """A run of STORY with topic=bees stopped after step 2's prompt was sent, unanswered."""
    story = workdir / "story.prompt.md"
    story.write_text(STORY, encoding="utf-8")
    progress = workdir / "run" / "progress.md"
    first = flow(
        "run", str(story), "-i", "topic=bees", "-p", "echo", "--max-turns", "1",
        "--progress", str(progress), cwd=workdir,
    )  # fmt: skip
    assert first.returncode == 1, first.stderr
    run, _ = load_progress(progress)
    assert run.transcript[-1].role == "user" and run.transcript[-1].step == "polish"
    return progress


def _edit_topic(progress: Path, old: str, new: str) -> None:
    text = progress.read_text(encoding="utf-8")
    assert f"  topic: {old}\n" in text
    progress.write_text(text.replace(f"  topic: {old}\n", f"  topic: {new}\n", 1), "utf-8")


@pytest.mark.e2e
def test_status_and_log_name_an_input_edited_by_hand(workdir: Path) -> None:
    progress = _stopped_in_step_2(workdir)
    assert load_progress(progress)[1].edited_inputs == []
    _edit_topic(progress, "bees", "wasps")
    assert load_progress(progress)[1].edited_inputs == ["topic: bees -> wasps"]

    status = flow("status", str(progress), cwd=workdir)
    assert status.returncode == 0, status.stderr
    assert "input edited by hand: topic: bees -> wasps" in status.stdout
    as_json = json.loads(flow("status", str(progress), "--json", cwd=workdir).stdout)
    assert as_json["edited_inputs"] == ["topic: bees -> wasps"]
    log = flow("log", str(progress), cwd=workdir)
    assert "input edited by hand since the last attempt" in log.stdout
    assert "topic: bees -> wasps" in log.stdout


@pytest.mark.e2e
def test_an_edited_input_applies_to_every_prompt_not_answered_yet(workdir: Path) -> None:
    progress = _stopped_in_step_2(workdir)
    _edit_topic(progress, "bees", "wasps")
    resumed = flow("resume", str(progress), "-p", "echo", "--max-turns", "10", cwd=workdir)
    assert resumed.returncode == 0, resumed.stderr
    run, report = load_progress(progress)
    assert run.status == "completed" and report.edited_inputs == []
    prompts = {e.step: e.content for e in run.transcript if e.role == "user"}
    # Answered before the edit: kept as sent. Sent but unanswered, and not yet sent: new value.
    assert "bees" in prompts["draft"] and "wasps" not in prompts["draft"]
    assert "wasps" in prompts["polish"] and "bees" not in prompts["polish"]
    assert "wasps" in prompts["title"]
    notes = [note for attempt in run.attempts for note in attempt.notes]
    assert any("input edited by hand: topic: bees -> wasps" in n for n in notes)
    log = flow("log", str(progress), cwd=workdir)
    assert "edit: input edited by hand: topic: bees -> wasps" in log.stdout
