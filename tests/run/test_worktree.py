"""Runs in their own git worktree: ``flow run --worktree``, review, merge, discard, clean.

Every test makes a real git repository, and runs the real ``flow`` command as a subprocess
(the crash tests kill it with SIGKILL at a fault point and resume it). The workflow edits two
files in step 1 (one new) and runs a command tool in step 2, with the ``scripted`` provider.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from promptflow_resume.base.errors import EXIT_GIT
from promptflow_resume.progress import load_progress
from tests import support
from tests.support.flowproc import flow, flow_env

FIXTURES = support.FIXTURES / "worktree"
RUN_ID = "wt-run"
PROGRESS = f".flow/runs/{RUN_ID}/progress.md"
RUN = (
    "run",
    "change.prompt.md",
    "--recording",
    "change.script.yaml",
    "--worktree",
    "--progress",
    PROGRESS,
)
BRANCH = f"flow/{RUN_ID}"
TREE = Path(".flow/worktrees") / RUN_ID
#: The worktree's files after a whole run.
DONE = {
    "hello.txt": "Hello, world!\nHave a nice day.\n",
    "docs/note.md": "# Note\n\nThe greeting is friendlier.\n",
    "count.txt": "2\n",
}
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "Tester",
    "GIT_AUTHOR_EMAIL": "tester@example.com",
    "GIT_COMMITTER_NAME": "Tester",
    "GIT_COMMITTER_EMAIL": "tester@example.com",
}


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` (as the test's own person) and return its output."""
    done = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **_GIT_ENV},
        check=True,
    )
    return done.stdout


def _repo(where: Path) -> Path:
    where.mkdir(parents=True)
    git(where, "init", "--quiet", "--initial-branch=main")
    for name in ("change.prompt.md", "change.script.yaml"):
        shutil.copy(FIXTURES / name, where / name)
    (where / "hello.txt").write_text("Hello\n")
    (where / "README.md").write_text("# Project\n")
    git(where, "add", "--all")
    git(where, "commit", "--quiet", "-m", "base")
    return where


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit holding the workflow, its script and hello.txt."""
    return _repo(tmp_path / "repo")


def _files(folder: Path) -> dict[str, str]:
    return {n: (folder / n).read_text() for n in DONE if (folder / n).exists()}


def _tracked_changes(repo: Path) -> str:
    return git(repo, "status", "--porcelain", "--untracked-files=no")


def _head(repo: Path) -> str:
    return git(repo, "rev-parse", "HEAD").strip()


def _branches(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


def _state(repo: Path) -> str:
    run, _ = load_progress(repo / PROGRESS)
    assert run.worktree is not None
    return run.worktree.state


def _ran(repo: Path) -> str:
    """Run the workflow in a worktree to the end; the base commit."""
    base = _head(repo)
    done = flow(*RUN, cwd=repo)
    assert done.returncode == 0, done.stderr
    return base


# --- the run itself ---------------------------------------------------------------------------


def test_a_run_in_a_worktree_changes_the_worktree_only(repo: Path) -> None:
    base = _head(repo)
    done = flow(*RUN, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"Worktree: {TREE.as_posix()} (branch {BRANCH})" in done.stderr
    assert (
        f"flow: working in the worktree {TREE.as_posix()} on branch {BRANCH} "
        f"(made from {base[:12]})" in done.stderr
    )
    # The main checkout: untouched, and its status does not show the worktree.
    assert (repo / "hello.txt").read_text() == "Hello\n"
    assert not (repo / "docs").exists() and not (repo / "count.txt").exists()
    assert _tracked_changes(repo) == ""
    assert _head(repo) == base
    assert TREE.as_posix() not in git(repo, "status", "--porcelain", "--untracked-files=all")
    # The worktree: both edits and the command's file, one commit per step on the branch.
    assert _files(repo / TREE) == DONE
    assert git(repo / TREE, "status", "--porcelain") == ""
    log = git(repo, "log", "--format=%s", f"{base}..{BRANCH}").splitlines()
    assert log == [f"flow run {RUN_ID}: step count", f"flow run {RUN_ID}: step edit"]
    assert git(repo, "rev-parse", f"{BRANCH}~2").strip() == base
    # The progress file stays in the main checkout and records the worktree.
    run, _ = load_progress(repo / PROGRESS)
    assert run.status == "completed"
    assert run.worktree is not None
    assert (run.worktree.path, run.worktree.branch, run.worktree.base, run.worktree.state) == (
        TREE.as_posix(),
        BRANCH,
        base,
        "active",
    )
    text = (repo / PROGRESS).read_text()
    assert f"worktree: {{path: {TREE.as_posix()}, branch: {BRANCH}, base: {base}, " in text


def test_the_worktree_record_round_trips_and_an_old_file_has_none(repo: Path) -> None:
    from promptflow_resume.progress import ProgressStore

    _ran(repo)
    path = repo / PROGRESS
    before = path.read_bytes()
    store, run, _ = ProgressStore.open(path)
    store.checkpoint(run)
    store.close()
    assert path.read_bytes() == before
    old = path.read_text().splitlines(keepends=True)
    without = "".join(line for line in old if not line.startswith("worktree: "))
    other = repo / "old.md"
    other.write_text(without)
    assert load_progress(other)[0].worktree is None


@pytest.mark.parametrize(
    ("point", "delete_folder"),
    [
        # Killed with the first edit written but not recorded: nothing committed yet.
        ("edit.after_write:1", False),
        # Killed right after step 1 was committed; the folder is deleted before resume and
        # comes back from the branch.
        ("engine.step_completed:1", True),
        # The same kill point, folder kept.
        ("engine.step_completed:1", False),
    ],
)
def test_a_killed_run_resumes_inside_its_worktree(
    repo: Path, point: str, delete_folder: bool
) -> None:
    base = _head(repo)
    killed = flow(*RUN, cwd=repo, env=flow_env(FLOW_CRASH_AT=point))
    assert killed.returncode == -9, killed.stderr
    assert (repo / TREE).is_dir()
    if delete_folder:
        shutil.rmtree(repo / TREE)
    resumed = flow("resume", PROGRESS, cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    if delete_folder:
        assert f"the run's worktree {TREE.as_posix()} was missing; recreated it" in resumed.stderr
    assert _files(repo / TREE) == DONE
    assert (repo / "hello.txt").read_text() == "Hello\n"
    assert _tracked_changes(repo) == "" and _head(repo) == base
    # Every change is committed on the branch, the edit applied exactly once.
    assert git(repo / TREE, "status", "--porcelain") == ""
    assert git(repo, "show", f"{BRANCH}:hello.txt") == DONE["hello.txt"]
    run, _ = load_progress(repo / PROGRESS)
    assert run.status == "completed" and len(run.attempts) == 2


# --- review -------------------------------------------------------------------------------------


def test_review_shows_committed_and_uncommitted_changes(repo: Path) -> None:
    killed = flow(*RUN, cwd=repo, env=flow_env(FLOW_CRASH_AT="edit.after_write:2"))
    assert killed.returncode == -9
    # Step 1 was stopped after both edits were written: nothing committed, all in review.
    data = json.loads(flow("review", PROGRESS, "--json", cwd=repo).stdout)
    assert data["commits"] == 0 and data["uncommitted"] is True
    assert [f["path"] for f in data["files"]] == ["docs/note.md", "hello.txt"]
    assert "+Hello, world!" in data["diff"] and "+The greeting is friendlier." in data["diff"]
    # The review staged nothing in the worktree's own index.
    assert git(repo / TREE, "diff", "--cached", "--name-only") == ""


def test_review_text_and_json(repo: Path) -> None:
    base = _ran(repo)
    text = flow("review", PROGRESS, cwd=repo)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        f"run {RUN_ID}: branch {BRANCH} against base {base[:12]} "
        f"(2 commits; worktree {TREE.as_posix()}, active)"
    )
    assert " 3 files changed, 6 insertions(+), 1 deletion(-)" in lines
    assert "-Hello" in lines and "+Have a nice day." in lines
    stat = flow("review", PROGRESS, "--stat", cwd=repo).stdout
    assert "diff --git" not in stat and "hello.txt" in stat
    data = json.loads(flow("review", PROGRESS, "--json", cwd=repo).stdout)
    assert data["files"] == [
        {"path": "count.txt", "insertions": 1, "deletions": 0},
        {"path": "docs/note.md", "insertions": 3, "deletions": 0},
        {"path": "hello.txt", "insertions": 2, "deletions": 1},
    ]
    assert (data["insertions"], data["deletions"], data["commits"]) == (6, 1, 2)
    assert (data["branch"], data["base"], data["uncommitted"]) == (BRANCH, base, False)
    assert data["diff"] == git(repo, "diff", base, BRANCH)


# --- merge --------------------------------------------------------------------------------------


def test_merge_brings_the_changes_into_the_current_branch(repo: Path) -> None:
    base = _ran(repo)
    done = flow("merge", PROGRESS, cwd=repo)
    assert done.returncode == 0, done.stderr
    head = _head(repo)
    assert done.stdout.splitlines() == [
        f"{BRANCH} merged into main ({head[:12]}, 3 files changed)",
        f"Next: flow discard {PROGRESS}  (removes the worktree and the branch)",
    ]
    assert _files(repo) == DONE
    parents = git(repo, "rev-list", "--parents", "-n", "1", "HEAD").split()[1:]
    assert parents == [base, git(repo, "rev-parse", BRANCH).strip()]
    assert _tracked_changes(repo) == ""
    assert _state(repo) == "merged"
    # The worktree and branch stay until discarded; merging again has nothing to do.
    assert (repo / TREE).is_dir() and BRANCH in _branches(repo)
    again = flow("merge", PROGRESS, cwd=repo)
    assert again.returncode == 0 and "nothing to merge" in again.stdout
    assert _head(repo) == head


def test_merge_squash_makes_one_commit(repo: Path) -> None:
    base = _ran(repo)
    done = flow("merge", PROGRESS, "--squash", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["squash"] is True and data["into"] == "main"
    assert sorted(data["files"]) == sorted(DONE)
    assert git(repo, "rev-list", "--parents", "-n", "1", "HEAD").split()[1:] == [base]
    assert git(repo, "log", "-1", "--format=%s").strip() == f"Run {RUN_ID} (squashed from {BRANCH})"
    assert _files(repo) == DONE and _tracked_changes(repo) == ""


def test_merge_commits_what_the_worktree_left_uncommitted(repo: Path) -> None:
    killed = flow(*RUN, cwd=repo, env=flow_env(FLOW_CRASH_AT="edit.after_write:2"))
    assert killed.returncode == -9
    done = flow("merge", PROGRESS, "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["leftover_commit"] == git(repo, "rev-parse", BRANCH).strip()
    assert (repo / "docs/note.md").read_text() == DONE["docs/note.md"]
    assert (repo / "hello.txt").read_text() == DONE["hello.txt"]


@pytest.mark.parametrize("squash", [False, True])
def test_a_merge_conflict_is_reported_and_aborted(repo: Path, squash: bool) -> None:
    _ran(repo)
    (repo / "hello.txt").write_text("Hi there\n")
    git(repo, "commit", "--quiet", "-am", "a change of our own")
    head = _head(repo)
    done = flow("merge", PROGRESS, *(["--squash"] if squash else []), cwd=repo)
    assert done.returncode == EXIT_GIT == 14
    assert (
        f"error: merging {BRANCH} into main conflicts in 1 file(s): hello.txt. The merge was "
        "aborted: main and the main checkout are as they were, and the run's worktree and "
        "branch are kept." in done.stderr
    )
    assert "Traceback" not in done.stderr
    # Nothing changed here, nothing was lost there.
    assert _head(repo) == head and _tracked_changes(repo) == ""
    assert (repo / "hello.txt").read_text() == "Hi there\n"
    assert not (repo / "docs").exists()
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert _files(repo / TREE) == DONE and BRANCH in _branches(repo)
    assert _state(repo) == "active"
    as_json = json.loads(flow("merge", PROGRESS, "--json", cwd=repo).stdout)
    assert (as_json["error"], as_json["files"], as_json["exit_code"]) == (
        "MergeConflictError",
        ["hello.txt"],
        14,
    )


def test_merge_refuses_a_main_checkout_with_uncommitted_changes(repo: Path) -> None:
    _ran(repo)
    (repo / "README.md").write_text("# Changed here\n")
    done = flow("merge", PROGRESS, cwd=repo)
    assert done.returncode == 14
    assert "has uncommitted changes to README.md" in done.stderr
    assert (repo / "README.md").read_text() == "# Changed here\n"
    assert (repo / "hello.txt").read_text() == "Hello\n"


def test_merge_and_discard_leave_a_live_run_alone(repo: Path) -> None:
    from promptflow_resume.progress import ProgressStore

    _ran(repo)
    store, _, _ = ProgressStore.open(repo / PROGRESS)  # this process owns the run now
    try:
        for command in ("merge", "discard"):
            refused = flow(command, PROGRESS, cwd=repo)
            assert refused.returncode == 6, refused.stderr
    finally:
        store.close()
    assert (repo / "hello.txt").read_text() == "Hello\n"
    assert (repo / TREE).is_dir() and BRANCH in _branches(repo)


# --- discard and clean ----------------------------------------------------------------------


def test_discard_removes_worktree_and_branch_and_marks_the_run(repo: Path) -> None:
    _ran(repo)
    done = flow("discard", PROGRESS, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        f"discarded: worktree {TREE.as_posix()} and branch {BRANCH} removed"
    )
    assert not (repo / TREE).exists() and BRANCH not in _branches(repo)
    assert TREE.as_posix() not in git(repo, "worktree", "list")
    assert _state(repo) == "discarded"
    assert (repo / "hello.txt").read_text() == "Hello\n"
    status = json.loads(flow("status", PROGRESS, "--json", cwd=repo).stdout)
    assert status["worktree"]["state"] == "discarded" and status["can_resume"] is False
    for command in (("resume", PROGRESS), ("review", PROGRESS), ("merge", PROGRESS)):
        refused = flow(*command, cwd=repo)
        assert refused.returncode == 14, command
        assert "discarded" in refused.stderr


def test_clean_removes_the_worktrees_of_the_runs_it_deletes(repo: Path) -> None:
    _ran(repo)
    # Without --worktrees (and no terminal to ask), the run is kept with its worktree.
    kept = json.loads(flow("clean", "--older-than", "0", "--json", cwd=repo).stdout)
    assert kept["deleted"] == [] and (repo / TREE).is_dir() and (repo / PROGRESS).is_file()
    assert "flow clean --worktrees removes them too" in kept["skipped"][0]["reason"]
    done = flow("clean", "--older-than", "0", "--worktrees", "--json", cwd=repo)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert [(d["run_id"], d["worktree"], d["branch"]) for d in data["deleted"]] == [
        (RUN_ID, TREE.as_posix(), BRANCH)
    ]
    assert data["deleted"][0]["worktree_problem"] is None
    assert not (repo / TREE).exists() and BRANCH not in _branches(repo)
    assert not (repo / PROGRESS).exists()
    assert git(repo, "worktree", "list").count("\n") == 1


# --- list and status ------------------------------------------------------------------------


def test_list_and_status_show_the_worktree(repo: Path) -> None:
    base = _ran(repo)
    listed = json.loads(flow("list", "--all", "--json", cwd=repo).stdout)
    assert listed[0]["worktree"] == {
        "path": TREE.as_posix(),
        "branch": BRANCH,
        "base": base,
        "state": "active",
    }
    table = flow("list", "--all", cwd=repo, env=flow_env(COLUMNS="300")).stdout
    assert f"{TREE.as_posix()} (active)" in table
    status = json.loads(flow("status", PROGRESS, "--json", cwd=repo).stdout)
    assert status["worktree"] == {
        "path": TREE.as_posix(),
        "branch": BRANCH,
        "base": base,
        "state": "active",
        "exists": True,
    }
    shutil.rmtree(repo / TREE)
    text = flow("status", PROGRESS, cwd=repo).stdout
    assert (
        f"worktree {TREE.as_posix()} on branch {BRANCH} from {base[:12]} "
        "(active, folder missing)" in text
    )


# --- refusals ---------------------------------------------------------------------------------


def _no_run_written(where: Path) -> None:
    assert not (where / PROGRESS).exists()
    assert not (where / TREE).exists()


def test_not_a_repository(tmp_path: Path) -> None:
    where = tmp_path / "plain"
    where.mkdir()
    for name in ("change.prompt.md", "change.script.yaml"):
        shutil.copy(FIXTURES / name, where / name)
    done = flow(*RUN, cwd=where, env=flow_env(GIT_CEILING_DIRECTORIES=str(tmp_path)))
    assert done.returncode == 14
    assert f"error: {where}: {where.resolve()} is not inside a git repository" in done.stderr
    assert "Run `git init` and commit your files first, or run without --worktree." in (done.stderr)
    _no_run_written(where)


def test_a_dirty_base_is_refused_but_run_files_do_not_count(repo: Path) -> None:
    # A progress file committed (shared in a pull request) and changed since does not count.
    shared = repo / ".flow" / "runs" / "old" / "progress.md"
    shared.parent.mkdir(parents=True)
    shared.write_text("old\n")
    git(repo, "add", "--force", str(shared))
    git(repo, "commit", "--quiet", "-m", "a shared run")
    shared.write_text("changed\n")
    (repo / "untracked.txt").write_text("never counts\n")
    (repo / "hello.txt").write_text("Hello?\n")
    done = flow(*RUN, cwd=repo)
    assert done.returncode == 14
    assert (
        "has uncommitted changes to 1 tracked file(s): hello.txt; the run's worktree starts "
        "from HEAD and would not see them." in done.stderr
    )
    assert "Commit or stash them first" in done.stderr
    assert (repo / "hello.txt").read_text() == "Hello?\n"
    _no_run_written(repo)
    assert BRANCH not in _branches(repo)
    git(repo, "checkout", "--", "hello.txt")
    assert flow(*RUN, cwd=repo).returncode == 0


def test_an_existing_branch_is_refused(repo: Path) -> None:
    git(repo, "branch", BRANCH)
    done = flow(*RUN, cwd=repo)
    assert done.returncode == 14
    assert f"the branch {BRANCH} already exists in {repo.resolve()}" in done.stderr
    assert f"Delete it (`git branch -D {BRANCH}`)" in done.stderr
    _no_run_written(repo)


def test_a_progress_file_outside_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "progress.md"
    args = [a if a != PROGRESS else str(outside) for a in RUN]
    done = flow(*args, cwd=repo)
    assert done.returncode == 9
    assert "with --worktree the progress file must lie inside the repository" in done.stderr
    assert not outside.exists() and not (repo / ".flow" / "worktrees").exists()


def test_a_run_that_cannot_start_leaves_no_worktree_behind(repo: Path) -> None:
    done = flow(*RUN, "--provider", "no-such-provider", cwd=repo)
    assert done.returncode == 10, done.stderr
    _no_run_written(repo)
    assert BRANCH not in _branches(repo)
    assert git(repo, "worktree", "list").count("\n") == 1


def test_git_not_installed(repo: Path, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    done = flow(*RUN, cwd=repo, env=flow_env(PATH=str(empty)))
    assert done.returncode == 14
    assert "git is not installed (no `git` program on the PATH)" in done.stderr
    _no_run_written(repo)


def test_review_of_a_run_without_a_worktree(repo: Path) -> None:
    plain = ("run", "change.prompt.md", "--recording", "change.script.yaml", "--new")
    done = flow(*plain, "--progress", "plain/progress.md", "--no-snapshots", cwd=repo)
    assert done.returncode == 0, done.stderr
    refused = flow("review", "plain/progress.md", cwd=repo)
    assert refused.returncode == 14
    assert "was not started in a worktree" in refused.stderr
    # With its file snapshots (docs/spec.md 12), such a run is reviewed from them.
    (repo / "hello.txt").write_text("Hello\n", encoding="utf-8")
    done = flow(*plain, "--progress", "snap/progress.md", cwd=repo)
    assert done.returncode == 0, done.stderr
    shown = flow("review", "snap/progress.md", cwd=repo)
    assert shown.returncode == 0, shown.stderr
    assert "its file snapshots" in shown.stdout and "+Have a nice day." in shown.stdout
