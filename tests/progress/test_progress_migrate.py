"""Version 1 progress files: read through the upgrade, saved in the current format."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from promptflow_resume.progress import FORMAT_VERSION, load_progress, parse, render
from promptflow_resume.progress.journal import journal_path
from promptflow_resume.progress.store import ProgressStore
from tests import support

V1 = support.FIXTURES / "progress" / "valid"
V1_FILES = sorted(V1.glob("*.md"))


def test_the_v1_fixtures_are_still_version_1() -> None:
    assert V1_FILES
    for path in V1_FILES:
        assert path.read_text(encoding="utf-8").startswith("---\nflow_progress: 1\n"), path


@pytest.mark.parametrize("path", V1_FILES, ids=lambda p: p.name)
def test_a_v1_file_loads_and_renders_as_the_current_version(path: Path) -> None:
    run, report = load_progress(path)
    text = render(run)
    assert text.startswith(f"---\nflow_progress: {FORMAT_VERSION}\n")
    again, _ = parse(text, path=path)
    assert again == run
    # The transcript and the hand-edit report come through the upgrade unchanged.
    v1_text = path.read_text(encoding="utf-8")
    assert v1_text.count("\n<!-- flow:entry ") == len(run.transcript)
    if path.name == "hand-edited.md":
        assert report.edited_entries


def test_a_step_without_turns_in_v1_keeps_zero_turns(tmp_path: Path) -> None:
    # Version 1 left out `turns: 0`; version 2 leaves out turns equal to usage.turns.
    text = (V1 / "example.md").read_text(encoding="utf-8")
    assert "    turns: 2\n" in text
    edited = text.replace("    turns: 2\n", "", 1)
    run, _ = parse(edited, path="example.md")
    step = next(s for s in run.steps.values() if s.usage.turns == 2)
    assert step.turns == 0
    again = render(run)
    assert "    turns: 0\n" in again
    assert parse(again)[0].steps == run.steps


def test_saving_a_v1_file_writes_the_current_version(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    shutil.copy(V1 / "example.md", path)
    store, run, _ = ProgressStore.open(path)
    try:
        store.checkpoint(run)
    finally:
        store.close()
    saved = path.read_text(encoding="utf-8")
    assert saved.startswith(f"---\nflow_progress: {FORMAT_VERSION}\n")
    assert load_progress(path)[0] == run


def test_a_v1_journal_is_upgraded_when_replayed(tmp_path: Path) -> None:
    # A crash under a version 1 flow leaves a version 1 journal: each event carries the whole
    # front matter, in the version 1 format.
    path = tmp_path / "progress.md"
    shutil.copy(V1 / "example.md", path)
    text = path.read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---\n", 2)[1])
    assert front["flow_progress"] == 1
    front["reason"] = "changed after the checkpoint"
    header = {"flow_journal": 1, "run_id": front["run_id"]}
    event = {"seq": 1, "fm": front, "entries": []}
    journal_path(path).write_text(
        json.dumps(header) + "\n" + json.dumps(event, default=str) + "\n", encoding="utf-8"
    )
    again, report = load_progress(path)
    assert report.replayed_events >= 1
    assert again.reason == "changed after the checkpoint"
