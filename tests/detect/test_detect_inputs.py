"""Inputs given to ``flow run`` are never dropped by resuming a similar run with other inputs."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from promptflow_resume.detect import Candidate, Detection, choose
from promptflow_resume.detect.core import input_changes
from promptflow_resume.progress import load_progress
from tests.support.detect import NOW, iso
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
Polish the story.
"""


def _candidate(run_id: str, changes: tuple[tuple[str, object, object], ...] = ()) -> Candidate:
    return Candidate(
        path=Path(f"/runs/{run_id}/progress.md"),
        run_id=run_id,
        status="interrupted",
        reason="Ctrl-C",
        steps_done=1,
        steps_total=2,
        cost_usd=0.01,
        updated=iso(NOW - timedelta(hours=1)),
        description="Write a short story about an insect",
        score=0.9,
        matched=("insect", "story"),
        exact=False,
        input_changes=changes,
        written_here=True,  # runs this machine's flow wrote (--yes takes no other)
    )


BEES = _candidate("run-bees", (("topic", "bees", "ants"),))


class Console:
    """Scripted answers in, printed lines out."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []
        self.lines: list[str] = []

    def read(self, prompt: str) -> str:
        self.asked.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)

    def write(self, text: str) -> None:
        self.lines.append(text)


def test_input_changes_name_each_differing_input() -> None:
    assert input_changes({"topic": "bees", "n": 3}, {"topic": "ants", "n": 3}) == (
        ("topic", "bees", "ants"),
    )
    assert input_changes({"a": 1}, {"b": 1}) == (("a", 1, None), ("b", None, 1))
    assert input_changes({"a": [1, 2]}, {"a": [1, 2]}) == ()


def test_the_prompt_shows_the_differences_and_defaults_to_a_new_run() -> None:
    console = Console("")  # Enter
    chosen = choose(
        Detection(candidates=(BEES,)),
        interactive=True,
        assume_yes=False,
        read=console.read,
        write=console.write,
        now=NOW,
    )
    assert chosen is None
    assert console.asked == ["Resume it with its own inputs? [y/N] "]
    assert "  inputs differ: topic: bees (that run) -> ants (given)" in console.lines


def test_a_person_can_still_resume_a_run_with_other_inputs_by_saying_yes() -> None:
    console = Console("y")
    chosen = choose(
        Detection(candidates=(BEES,)),
        interactive=True,
        assume_yes=False,
        read=console.read,
        write=console.write,
    )
    assert chosen is BEES


def test_several_matches_default_to_a_new_run_when_the_best_has_other_inputs() -> None:
    other = _candidate("run-other", (("topic", "wasps", "ants"),))
    console = Console("")
    chosen = choose(
        Detection(candidates=(BEES, other)),
        interactive=True,
        assume_yes=False,
        read=console.read,
        write=console.write,
    )
    assert chosen is None
    assert console.asked == ["Resume which? [1/2/N — start fresh with the given inputs] "]
    assert any("topic: wasps (that run) -> ants (given)" in line for line in console.lines)


@pytest.mark.parametrize("interactive", [True, False])
def test_yes_never_picks_a_match_whose_inputs_differ(interactive: bool) -> None:
    console = Console()
    chosen = choose(
        Detection(candidates=(BEES,)),
        interactive=interactive,
        assume_yes=True,
        read=console.read,
        write=console.write,
    )
    assert chosen is None and console.asked == []
    assert console.lines[0].startswith("Starting a new run: the similar run run-bees has other")
    assert "flow resume /runs/run-bees/progress.md" in console.lines[-1]


def test_yes_picks_the_best_match_with_the_same_inputs() -> None:
    same = replace(_candidate("run-same"), score=0.5)
    chosen = choose(
        Detection(candidates=(BEES, same)), interactive=False, assume_yes=True, write=print
    )
    assert chosen is same


@pytest.mark.e2e
def test_flow_run_with_new_inputs_and_yes_starts_a_new_run(workdir: Path) -> None:
    story = workdir / "story.prompt.md"
    story.write_text(STORY, encoding="utf-8")
    bees = flow(
        "run", str(story), "-i", "topic=bees", "-p", "echo", "--max-turns", "1", cwd=workdir
    )
    assert bees.returncode == 1, bees.stderr  # stopped by the turn budget, resumable

    ants = flow("run", str(story), "-i", "topic=ants", "-p", "echo", "--yes", cwd=workdir)
    assert ants.returncode == 0, ants.stderr
    assert "has other inputs" in ants.stderr
    assert "topic: bees (that run) -> ants (given)" in ants.stderr
    runs = sorted((workdir / ".flow" / "runs").glob("*/progress.md"))
    assert len(runs) == 2
    loaded = {load_progress(p)[0].inputs["topic"]: load_progress(p)[0] for p in runs}
    assert loaded["ants"].status == "completed"
    assert "ants" in loaded["ants"].transcript[1].content
    assert loaded["bees"].status == "budget_exhausted"  # untouched

    # The same inputs again: the identical run still resumes by itself (and stops again at
    # its recorded turn budget).
    again = flow("run", str(story), "-i", "topic=bees", "-p", "echo", "--yes", cwd=workdir)
    assert "resuming identical incomplete run" in again.stderr, again.stderr
    listed = json.loads(flow("list", "--all", "--json", cwd=workdir).stdout)
    assert len(listed) == 2
