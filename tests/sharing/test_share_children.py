"""``flow share`` of a run with sub-workflows: the copy carries its child runs (spec 4.10).

The parent and child workflows are those of tests/run/test_subworkflows.py, run with the offline
``scripted`` provider; a budget of two turns stops the run inside its child, so the shared
copy must resume the child (not start it again) and then finish the parent.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from promptflow_resume.api import Limits, RunOptions, resume_run, run_status
from promptflow_resume.base.errors import InputError
from promptflow_resume.base.redact import Redactor
from promptflow_resume.progress import load_progress
from promptflow_resume.sharing import share
from tests.run.test_subworkflows import CHILD, PARENT, SCRIPT, _child_path, _start
from tests.support.flowproc import flow

SECRET = "tok-5a4b3c2d1e0f99887766"


@pytest.fixture
def project(workdir: Path) -> Path:
    # The secret reaches the child's transcript through the parent's input.
    (workdir / "parent.prompt.md").write_text(PARENT, encoding="utf-8")
    (workdir / "review.prompt.md").write_text(CHILD, encoding="utf-8")
    (workdir / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return workdir


def _stopped_in_child(project: Path) -> Path:
    path = _start(project, Limits(max_turns=2))
    child, _ = load_progress(_child_path(path))
    assert child.status == "budget_exhausted" and child.steps["judge"].status != "completed"
    return path


def test_a_shared_parent_carries_its_child_and_resumes_it(project: Path, tmp_path: Path) -> None:
    reference, _ = load_progress(_start(project, name="reference"))
    path = _stopped_in_child(project)
    original_child = _child_path(path).read_bytes()

    result = share(path, project / "shared" / "review-run.md")

    copy = project / "shared" / "review-run.md"
    child_copy = project / "shared" / "review-run.steps" / "review" / "progress.md"
    assert result.children == ["review-run.steps/review/progress.md"]
    assert child_copy.is_file()
    parent, _ = load_progress(copy)
    child, _ = load_progress(child_copy)
    # Linked both ways, to the copies.
    assert parent.steps["review"].child == "review-run.steps/review/progress.md"
    assert child.parent is not None and child.parent["path"] == "../../review-run.md"
    assert child.parent["kind"] == "workflow" and child.parent["run_id"] == parent.run_id
    assert child.workflow.path == "../../../review.prompt.md"
    assert _child_path(path).read_bytes() == original_child  # the original is only read

    # status shows the tree of the copy.
    status = run_status(copy)
    assert [(c.step, c.status, c.path) for c in status.children] == [
        ("review", "budget_exhausted", child_copy)
    ]

    # Moved elsewhere (no original beside it), the copy resumes the child where it stopped.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name in ("parent.prompt.md", "review.prompt.md", "script.yaml"):
        shutil.copy(project / name, elsewhere / name)
    shutil.copytree(project / "shared", elsewhere / "shared")
    shutil.rmtree(project / "run")
    moved = elsewhere / "shared" / "review-run.md"
    finished = resume_run(moved, RunOptions(limits=Limits(max_turns=10), workspace=elsewhere)).run
    assert finished.status == "completed"
    done_child, _ = load_progress(elsewhere / "shared" / "review-run.steps/review/progress.md")
    assert done_child.status == "completed"
    assert [e.content for e in done_child.transcript if e.role == "assistant"] == [
        "alpha",
        "beta",
    ]
    assert [e.content for e in finished.transcript if e.role == "assistant"] == [
        e.content for e in reference.transcript if e.role == "assistant"
    ]
    assert finished.usage.to_dict() == reference.usage.to_dict()


def test_secrets_in_a_child_are_redacted_in_its_copy(project: Path) -> None:
    path = _start(project, Limits(max_turns=2))
    child_file = _child_path(path)
    assert "the bees" in child_file.read_text(encoding="utf-8")

    # "bees" is a secret in the environment that shares the run.
    result = share(path, project / "out.md", redactor=Redactor({"bees": "TOPIC"}))

    child_copy = project / "out.steps" / "review" / "progress.md"
    assert "bees" not in child_copy.read_text(encoding="utf-8")
    child, _ = load_progress(child_copy)
    assert child.redactions.count > 0
    assert result.redacted >= child.redactions.count


def test_a_grandchild_is_shared_too(project: Path) -> None:
    # review runs a third workflow: the copy holds two levels of children.
    (project / "review.prompt.md").write_text(
        CHILD.replace(
            "## Step 2: Judge\nJudge it in one line.\n",
            "## Step 2: Judge {#judge}\n> workflow: leaf.prompt.md\n",
        ),
        encoding="utf-8",
    )
    (project / "leaf.prompt.md").write_text(
        "---\ndescription: A leaf\n---\n## Step 1: Say\nSay one word.\n", encoding="utf-8"
    )
    path = _start(project)
    grandchild = _child_path(path).parent / "progress.steps" / "judge" / "progress.md"
    assert load_progress(grandchild)[0].status == "completed"

    result = share(path, project / "tree.md")

    assert result.children == [
        "tree.steps/review/progress.md",
        "tree.steps/review/progress.steps/judge/progress.md",
    ]
    leaf, _ = load_progress(project / "tree.steps/review/progress.steps/judge/progress.md")
    assert leaf.parent is not None and leaf.parent["path"] == "../../progress.md"
    status = run_status(project / "tree.md")
    assert [c.status for c in status.children] == ["completed"]
    assert [g.path for g in status.children[0].children] == [
        project / "tree.steps/review/progress.steps/judge/progress.md"
    ]


def test_an_existing_steps_folder_needs_force(project: Path) -> None:
    path = _start(project, Limits(max_turns=2))
    (project / "out.steps").mkdir()
    (project / "out.steps" / "stale.txt").write_text("old", encoding="utf-8")
    with pytest.raises(InputError, match=r"out\.steps already exists"):
        share(path, project / "out.md")
    assert not (project / "out.md").exists()

    share(path, project / "out.md", force=True)
    assert not (project / "out.steps" / "stale.txt").exists()
    assert (project / "out.steps" / "review" / "progress.md").is_file()


def test_the_cli_shares_the_tree_and_status_shows_it(project: Path) -> None:
    path = _start(project, Limits(max_turns=2))
    result = flow("share", str(path), "-o", "shared/run.md", "--json", cwd=project)
    assert result.returncode == 0, result.stderr
    assert '"children": [\n    "run.steps/review/progress.md"' in result.stdout
    status = flow("status", "shared/run.md", cwd=project)
    assert status.returncode == 0, status.stderr
    assert "  review: budget_exhausted" in status.stdout
    assert "run.steps/review/progress.md" in status.stdout
    text = flow("share", str(path), "-o", "again.md", cwd=project)
    assert "child runs shared with it: again.steps/review/progress.md" in text.stdout


def test_a_child_that_cannot_be_read_leaves_no_partial_copy(project: Path) -> None:
    from promptflow_resume.base.errors import FlowError

    path = _start(project, Limits(max_turns=2))
    child = _child_path(path)
    child.write_text(child.read_text(encoding="utf-8").replace("run_id:", "run_id: [", 1))
    with pytest.raises(FlowError) as caught:
        share(path, project / "out.md")
    assert str(child) in str(caught.value) or "progress.steps/review" in str(caught.value)
    assert not (project / "out.md").exists()
    assert not (project / "out.steps").exists() and not (project / "out.files").exists()
