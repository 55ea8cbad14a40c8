"""``flow fork``: a new run from the checkpoint at the start of a step; the original untouched."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

from promptflow_resume.base.errors import InputError
from promptflow_resume.progress import load_progress
from promptflow_resume.progress.model import StepState
from promptflow_resume.sharing import fork
from tests.support.share import STEPS, conversation, make_project, resume, snapshot, start


@pytest.fixture
def project(workdir: Path) -> Path:
    return make_project(workdir / "repo")


def test_a_fork_starts_at_the_step_with_a_new_id_and_a_parent_and_leaves_the_original_alone(
    project: Path,
) -> None:
    original, path = start(project)
    assert original.status == "completed"
    before = snapshot(project)

    result = fork(path, "draft", project / "forks" / "try-2.md")

    # Byte for byte, every file that existed before is as it was; only forks/ is new.
    assert {k: v for k, v in snapshot(project).items() if not k.startswith("forks/")} == before
    forked, report = load_progress(result.output)
    assert report.edited_entries == []
    assert forked.run_id == result.run_id != original.run_id
    assert forked.parent == {
        "path": "../.flow/runs/r1/progress.md",
        "run_id": original.run_id,
        "step": "draft",
    }
    first_draft = next(e.id for e in original.transcript if e.step == "draft")
    moved = {"sidecar": "try-2.files/call_1_1-listing"}  # the fork's own folder
    assert [asdict(e) for e in forked.transcript] == [
        {**asdict(e), **(moved if e.sidecar else {})}
        for e in original.transcript[: first_draft - 1]
    ]
    assert forked.steps["inspect"] == original.steps["inspect"]
    assert forked.steps["draft"] == StepState() and forked.steps["report"] == StepState()
    assert (forked.status, forked.cursor.step, forked.cursor.index) == ("paused", "draft", 2)
    assert forked.usage == original.steps["inspect"].usage
    assert forked.attempts == [] and forked.last_error is None
    assert forked.workflow.path == "../release.prompt.md"
    assert result.pending == ["draft", "report"]


def test_a_resumed_fork_finishes_like_the_original_without_rerunning_earlier_tools(
    project: Path,
) -> None:
    original, path = start(project)
    result = fork(path, "report")
    finished = resume(result.output, project)
    assert finished.status == "completed"
    assert conversation(finished) == conversation(original)
    assert (project / "counter.txt").read_text() == "bumped\n"  # bump ran once, in the original


def test_the_fork_carries_its_own_copies_of_the_sidecars(project: Path) -> None:
    _, path = start(project)
    result = fork(path, "draft", project / "f.md")
    assert result.bundled == ["f.files/call_1_1-listing"]
    run, _ = load_progress(result.output)  # verifies the copied sidecar
    entry = next(e for e in run.transcript if e.sidecar)
    assert entry.sidecar == "f.files/call_1_1-listing"


def test_the_default_fork_is_a_sibling_run_folder(project: Path) -> None:
    _, path = start(project)
    result = fork(path, "1")  # a step number works too
    assert result.step == "inspect"
    assert result.output == path.parent.parent / result.run_id / "progress.md"
    forked, _ = load_progress(result.output)
    assert [e.role for e in forked.transcript] == ["system"]  # the shared context stays


@pytest.mark.parametrize(
    ("step", "words"),
    [
        ("publish", "has no step 'publish'; its steps are: inspect, draft, report"),
        ("7", "has no step '7'"),
        ("report", "earlier step 'draft' is running, not completed"),
    ],
)
def test_a_step_the_run_never_reached_is_refused(project: Path, step: str, words: str) -> None:
    _, path = start(project, max_turns=3)  # stops at the start of draft
    with pytest.raises(InputError, match=words):
        fork(path, step)


def test_an_existing_target_is_refused(project: Path) -> None:
    _, path = start(project)
    target = project / "f.md"
    target.write_text("mine\n")
    with pytest.raises(InputError, match="already exists"):
        fork(path, "draft", target)
    assert target.read_text() == "mine\n"


@pytest.mark.parametrize("step", STEPS)
def test_a_fork_at_any_step_is_a_prefix_of_the_original_and_finishes_like_it(
    project: Path, step: str
) -> None:
    original, path = start(project)
    result = fork(path, step)
    forked, _ = load_progress(result.output)
    cut = next(e.id for e in original.transcript if e.step == step)
    assert [e.content for e in forked.transcript] == [
        e.content for e in original.transcript[: cut - 1]
    ]
    if step == "inspect":
        (project / "counter.txt").unlink()  # its bump runs again: undo the first one
    assert conversation(resume(result.output, project)) == conversation(original)
