"""The committed example run (workflows/examples/) is a real, current, resumable progress file.

It was written by ``flow run workflows/triage-todos.prompt.md --provider replay --recording
workflows/triage-todos.recording.jsonl`` and ``flow share … -o
workflows/examples/triage-todos.progress.md``. When the workflow or the format changes, run
those two commands again (from the repository root) to regenerate it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from promptflow_resume.api import RunOptions, resume_run
from promptflow_resume.progress import ProgressStore, load_progress
from promptflow_resume.sharing import fork
from promptflow_resume.workflow import load_workflow
from tests import support

ROOT = support.REPO
EXAMPLE = ROOT / "workflows" / "examples" / "triage-todos.progress.md"
REGENERATE = (
    "regenerate the example: flow run workflows/triage-todos.prompt.md --provider replay "
    "--recording workflows/triage-todos.recording.jsonl --new, then flow share that run "
    "-o workflows/examples/triage-todos.progress.md --force"
)


def test_the_example_loads_cleanly_and_matches_its_workflow() -> None:
    run, report = load_progress(EXAMPLE)
    assert report.warnings == [] and report.edited_entries == []
    assert run.status == "completed"
    workflow = load_workflow(EXAMPLE.parent / run.workflow.path)
    assert workflow.path.resolve() == ROOT / "workflows" / "triage-todos.prompt.md"
    assert run.workflow.hash == workflow.hash, REGENERATE
    assert run.config.recording == "../triage-todos.recording.jsonl"
    text = EXAMPLE.read_text(encoding="utf-8")
    assert "/work/" not in text and "/home/" not in text and "/tmp/" not in text


def test_saving_the_example_changes_nothing_but_its_share_header(tmp_path: Path) -> None:
    copy = tmp_path / "example.md"
    shutil.copy(EXAMPLE, copy)
    store, run, _ = ProgressStore.open(copy)
    store.checkpoint(run)
    store.close()
    expected = re.sub(r"(?<=\n---\n\n)(?:>[^\n]*\n)+\n", "", EXAMPLE.read_text(encoding="utf-8"))
    assert copy.read_text(encoding="utf-8") == expected, REGENERATE


def test_a_fork_of_the_example_replays_its_last_step_to_the_same_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # the workspace the example ran in
    original, _ = load_progress(EXAMPLE)
    result = fork(EXAMPLE, "prioritise", tmp_path / "fork.md")
    # No file snapshots: the workspace is this repository itself.
    finished = resume_run(result.output, RunOptions(workspace=ROOT, snapshots=False)).run
    assert finished.status == "completed"
    assert finished.transcript[-1].content == original.transcript[-1].content
