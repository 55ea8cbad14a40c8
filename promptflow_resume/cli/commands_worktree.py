"""``flow review``, ``flow merge`` and ``flow discard``: runs made with ``flow run --worktree``."""

from __future__ import annotations

import typer

from ..base.wording import count
from .app import app, out, print_json
from .options import ProgressArg, SummaryJson


@app.command("review")
def review_command(
    progress: ProgressArg,
    stat: bool = typer.Option(False, "--stat", help="Only the list of files, not the diff."),
    as_json: bool = typer.Option(
        False, "--json", help="Print files, insertions, deletions and the diff as JSON."
    ),
) -> int:
    """What a run in a worktree changed against its base commit: a stat and the diff.

    Changes not committed to the run's branch yet (a step that was stopped) are included.
    A run without a worktree is reviewed from its file snapshots (base to latest).
    Nothing is changed. Exit code 14 for a git problem (docs/spec.md §9).
    """
    from ..worktree import review_run

    review = review_run(progress)
    if as_json:
        print_json(review.to_dict())
        return 0
    tree = review.tree
    pending = ", uncommitted changes included" if review.uncommitted else ""
    if review.from_snapshots:
        out(
            f"run {review.run_id}: its file snapshots, base {tree.base[:12]} to the latest "
            f"({count(review.commits, 'snapshot')} with changes; {tree.branch}; files in "
            f"{review.folder})"
        )
    else:
        out(
            f"run {review.run_id}: branch {tree.branch} against base {tree.base[:12]} "
            f"({count(review.commits, 'commit')}{pending}; worktree {tree.path}, {tree.state})"
        )
    if not review.files:
        out("no changes")
        return 0
    out(review.stat.rstrip("\n"))
    if not stat:
        out()
        out(review.diff.rstrip("\n"))
    return 0


@app.command("merge")
def merge_command(
    progress: ProgressArg,
    squash: bool = typer.Option(
        False, "--squash", help="One commit with all the run's changes, not a merge commit."
    ),
    as_json: SummaryJson = False,
) -> int:
    """Bring a worktree run's changes into the current branch of the main checkout.

    Changes left uncommitted in the worktree are committed to the run's branch first. A
    conflict aborts the merge: the files are named, the main checkout is left as it was, and
    the worktree and branch stay (exit code 14). The main checkout must be clean.
    """
    from ..worktree import merge_run

    result = merge_run(progress, squash=squash)
    if as_json:
        print_json(result.to_dict())
        return 0
    if result.leftover_commit:
        out(
            f"committed the worktree's uncommitted changes to {result.branch} "
            f"({result.leftover_commit[:12]})"
        )
    if result.commit is None:
        out(f"nothing to merge: {result.into} already has the changes of {result.branch}")
    else:
        how = "squashed into one commit on" if squash else "merged into"
        out(
            f"{result.branch} {how} {result.into} ({result.commit[:12]}, "
            f"{count(len(result.files), 'file')} changed)"
        )
    out(f"Next: flow discard {progress}  (removes the worktree and the branch)")
    return 0


@app.command("discard")
def discard_command(progress: ProgressArg, as_json: SummaryJson = False) -> int:
    """Remove a worktree run's worktree and branch; its changes are gone, unless merged.

    The progress file stays (marked discarded) as the record of what the run did; the run
    cannot be resumed afterwards.
    """
    from ..worktree import discard_run

    result = discard_run(progress)
    if as_json:
        print_json(result.to_dict())
        return 0
    out(f"discarded: worktree {result.worktree} and branch {result.branch} removed")
    return 0
