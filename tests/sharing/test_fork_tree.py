"""``flow fork`` of a run with sub-workflows or in a git worktree (docs/spec.md 4.10, 9.2).

A fork copies the child runs of the steps it keeps (their ``parent`` naming the fork) and
drops the link of the steps it runs again; a fork of a run in a worktree gets a worktree and
branch of its own, made from the original's branch at the start of the step.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptflow_resume.api import Limits, RunOptions, resume_run, run_status
from promptflow_resume.progress import load_progress
from promptflow_resume.sharing import fork
from tests.run.test_subworkflows import CHILD, PARENT, SCRIPT, _child_path, _start
from tests.run.test_worktree import (
    BRANCH,
    DONE,
    PROGRESS,
    RUN_ID,
    TREE,
    _files,
    _head,
    _ran,
    git,
)
from tests.run.test_worktree import repo as repo  # the fixture
from tests.support.flowproc import flow
from tests.support.share import snapshot


@pytest.fixture
def project(workdir: Path) -> Path:
    (workdir / "parent.prompt.md").write_text(PARENT, encoding="utf-8")
    (workdir / "review.prompt.md").write_text(CHILD, encoding="utf-8")
    (workdir / "script.yaml").write_text(SCRIPT, encoding="utf-8")
    return workdir


# --- sub-workflows ----------------------------------------------------------------------------


def test_a_fork_after_a_workflow_step_copies_its_child(project: Path) -> None:
    path = _start(project)
    original, _ = load_progress(path)
    original_child, _ = load_progress(_child_path(path))
    before = snapshot(project)

    result = fork(path, "report", project / "forks" / "again.md")

    assert {k: v for k, v in snapshot(project).items() if not k.startswith("forks/")} == before
    assert result.children == ["again.steps/review/progress.md"]
    forked, _ = load_progress(result.output)
    assert forked.steps["review"].child == "again.steps/review/progress.md"
    child_copy = project / "forks" / "again.steps" / "review" / "progress.md"
    child, _ = load_progress(child_copy)
    assert child.run_id != original_child.run_id
    assert child.parent == {
        "path": "../../again.md",
        "run_id": forked.run_id,
        "step": "review",
        "kind": "workflow",
    }
    assert child.workflow.path == "../../../review.prompt.md"
    assert [(e.role, e.content) for e in child.transcript] == [
        (e.role, e.content) for e in original_child.transcript
    ]
    # status shows the copied child as it is (completed), not as "not started".
    status = run_status(result.output)
    assert [(c.step, c.status, c.path) for c in status.children] == [
        ("review", "completed", child_copy)
    ]

    # Resumed, the fork reads its completed child back and runs only the last step.
    child_bytes = child_copy.read_bytes()
    finished = resume_run(
        result.output, RunOptions(limits=Limits(max_turns=10), workspace=project)
    ).run
    assert finished.status == "completed"
    assert child_copy.read_bytes() == child_bytes
    assert finished.usage.turns == original.usage.turns
    assert [e.content for e in finished.transcript if e.role != "note"] == [
        e.content for e in original.transcript
    ]


def test_a_fork_at_a_workflow_step_drops_its_link_and_runs_a_new_child(project: Path) -> None:
    path = _start(project)

    result = fork(path, "review", project / "forks" / "again.md")

    assert result.children == []
    forked, _ = load_progress(result.output)
    assert forked.steps["review"].child is None
    assert not (project / "forks" / "again.steps").exists()
    assert [c.status for c in run_status(result.output).children] == []
    finished = resume_run(
        result.output, RunOptions(limits=Limits(max_turns=10), workspace=project)
    ).run
    assert finished.status == "completed"
    assert finished.steps["review"].child == "again.steps/review/progress.md"
    new_child, _ = load_progress(project / "forks" / "again.steps" / "review" / "progress.md")
    assert new_child.status == "completed"
    assert new_child.parent is not None and new_child.parent["run_id"] == finished.run_id


def test_the_cli_names_the_copied_children(project: Path) -> None:
    path = _start(project)
    done = flow("fork", str(path), "--at", "report", "-o", "forks/again.md", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "child runs copied: again.steps/review/progress.md" in done.stdout
    data = json.loads(
        flow("fork", str(path), "--at", "3", "-o", "forks/b.md", "--json", cwd=project).stdout
    )
    assert data["children"] == ["b.steps/review/progress.md"] and data["worktree"] is None


def test_a_child_that_cannot_be_read_leaves_no_partial_fork(project: Path) -> None:
    path = _start(project)
    child = _child_path(path)
    child.write_text(child.read_text(encoding="utf-8").replace("run_id:", "run_id: [", 1))
    done = flow("fork", str(path), "--at", "report", "-o", "forks/again.md", cwd=project)
    assert done.returncode == 4, done.stderr
    assert "Traceback" not in done.stderr and "progress.steps/review/progress.md" in done.stderr
    assert not (project / "forks" / "again.md").exists()
    assert not (project / "forks" / "again.steps").exists()
    assert not (project / "forks" / "again.files").exists()


# --- worktrees --------------------------------------------------------------------------------


def test_a_fork_of_a_worktree_run_gets_its_own_worktree_at_that_step(repo: Path) -> None:
    base = _ran(repo)
    original_head = git(repo, "rev-parse", BRANCH).strip()
    edit_commit = git(repo, "rev-parse", f"{BRANCH}~1").strip()

    done = flow("fork", PROGRESS, "--at", "count", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    fork_id = data["run_id"]
    assert data["branch"] == f"flow/{fork_id}" != BRANCH
    assert data["worktree"] == f".flow/worktrees/{fork_id}"
    forked, _ = load_progress(repo / data["output"])
    assert forked.worktree is not None
    assert (forked.worktree.path, forked.worktree.branch, forked.worktree.base) == (
        f".flow/worktrees/{fork_id}",
        f"flow/{fork_id}",
        base,
    )
    # The fork's worktree holds what the kept step committed, nothing of the step it reruns.
    tree = repo / forked.worktree.path
    assert git(tree, "rev-parse", "HEAD").strip() == edit_commit
    assert _files(tree) == {k: v for k, v in DONE.items() if k != "count.txt"}
    # The original's branch and worktree are as they were.
    assert git(repo, "rev-parse", BRANCH).strip() == original_head
    assert _files(repo / TREE) == DONE

    resumed = flow("resume", data["output"], cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    assert _files(tree) == DONE
    log = git(repo, "log", "--format=%s", f"{base}..flow/{fork_id}").splitlines()
    assert log == [f"flow run {fork_id}: step count", f"flow run {RUN_ID}: step edit"]
    assert git(repo, "rev-parse", BRANCH).strip() == original_head
    review = json.loads(flow("review", data["output"], "--json", cwd=repo).stdout)
    assert sorted(f["path"] for f in review["files"]) == sorted(DONE)


def test_a_fork_at_the_first_step_starts_from_the_base(repo: Path) -> None:
    base = _ran(repo)
    data = json.loads(flow("fork", PROGRESS, "--at", "edit", "--json", cwd=repo).stdout)
    tree = repo / data["worktree"]
    assert git(tree, "rev-parse", "HEAD").strip() == base == _head(repo)
    assert _files(tree) == {"hello.txt": "Hello\n"}


def test_a_fork_of_a_discarded_run_is_refused(repo: Path) -> None:
    _ran(repo)
    assert flow("discard", PROGRESS, cwd=repo).returncode == 0
    refused = flow("fork", PROGRESS, "--at", "count", cwd=repo)
    assert refused.returncode == 14
    assert "were discarded" in refused.stderr and "Traceback" not in refused.stderr
    assert git(repo, "branch", "--format=%(refname:short)").split() == ["main"]
    assert len(list((repo / ".flow" / "runs").iterdir())) == 1


def test_a_branch_that_mixes_steps_is_refused(repo: Path) -> None:
    _ran(repo)
    # Someone committed in the run's worktree after its last step, then edit was committed
    # again (as a rewound run would): the branch has no point that is the start of "count".
    (repo / TREE / "extra.txt").write_text("x\n")
    git(repo / TREE, "add", "extra.txt")
    git(repo / TREE, "commit", "--quiet", "-m", f"flow run {RUN_ID}: step edit")
    refused = flow("fork", PROGRESS, "--at", "count", cwd=repo)
    assert refused.returncode == 14, refused.stderr
    assert "no commit that is the start of step 'count'" in refused.stderr
    assert f"flow run {RUN_ID}: step count" in refused.stderr
    assert len(list((repo / ".flow" / "runs").iterdir())) == 1
    assert len(git(repo, "branch", "--format=%(refname:short)").split()) == 2


def test_a_fork_outside_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    _ran(repo)
    refused = flow("fork", PROGRESS, "--at", "count", "-o", str(tmp_path / "out.md"), cwd=repo)
    assert refused.returncode == 9, refused.stderr
    assert "must lie inside the repository" in refused.stderr
    assert not (tmp_path / "out.md").exists()
    assert len(git(repo, "branch", "--format=%(refname:short)").split()) == 2
