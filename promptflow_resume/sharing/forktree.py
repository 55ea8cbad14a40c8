"""A fork of a run in a git worktree gets a worktree and branch of its own (docs/spec.md 9.2).

Two runs working in one worktree would overwrite each other's files and commit to each
other's branch, so ``flow fork`` never copies the ``worktree:`` record as it is. The fork's
branch ``flow/<fork-id>`` is made from the commit of the original's branch at the start of the
step the fork runs again: the last of the commits the original made for the steps the fork
keeps (``flow run <id>: step <step-id>``, one per completed step), or the base when they made
none. Uncommitted changes in the original's worktree belong to a step that did not complete,
which the fork runs again, so they are left out on purpose.

When the branch holds no such point (a commit of a kept step after a commit of a later step or
one flow did not make: the run was rewound, or someone committed in its worktree), or the
original's branch is gone, the fork is refused: a worktree made from a guess would not be the
state the fork's conversation describes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..base.errors import GitError, InputError
from ..gitworktree import (
    WORKTREES_DIR,
    add_worktree_at,
    branch_exists,
    branch_for,
    checked_folder,
    git,
    relative_to_root,
    repository_root,
)
from ..progress.model import Run, WorktreeRef

#: The message of a step's commit in a run's worktree (``worktree.step_committer``).
_STEP_COMMIT = re.compile(r"flow run \S+: step (\S+)")


def fork_point(tree: WorktreeRef, root: Path, kept: Sequence[str], *, path: Path, step: str) -> str:
    """The commit of ``tree``'s branch at the start of ``step``: after the kept steps' commits.

    GitError when the branch is gone or holds no such commit (see the module docstring).
    """
    if not branch_exists(root, tree.branch):
        raise GitError(
            f"the run's branch {tree.branch} no longer exists in {root}; a fork in a worktree "
            f"starts from that branch at the start of step {step!r}.",
            path=path,
            field="$.worktree.branch",
            hint="Restore the branch, or start a new run.",
        )
    log = git(
        ["log", "--first-parent", "--reverse", "--format=%H %s", f"{tree.base}..{tree.branch}"],
        root,
    ).stdout
    point = tree.base
    later: str | None = None
    for line in log.splitlines():
        commit, _, subject = line.partition(" ")
        match = _STEP_COMMIT.fullmatch(subject)
        if match is not None and match.group(1) in kept:
            if later is not None:
                raise GitError(
                    f"the run's branch {tree.branch} has no commit that is the start of step "
                    f"{step!r}: commit {commit[:12]} of the earlier step {match.group(1)!r} "
                    f"comes after {later}, so the branch mixes work of steps the fork keeps "
                    "with work it would run again.",
                    path=path,
                    field="$.worktree",
                    hint="Fork at a later step, or start a new run.",
                )
            point = commit
        elif later is None:
            later = f"commit {commit[:12]} ({subject})"
    return point


def _inside_repository(path: Path, root: Path) -> bool:
    target = path.resolve()
    return root in target.parents and (root / WORKTREES_DIR) not in target.parents


def fork_worktree(
    run: Run, source: Path, output: Path, *, run_id: str, kept: Sequence[str], step: str
) -> tuple[WorktreeRef, Path] | None:
    """For a run in a worktree: the fork's own worktree record and folder (None otherwise).

    The branch ``flow/<run_id>`` is made at ``fork_point``; the record keeps the original's
    ``base``, so ``flow review`` of the fork shows the kept steps' changes with its own.
    """
    tree = run.worktree
    if tree is None:
        return None
    if tree.state == "discarded":
        raise GitError(
            f"the run's worktree and branch {tree.branch} were discarded (flow discard), so "
            f"the files at the start of step {step!r} are gone; the run cannot be forked.",
            path=source,
            field="$.worktree.state",
            hint="Start a new run.",
        )
    root = repository_root(source.resolve().parent)
    # The branch and folder the file names are used only where flow puts them (docs/spec.md
    # 10.10): a fork never starts from a branch of the person's own that a file names.
    checked_folder(tree, root, source)
    if not _inside_repository(output, root):
        raise InputError(
            f"the fork of a run in a worktree must lie inside the repository {root} (outside "
            f"{WORKTREES_DIR.as_posix()}/): {output} does not; its worktree is found from it.",
            path=output,
            hint="Leave out -o (the fork goes beside the original), or name a path inside the "
            "repository.",
        )
    point = fork_point(tree, root, kept, path=source, step=step)
    folder = add_worktree_at(root, run_id, point, progress=output)
    ref = WorktreeRef(
        path=relative_to_root(folder, root), branch=branch_for(run_id), base=tree.base
    )
    return ref, folder
