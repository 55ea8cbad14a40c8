"""Putting a run's files back as they were at a point of its transcript (rewind, fork).

The point is the first entry a rewind or fork drops (``cut``): the files go back to the run's
last snapshot before it (docs/spec.md 12). Before anything is written, the working tree is
compared with the run's latest snapshot: a file changed since the run last touched it is never
overwritten or deleted unless ``force`` (``FilesChangedError`` names it), and a file the run
never had is left alone. "Since the run last touched it" means since the tip of the run's ref:
its last snapshot, or the restored tree of its last rewind. Only snapshots flow on this
machine took for this progress file are restored, in the repository its record names, and only
commits of the run's own ref (``snapshots.trusted_repo``, docs/spec.md 10.10)::

    choice = FilesChoice(force=False, confirm=ask_on_terminal)
    restored = restore_files(run, progress_path, cut, choice)   # None: nothing recorded
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.errors import EXIT_INPUT, FlowError
from ..filerestore import (
    FilesChangedError,
    RestorePlan,
    SnapshotMissingError,
    SnapshotsNotMadeHereError,
)
from ..progress.filesnapshots import FileSnapshot
from ..progress.model import Run
from ..snapshots import SnapshotRepo, trusted_repo

#: Files named in an error message before "and N more".
_LISTED = 10


class RestoreNotConfirmedError(FlowError):
    """The files would change and nobody said yes (no terminal and no ``--yes``, or no)."""

    exit_code = EXIT_INPUT


@dataclass
class FilesChoice:
    """What to do with the files: restore them (``--no-files``: no), overwrite files changed
    since the run touched them (``--force``), and who confirms the plan (None: go on, as
    with ``--yes``)."""

    restore: bool = True
    force: bool = False
    confirm: Callable[[RestorePlan, Path], bool] | None = None


@dataclass
class FilesRestored:
    """What a restore did: the repository, the snapshot and the plan carried out."""

    root: Path
    snapshot: FileSnapshot
    plan: RestorePlan

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (``--json`` of rewind and fork: ``files``)."""
        return {
            "root": str(self.root),
            "entry": self.snapshot.entry,
            "commit": self.snapshot.commit,
            **self.plan.to_dict(),
        }

    def summary(self) -> str:
        """``3 written, 1 deleted`` (or ``already as they were``)."""
        if self.plan.empty:
            return "already as they were"
        return f"{len(self.plan.write)} written, {len(self.plan.delete)} deleted"


def listed(paths: list[str]) -> str:
    """Up to ten paths, then ``and N more``."""
    shown = ", ".join(paths[:_LISTED])
    return shown + (f" and {len(paths) - _LISTED} more" if len(paths) > _LISTED else "")


def plan_files(
    run: Run, progress: Path, cut: int | None, choice: FilesChoice
) -> tuple[SnapshotRepo, FileSnapshot, RestorePlan] | None:
    """The restore of the files to the snapshot before entry ``cut`` (None: nothing is cut,
    the latest), checked: raises ``FilesChangedError`` for files changed by others (unless
    ``force``). None when there is nothing to restore from (no snapshots, or ``--no-files``)."""
    record = run.snapshots
    if not choice.restore or record is None:
        return None
    latest = record.last_taken()
    target = record.last_taken(before=cut) if cut is not None else latest
    if latest is None or target is None or latest.commit is None or target.commit is None:
        return None
    repo = trusted_repo(record, run.run_id, progress)
    root = repo.root
    tip = repo.tip()
    if tip is None or not repo.has(target.commit):
        raise SnapshotMissingError(
            f"the snapshot {target.commit[:12]} of entry {target.entry} is not in the "
            f"repository at {root} (its ref {repo.ref} was removed, or git collected it).",
            path=progress,
            field="$.snapshots",
            hint="Rewind or fork without restoring files: --no-files.",
        )
    if not repo.in_chain(target.commit):
        raise SnapshotsNotMadeHereError(
            f"the snapshot {target.commit[:12]} that entry {target.entry} names is not one of "
            f"the snapshots flow took for run {run.run_id} (its ref {repo.ref} does not lead to "
            "it), so its files are not restored. Nothing was changed.",
            path=progress,
            field="$.snapshots.calls",
            hint="Pass --no-files to move the conversation only.",
        )
    # The ref's tip is what the run (or a restore) last left, archived calls included.
    plan = repo.plan_restore(target.commit, tip, force=choice.force)
    if plan.conflicts and not choice.force:
        raise FilesChangedError(
            f"{len(plan.conflicts)} file(s) in {root} changed since run {run.run_id} last "
            f"touched them, and restoring the snapshot of entry {target.entry} would overwrite "
            f"or delete them: {listed(plan.conflicts)}. Nothing was changed.",
            files=plan.conflicts,
            hint="Commit or copy those changes first, then run again with --force to "
            "overwrite them; or pass --no-files to move the conversation only.",
        )
    return repo, target, plan


def apply_files(
    planned: tuple[SnapshotRepo, FileSnapshot, RestorePlan], choice: FilesChoice
) -> FilesRestored:
    """Carry out a plan from ``plan_files`` once confirmed."""
    repo, target, plan = planned
    if not plan.empty and choice.confirm is not None and not choice.confirm(plan, repo.root):
        raise RestoreNotConfirmedError(
            f"restoring the files of {repo.root} to the snapshot of entry {target.entry} was "
            "not confirmed; nothing was changed.",
            hint="Pass --yes to restore without asking (also where there is no terminal), or "
            "--no-files to move the conversation only.",
        )
    if not plan.empty:
        repo.restore(plan)
        repo.mark(f"flow {repo.run_id}: files restored to entry {target.entry}")
    return FilesRestored(root=repo.root, snapshot=target, plan=plan)
