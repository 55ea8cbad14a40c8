"""``flow rewind``: in place, under the lock, with a backup; nothing in the transcript is lost."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from promptflow_resume.base.errors import InputError, RunLockedError
from promptflow_resume.progress import ProgressStore, load_progress
from promptflow_resume.progress.model import Entry, StepState
from promptflow_resume.sharing import rewind, rewind_run
from tests.support.share import STEPS, conversation, make_project, resume, snapshot, start


def _fields(entry: Entry) -> dict[str, object]:
    """An entry's fields as its archive (JSON) holds them: tuples become lists."""
    return json.loads(json.dumps(asdict(entry)))


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_project(workdir / "repo")


def test_rewind_archives_the_later_entries_backs_up_the_file_and_sets_steps_pending(
    project: Path,
) -> None:
    original, path = start(project)
    before = path.read_bytes()

    result = rewind(path, "draft")

    assert result.backup is not None and result.backup.read_bytes() == before
    assert result.backup.name.startswith("progress.md.bak-")
    run, report = load_progress(path)
    assert report.warnings == []
    first_draft = next(e.id for e in original.transcript if e.step == "draft")
    # Nothing lost: what stays plus what was archived is the whole transcript, field for field.
    assert result.archive == "progress.files/archive-attempt-2-rewind.json"
    archived = json.loads((path.parent / result.archive).read_text(encoding="utf-8"))
    assert [_fields(e) for e in run.transcript] + archived == [
        _fields(e) for e in original.transcript
    ]
    assert result.archived_entries == list(range(first_draft, len(original.transcript) + 1))
    assert run.steps["inspect"] == original.steps["inspect"]
    assert run.steps["draft"] == StepState() == run.steps["report"]
    assert result.reset == ["draft", "report"]
    assert (run.status, run.cursor.step, run.cursor.index) == ("paused", "draft", 2)
    assert run.usage == original.usage  # money spent stays spent
    note = run.attempts[-1].notes[-1]
    assert "flow rewind --to draft" in note
    assert f"archived to {result.archive}" in note
    assert result.backup.name in note


def test_a_rewound_run_resumes_from_the_step_and_finishes_the_same_way(project: Path) -> None:
    original, path = start(project)
    rewind_run(path, "draft")
    finished = resume(path, project)
    assert finished.status == "completed"
    assert conversation(finished) == conversation(original)
    assert len(finished.attempts) == 2
    assert (project / "counter.txt").read_text() == "bumped\n"  # inspect was not re-run


def test_rewinding_to_the_first_step_keeps_only_the_shared_context(project: Path) -> None:
    _, path = start(project)
    rewind(path, "inspect")
    run, _ = load_progress(path)
    assert [e.role for e in run.transcript] == ["system"]
    assert all(state == StepState() for state in run.steps.values())


def test_a_live_run_is_refused_and_left_as_it_was(project: Path) -> None:
    _, path = start(project)
    before = snapshot(path.parent)
    store, _, _ = ProgressStore.open(path)
    try:
        with pytest.raises(RunLockedError, match="in use by another flow process"):
            rewind(path, "draft")
    finally:
        store.close()
    assert snapshot(path.parent) == before  # no backup, no archive, no change


def test_rewinding_to_where_the_run_already_stands_changes_nothing(project: Path) -> None:
    _, path = start(project)
    first = rewind(path, "report")
    assert first.changed
    after_first = snapshot(path.parent)
    second = rewind(path, "report")
    assert not second.changed and second.backup is None
    assert snapshot(path.parent) == after_first


def test_two_rewinds_keep_two_archives_and_two_backups(project: Path) -> None:
    original, path = start(project)
    one = rewind(path, "report")
    two = rewind(path, "inspect")
    assert one.archive != two.archive and one.backup != two.backup
    archived = [
        entry
        for result in (two, one)
        for entry in json.loads((path.parent / str(result.archive)).read_text(encoding="utf-8"))
    ]
    run, _ = load_progress(path)
    assert [_fields(e) for e in run.transcript] + archived == [
        _fields(e) for e in original.transcript
    ]


def test_a_step_after_an_unfinished_one_is_refused(project: Path) -> None:
    _, path = start(project, max_turns=3)  # stopped at the start of draft
    before = path.read_bytes()
    with pytest.raises(InputError, match="earlier step 'draft' is running"):
        rewind(path, "report")
    assert path.read_bytes() == before


@pytest.mark.parametrize("step", STEPS)
def test_whatever_the_step_nothing_is_lost_and_the_resume_ends_the_same(
    project: Path, step: str
) -> None:
    original, path = start(project)
    result = rewind(path, step)
    run, _ = load_progress(path)
    archived = json.loads((path.parent / str(result.archive)).read_text(encoding="utf-8"))
    assert [_fields(e) for e in run.transcript] + archived == [
        _fields(e) for e in original.transcript
    ]
    if step == "inspect":
        (project / "counter.txt").unlink()  # its bump runs again: undo the first one
    assert conversation(resume(path, project)) == conversation(original)
