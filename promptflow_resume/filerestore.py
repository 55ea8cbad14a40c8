"""Restoring a run's files from a snapshot without harm: the plan, its checks, the file moves.

``SnapshotRepo.plan_restore`` fills a ``RestorePlan`` (what to write, delete, keep, and the
files someone else changed since); ``check_plan`` refuses a plan that would pass a symbolic
link or remove what is not the run's to make way; ``SnapshotRepo.restore`` then deletes with
``remove_run_file`` and makes way for what it writes with ``clear_way``::

    plan = RestorePlan(target=commit, before=tree)
    check_plan(root, plan)          # LinkInTheWayError, or plan.links / plan.cleared filled

The rules (docs/spec.md 12, 10.10): every path must be one a checkout writes (no ``..`` nor
``.git``), or the snapshot did not come from flow; nothing is written or removed through a
symbolic link (git's rule), not even with ``--force``; and what is not the run's is never
removed to make way.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base.confine import PathEscapeError, no_link_on_the_way, tree_path
from .base.errors import EXIT_FILES_CHANGED, EXIT_SNAPSHOT_MISSING, FilesError, FlowError


class FilesChangedError(FilesError):
    """A restore would overwrite or delete files changed since the run last touched them
    (``files``: those files)."""

    exit_code = EXIT_FILES_CHANGED


class SnapshotMissingError(FlowError):
    """A snapshot the progress file names is not in the repository (cleaned, or another
    clone): its files cannot be restored."""

    exit_code = EXIT_SNAPSHOT_MISSING


class SnapshotsNotMadeHereError(SnapshotMissingError):
    """The snapshots a progress file names were not taken by flow on this machine for that
    file, or a snapshot is not one of the run's (docs/spec.md 10.10): nothing is restored from
    them, in that repository or any other."""


class LinkInTheWayError(FilesError):
    """A restore would write or remove below a symbolic link it does not remove itself
    (``files``: those paths); nothing is ever written or removed through a link."""

    exit_code = EXIT_FILES_CHANGED


@dataclass
class RestorePlan:
    """What restoring the working tree to one snapshot does."""

    target: str
    #: Files written from the snapshot (created or overwritten).
    write: list[str] = field(default_factory=list)
    #: Files deleted: the run made them after the snapshot.
    delete: list[str] = field(default_factory=list)
    #: Files changed since the run last touched them that the restore would change.
    conflicts: list[str] = field(default_factory=list)
    #: Files the run never had, left as they are.
    kept: list[str] = field(default_factory=list)
    #: What is removed to make way for a file to write though no snapshot lists it, each with
    #: what it is: a folder where a file goes (with what is left in it), a file where a folder
    #: goes.
    cleared: dict[str, str] = field(default_factory=dict)
    #: Paths to write or delete that are symbolic links now, with where each points: the link
    #: itself is replaced or removed, never what it points to.
    links: dict[str, str] = field(default_factory=dict)
    #: The working tree when the plan was made, as a git tree.
    before: str = ""

    @property
    def empty(self) -> bool:
        """True when the working tree already matches the snapshot (for the run's files)."""
        return not (self.write or self.delete or self.conflicts)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "target": self.target,
            "write": list(self.write),
            "delete": list(self.delete),
            "conflicts": list(self.conflicts),
            "kept": list(self.kept),
            "cleared": dict(self.cleared),
            "links": dict(self.links),
        }


def _plain(path: str) -> str:
    try:
        tree_path(path)
    except PathEscapeError as error:
        raise SnapshotsNotMadeHereError(
            f"a snapshot of the restore names {error}: no snapshot flow takes holds such a "
            "path (git itself refuses it), so this one did not come from flow. Nothing was "
            "changed.",
            hint="Pass --no-files to move the conversation only.",
        ) from None
    return path


def check_plan(root: Path, plan: RestorePlan) -> None:
    """Refuse a plan that would pass a symbolic link or remove what is not the run's to make
    way, and name what it removes on the way.

    Every path must be one a checkout writes (``tree_path``). On the way to a path to write or
    delete, a symbolic link or a file is fine only when the plan deletes it itself first (it
    is the run's); any other (someone else's, as ``kept`` says, or an ignored one) refuses the
    whole plan with ``LinkInTheWayError``, even with ``force``: nothing is written or removed
    through a link, and what is not the run's is not removed to make way. A folder where a
    file goes is removed with what is left in it once the plan's deletions are done, when that
    is only what no snapshot lists (ignored files): it is named in ``cleared``. A path to
    write or delete that is a link itself is named in ``links``: the link is what goes."""
    for path in (*plan.write, *plan.delete, *plan.conflicts, *plan.kept):
        _plain(path)
    deleted = set(plan.delete)
    # Someone else's files: new ones the restore keeps, changed ones it does not delete.
    others = set(plan.kept) | (set(plan.conflicts) - deleted)
    blocked: list[str] = []
    for path in (*plan.delete, *plan.write):
        parts = path.split("/")
        for n in range(1, len(parts)):
            way = "/".join(parts[:n])
            try:
                mode = os.lstat(root / way).st_mode
            except FileNotFoundError:
                break
            if stat.S_ISDIR(mode):
                continue
            if way not in deleted:
                what = _what(root / way, mode)
                blocked.append(f"{path} ({way} is {what} that is not the run's)")
            break
        try:
            mode = os.lstat(root / path).st_mode
        except OSError:  # not there, or a file stands on the way (refused above)
            continue
        if stat.S_ISLNK(mode):
            plan.links[path] = os.readlink(root / path)
        elif stat.S_ISDIR(mode) and path not in deleted:
            left = _left_in(root, path, deleted)
            theirs = [p for p in left if p in others or (root / p).is_symlink()]
            if theirs:
                blocked.append(f"{path} (a folder holding {', '.join(theirs[:3])}, not the run's)")
            elif left:
                files = f"{len(left)} file{'s' if len(left) != 1 else ''}"
                plan.cleared[path] = f"a folder where a file goes, with {files} no snapshot lists"
    if blocked:
        raise LinkInTheWayError(
            f"restoring would pass or remove {len(blocked)} path(s) that are not the run's: "
            f"{', '.join(blocked[:10])}"
            + (f" and {len(blocked) - 10} more" if len(blocked) > 10 else "")
            + ". flow never writes or removes anything through a symbolic link (git's rule), "
            "nor removes what is not the run's to make way, not even with --force. Nothing "
            "was changed.",
            files=[b.split(" (", 1)[0] for b in blocked],
            hint="Move those away if you do not need them, then run again; or pass "
            "--no-files to move the conversation only.",
        )


def _what(path: Path, mode: int) -> str:
    if stat.S_ISLNK(mode):
        return f"a symbolic link to {os.readlink(path)}"
    return "a file"


def _left_in(root: Path, folder: str, deleted: set[str]) -> list[str]:
    """What is left in ``root/folder`` once ``deleted`` are gone (links not followed)."""
    left: list[str] = []
    for top, dirs, files in os.walk(root / folder):
        for name in files + [d for d in dirs if (Path(top) / d).is_symlink()]:
            rel = (Path(top) / name).relative_to(root).as_posix()
            if rel not in deleted:
                left.append(rel)
    return sorted(left)


def _way(root: Path, path: str) -> Path:
    """``root/path`` with no link on the way (checked again as the files change)."""
    try:
        return no_link_on_the_way(root, path)
    except PathEscapeError as error:
        raise LinkInTheWayError(
            f"restoring stopped at {path}: {error}. What was restored before it stays.",
            files=[path],
        ) from None


def remove_run_file(root: Path, path: str) -> None:
    """Delete one file of the run (a link itself, never what it points to) and the folders
    it leaves empty."""
    target = _way(root, path)
    try:
        target.unlink()
    except FileNotFoundError:
        return
    folder = target.parent
    while folder != root and not folder.is_symlink() and folder.is_dir():
        if any(folder.iterdir()):
            break
        folder.rmdir()
        folder = folder.parent


def clear_way(root: Path, path: str) -> None:
    """Make way for a file to write: a folder where it goes (the run made that folder after
    the snapshot, or it would not be in the way), a file where one of its folders goes.
    Nothing is followed: a link on the way stops the restore (``check_plan`` refused it)."""
    target = _way(root, path)
    if not target.is_symlink() and target.is_dir():
        shutil.rmtree(target)
    where = root
    for part in Path(path).parts[:-1]:
        where = where / part
        try:
            mode = os.lstat(where).st_mode
        except FileNotFoundError:
            break
        if not stat.S_ISDIR(mode):
            where.unlink()
            break
