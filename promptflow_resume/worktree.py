"""Runs that work in their own git worktree: ``flow review``, ``flow merge``, ``flow discard``.

A run started with ``flow run --worktree`` made its changes on its own branch in its own
worktree (made, attached and committed to by ``gitworktree``); a run in the checkout itself
recorded file snapshots (``snapshots``). Either can be reviewed; a worktree's branch can be
merged into the main checkout's current branch, or discarded with its worktree::

    review = review_run(progress_path)                      # what the run changed
    result = merge_run(progress_path, squash=False)         # into the current branch
    discard_run(progress_path)                              # worktree and branch removed

The rules:

- Review includes the changes a worktree holds that are not committed yet (staged into a
  temporary index, the worktree's own left alone). A run reviewed from its snapshots shows only
  the paths its own calls changed: what someone else changed between attempts is theirs.
- A merge commits what the worktree left uncommitted first, and refuses a main checkout with
  uncommitted changes. A merge that conflicts is aborted: the main checkout is left as it was,
  the worktree and the branch stay, and the error names the files.
- Merge and discard act only on a worktree and branch that this machine's record says flow made
  for the run's progress file (``made_worktree``). The progress file stays, marked
  ``merged`` or ``discarded``.

Every git command runs as ``git`` with an argument list, never through a shell.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base.clock import now_iso
from .base.errors import FilesError, GitError
from .gitworktree import (
    branch_exists,
    checked_folder,
    commit_all,
    git,
    head_commit,
    identity_options,
    is_worktree_of,
    last_lines,
    listed,
    not_made_here,
    repository_root,
    uncommitted_files,
)

# This machine's record of a run's worktree, part of this module's library face
# (docs/spec.md 9.7): ``made_worktree`` finds it, ``remove_made`` removes what it names.
from .gitworktree import made_worktree as made_worktree
from .gitworktree import remove_made as remove_made
from .progress import ProgressStore, load_progress
from .progress.location import progress_file
from .progress.model import Run, WorktreeRef, WorktreeState


class MergeConflictError(FilesError, GitError):
    """``flow merge`` met a conflict; the merge was aborted and nothing changed (``files``:
    the conflicting ones)."""


@dataclass
class FileChange:
    """One file the run changed: lines added and removed (None for a binary file)."""

    path: str
    insertions: int | None
    deletions: int | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {"path": self.path, "insertions": self.insertions, "deletions": self.deletions}


@dataclass
class Review:
    """What a run changed against its base: for ``flow review``."""

    run_id: str
    tree: WorktreeRef
    folder: Path
    #: True when the worktree holds changes not committed to the branch yet (included).
    uncommitted: bool
    files: list[FileChange] = field(default_factory=list)
    stat: str = ""
    diff: str = ""
    commits: int = 0
    #: True for a run without a worktree, reviewed from its file snapshots (docs/spec.md 12):
    #: ``tree.branch`` is then the snapshots' ref and ``tree.base`` the base snapshot.
    from_snapshots: bool = False

    @property
    def insertions(self) -> int:
        """Lines added, over all text files."""
        return sum(f.insertions or 0 for f in self.files)

    @property
    def deletions(self) -> int:
        """Lines removed, over all text files."""
        return sum(f.deletions or 0 for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        """The ``flow review --json`` document."""
        return {
            "run_id": self.run_id,
            "worktree": self.tree.path,
            "branch": self.tree.branch,
            "base": self.tree.base,
            "state": self.tree.state,
            "commits": self.commits,
            "uncommitted": self.uncommitted,
            "from_snapshots": self.from_snapshots,
            "files": [f.to_dict() for f in self.files],
            "insertions": self.insertions,
            "deletions": self.deletions,
            "diff": self.diff,
        }


def _run_with_tree(progress_path: Path) -> tuple[Run, WorktreeRef]:
    run, _ = load_progress(progress_path)
    if run.worktree is None:
        raise GitError(
            f"run {run.run_id} was not started in a worktree; it changed the files of the "
            "checkout directly, and recorded no file snapshots to review them from.",
            path=progress_path,
            field="$.worktree",
            hint="Only runs started with `flow run --worktree` can be merged or discarded; "
            "runs with file snapshots (in a git repository, without --no-snapshots) can be "
            "reviewed.",
        )
    return run, run.worktree


def _refuse_discarded(tree: WorktreeRef, progress_path: Path) -> None:
    if tree.state == "discarded":
        raise GitError(
            f"this run's worktree and branch {tree.branch} were discarded; there is nothing "
            "left to review or merge.",
            path=progress_path,
            field="$.worktree.state",
        )


def _numstat(text: str) -> list[FileChange]:
    changes: list[FileChange] = []
    for line in text.splitlines():
        added, removed, path = [*line.split("\t", 2), "", ""][:3]
        if not path:
            continue
        changes.append(
            FileChange(
                path=path,
                insertions=None if added == "-" else int(added),
                deletions=None if removed == "-" else int(removed),
            )
        )
    return changes


def review_run(progress_path: str | Path) -> Review:
    """What the run at ``progress_path`` changed against its base, uncommitted changes too.

    The worktree's own index is left alone: its files are staged into a temporary index.
    Without the worktree folder, the branch is compared with the base.
    """
    path = progress_file(progress_path)
    run, _ = load_progress(path)
    if run.worktree is None and run.snapshots is not None:
        return _review_snapshots(run, path)
    run, tree = _run_with_tree(path)
    _refuse_discarded(tree, path)
    root = repository_root(path.resolve().parent)
    folder = checked_folder(tree, root, path)
    if not branch_exists(root, tree.branch):
        raise GitError(
            f"the run's branch {tree.branch} no longer exists.", path=path, field="$.worktree"
        )
    commits = int(git(["rev-list", "--count", f"{tree.base}..{tree.branch}"], root).stdout)
    if not is_worktree_of(folder, root):
        target = [tree.base, tree.branch]
        return Review(
            run_id=run.run_id,
            tree=tree,
            folder=folder,
            uncommitted=False,
            files=_numstat(git(["diff", "--numstat", *target], root).stdout),
            stat=git(["diff", "--stat", *target], root).stdout,
            diff=git(["diff", *target], root).stdout,
            commits=commits,
        )
    uncommitted = bool(git(["status", "--porcelain"], folder).stdout.strip())
    with tempfile.TemporaryDirectory(prefix="flow-review-") as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(["read-tree", "HEAD"], folder, env=env)
        git(["add", "--all"], folder, env=env)
        target = ["--cached", tree.base]
        return Review(
            run_id=run.run_id,
            tree=tree,
            folder=folder,
            uncommitted=uncommitted,
            files=_numstat(git(["diff", "--numstat", *target], folder, env=env).stdout),
            stat=git(["diff", "--stat", *target], folder, env=env).stdout,
            diff=git(["diff", *target], folder, env=env).stdout,
            commits=commits,
        )


def _review_snapshots(run: Run, path: Path) -> Review:
    """What a run in the checkout itself changed: its base snapshot against its latest."""
    from .snapshots import trusted_repo

    assert run.snapshots is not None
    taken = [s for s in run.snapshots.calls if s.commit is not None]
    # Only snapshots flow took here for this file, of the repository its record names.
    repo = trusted_repo(run.snapshots, run.run_id, path)
    root = repo.root
    base, latest = taken[0].commit or "", taken[-1].commit or ""
    for commit in (base, latest):
        if not repo.has(commit) or not repo.in_chain(commit):
            raise GitError(
                f"the snapshot {commit[:12]} of run {run.run_id} is not one of the run's "
                f"snapshots in the repository at {root} (removed by `flow clean`, another "
                "clone, or not the run's).",
                path=path,
                field="$.snapshots",
            )
    # Only the paths the run's calls changed: a record without a call holds what someone
    # else changed between attempts, which is theirs, not the run's.
    paths: set[str] = set()
    for before, snap in itertools.pairwise(taken):
        if snap.call_id is not None and snap.commit != before.commit:
            names = git(["diff", "--name-only", "-z", before.commit or "", snap.commit or ""], root)
            paths.update(p for p in names.stdout.split("\0") if p)
    target = [base, latest, "--", *sorted(paths)] if paths else [base, base]
    return Review(
        run_id=run.run_id,
        tree=WorktreeRef(path=run.snapshots.root, branch=run.snapshots.ref, base=base),
        folder=root,
        uncommitted=False,
        files=_numstat(git(["diff", "--numstat", *target], root).stdout),
        stat=git(["diff", "--stat", *target], root).stdout,
        diff=git(["diff", *target], root).stdout,
        commits=len({s.commit for s in taken[1:] if s.call_id is not None} - {base}),
        from_snapshots=True,
    )


@dataclass
class MergeResult:
    """How ``flow merge`` went."""

    run_id: str
    branch: str
    #: The branch merged into (``HEAD`` when the main checkout is detached).
    into: str
    squash: bool
    #: The commit made by the merge, or None when there was nothing to merge.
    commit: str | None
    files: list[str] = field(default_factory=list)
    #: The commit made of changes left uncommitted in the worktree, before merging.
    leftover_commit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The ``flow merge --json`` document."""
        return {
            "run_id": self.run_id,
            "branch": self.branch,
            "into": self.into,
            "squash": self.squash,
            "commit": self.commit,
            "files": list(self.files),
            "leftover_commit": self.leftover_commit,
        }


def _set_state(store: ProgressStore, run: Run, state: WorktreeState) -> None:
    assert run.worktree is not None
    run.worktree.state = state
    run.updated = now_iso()
    store.checkpoint(run)


def merge_run(progress_path: str | Path, *, squash: bool = False) -> MergeResult:
    """Merge the run's branch into the main checkout's current branch.

    Changes left uncommitted in the worktree are committed to the branch first. A conflict
    aborts the merge (the main checkout is as it was; worktree and branch stay) and raises
    ``MergeConflictError`` naming the files. The run is marked ``merged``.
    """
    path = progress_file(progress_path)
    _run_with_tree(path)  # a clear error before taking the lock
    store, run, _ = ProgressStore.open(path)
    try:
        tree = run.worktree
        assert tree is not None
        _refuse_discarded(tree, path)
        root = repository_root(path.resolve().parent)
        folder = checked_folder(tree, root, path)
        if made_worktree(tree, run.run_id, path) is None:
            raise not_made_here(tree, path, "flow merge brings in")
        if not branch_exists(root, tree.branch):
            raise GitError(
                f"the run's branch {tree.branch} no longer exists; there is nothing to merge.",
                path=path,
                field="$.worktree",
            )
        leftover = (
            commit_all(folder, f"flow run {run.run_id}: uncommitted changes at merge")
            if is_worktree_of(folder, root)
            else None
        )
        dirty = uncommitted_files(root)
        if dirty:
            raise GitError(
                f"the main checkout {root} has uncommitted changes to {listed(dirty)}; merging "
                "into it could mix them with the run's changes.",
                path=root,
                hint="Commit or stash them first, then merge again.",
            )
        into = git(["symbolic-ref", "--short", "-q", "HEAD"], root, check=False).stdout.strip()
        into = into or "HEAD"
        before = head_commit(root)
        result = MergeResult(
            run_id=run.run_id,
            branch=tree.branch,
            into=into,
            squash=squash,
            commit=None,
            leftover_commit=leftover,
        )
        merged_already = git(
            ["merge-base", "--is-ancestor", tree.branch, "HEAD"], root, check=False
        )
        if merged_already.returncode != 0:
            if squash:
                _merge_squash(root, run.run_id, tree.branch, into, tree.path)
            else:
                _merge(root, run.run_id, tree.branch, into, tree.path)
            after = head_commit(root)
            if after != before:
                result.commit = after
                result.files = [
                    line
                    for line in git(
                        ["diff", "--name-only", before, after], root
                    ).stdout.splitlines()
                    if line
                ]
        _set_state(store, run, "merged")
        return result
    finally:
        store.close()


def _conflicted(root: Path) -> list[str]:
    text = git(["diff", "--name-only", "--diff-filter=U"], root, check=False).stdout
    return [line for line in text.splitlines() if line]


def _conflict_error(branch: str, into: str, files: list[str], tree_path: str) -> MergeConflictError:
    return MergeConflictError(
        f"merging {branch} into {into} conflicts in {len(files)} file(s): {listed(files)}. "
        f"The merge was aborted: {into} and the main checkout are as they were, and the run's "
        "worktree and branch are kept.",
        files=files,
        hint=f"Either resolve it here (`git merge {branch}`, fix the files, commit), or in the "
        f"run's worktree (`git -C {tree_path} merge {into}`, fix, commit) and run flow merge "
        "again.",
    )


def _merge(root: Path, run_id: str, branch: str, into: str, tree_path: str) -> None:
    message = f"Merge run {run_id} ({branch})"
    done = git(
        [
            *identity_options(root),
            "merge",
            "--no-ff",
            "--no-edit",
            "--no-verify",
            "-m",
            message,
            branch,
        ],
        root,
        check=False,
    )
    if done.returncode == 0:
        return
    files = _conflicted(root)
    git(["merge", "--abort"], root, check=False)
    if files:
        raise _conflict_error(branch, into, files, tree_path)
    raise GitError(
        f"`git merge {branch}` failed in {root}: {last_lines(done.stderr or done.stdout)}"
    )


def _merge_squash(root: Path, run_id: str, branch: str, into: str, tree_path: str) -> None:
    # git wants an identity for a squash merge too (it records one for the merge state).
    done = git([*identity_options(root), "merge", "--squash", branch], root, check=False)
    if done.returncode != 0:
        files = _conflicted(root)
        # A squash merge leaves no MERGE_HEAD to abort: put index and files back instead.
        git(["reset", "--merge"], root, check=False)
        if files:
            raise _conflict_error(branch, into, files, tree_path)
        raise GitError(
            f"`git merge --squash {branch}` failed in {root}: "
            f"{last_lines(done.stderr or done.stdout)}"
        )
    if git(["diff", "--cached", "--quiet"], root, check=False).returncode == 0:
        return  # the branch's changes are already here: nothing to commit
    message = f"Run {run_id} (squashed from {branch})"
    git([*identity_options(root), "commit", "--quiet", "--no-verify", "-m", message], root)


@dataclass(frozen=True)
class DiscardResult:
    """What ``flow discard`` removed: the run's worktree and its branch."""

    #: The run's progress file, which stays (marked discarded).
    path: Path
    worktree: str
    branch: str

    def to_dict(self) -> dict[str, Any]:
        """The ``flow discard --json`` document: ``path``, ``worktree``, ``branch``."""
        return {"path": str(self.path), "worktree": self.worktree, "branch": self.branch}


def discard_run(progress_path: str | Path) -> DiscardResult:
    """Remove the run's worktree (uncommitted changes with it) and its branch; mark it
    ``discarded``. The progress file stays, as the record of what the run did. Only a worktree
    and branch that flow on this machine made for this file are removed (``made_worktree``);
    any other is refused (GitError), nothing removed."""
    path = progress_file(progress_path)
    _run_with_tree(path)
    store, run, _ = ProgressStore.open(path)
    try:
        tree = run.worktree
        assert tree is not None
        if tree.state == "discarded":
            raise GitError(
                f"this run's worktree and branch {tree.branch} were discarded already.",
                path=path,
                field="$.worktree.state",
            )
        made = made_worktree(tree, run.run_id, path)
        if made is None:
            raise not_made_here(tree, path, "flow discard removes")
        remove_made(made)
        _set_state(store, run, "discarded")
        return DiscardResult(path=path, worktree=tree.path, branch=tree.branch)
    finally:
        store.close()
