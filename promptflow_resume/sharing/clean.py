"""``flow clean``: delete old runs, saying exactly what goes and how much space it frees.

A run is deleted when its status is one of the chosen ones and it was last updated longer ago
than the chosen age. What goes with it: when the run lives in its own folder (the default
layout, ``.flow/runs/<run-id>/progress.md``) that whole folder; otherwise the progress file and
the files flow keeps beside it (journal, lock, owner, sidecar folder, rewind backups, temp
files). A run whose lock is held by a live process is never touched, and a file that cannot be
read is skipped, never deleted.

What a run's file names outside its own files (docs/spec.md 10.10) goes only when this
machine's record (``base/madehere``) says flow made it for that file, and then the record's
folder, branch or ref goes, never a path the file gives: the run's snapshot ref and private
index with the run; its worktree and branch only when the caller allows (``worktrees``:
``--worktrees``, or a yes on a terminal), else the whole run is kept so that nothing is left
without a run to own it. Anything else a file names (a worktree, branch or ref from
elsewhere) is left as it is, and the report says so (``left``).

The dry run and the real run share one planning function, so the dry run lists exactly what the
real run deletes (unless a run changes in between: the real run re-checks each lock).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..base import madehere, yamlio
from ..base.clock import parse_iso
from ..base.errors import (
    FileNotFoundFlowError,
    FlowError,
    GitError,
    InputError,
    SpecialFileError,
)
from ..base.madehere import Made
from ..base.runids import valid_run_id
from ..base.safeopen import open_regular
from ..progress import journal_path, load_progress, lock_path, owner_path
from ..progress.frontmatter import normalize_yaml_values
from ..progress.model import RUN_STATUSES, WorktreeRef
from ..snapshots import remove_recorded
from .files import sidecar_folder

#: Where ``flow clean`` looks when no folder is given (relative to the working directory).
DEFAULT_ROOT = Path(".flow") / "runs"
#: Folders never searched for runs.
_SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".tox"})
#: Bytes read from the top of a candidate file to find its front matter.
_HEAD_BYTES = 1 << 20


@dataclass
class CleanItem:
    """One run that is (or, in a dry run, would be) deleted."""

    path: Path
    run_id: str
    status: str
    updated: str
    age_days: float
    #: What is removed: files and folders (a folder goes with everything inside it).
    targets: list[Path] = field(default_factory=list)
    bytes: int = 0
    #: The worktree and branch (``flow run --worktree``) that flow on this machine made for
    #: the run: removed with it (``worktrees`` allowed), as this machine's record names them.
    worktree: Made | None = None
    #: True when that worktree's folder and branch are gone already (removed with git).
    worktree_gone: bool = False
    #: Why the worktree or branch could not be removed (the run's files went all the same).
    worktree_problem: str | None = None
    #: The ref of the run's file snapshots (docs/spec.md 12) that flow on this machine took
    #: for the run, removed with it (and its private index).
    snapshots_ref: str | None = None
    snapshots: Made | None = None
    #: What the run's file names that stays, each with why (not made by flow here).
    left: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "path": str(self.path),
            "run_id": self.run_id,
            "status": self.status,
            "updated": self.updated,
            "age_days": round(self.age_days, 2),
            "targets": [str(t) for t in self.targets],
            "bytes": self.bytes,
            "worktree": worktree_path(self.worktree) if self.worktree else None,
            "branch": self.worktree.name if self.worktree else None,
            "worktree_problem": self.worktree_problem,
            "snapshots_ref": self.snapshots_ref,
            "left": list(self.left),
        }


@dataclass
class CleanReport:
    """The outcome of ``clean_runs``: what went (or would go), what was skipped and why."""

    root: Path
    dry_run: bool
    items: list[CleanItem] = field(default_factory=list)
    #: (progress file, why it was left alone): live runs and unreadable files.
    skipped: list[tuple[Path, str]] = field(default_factory=list)
    #: Runs that did not match the status or age filter.
    kept: int = 0

    @property
    def freed_bytes(self) -> int:
        """Bytes freed (or that would be freed)."""
        return sum(item.bytes for item in self.items)

    def to_dict(self) -> dict[str, Any]:
        """The ``flow clean --json`` document."""
        return {
            "root": str(self.root),
            "dry_run": self.dry_run,
            "deleted": [item.to_dict() for item in self.items],
            "skipped": [{"path": str(p), "reason": r} for p, r in self.skipped],
            "kept": self.kept,
            "freed_bytes": self.freed_bytes,
        }


def check_statuses(statuses: Iterable[str] | None) -> frozenset[str] | None:
    """The chosen statuses (None = any); an unknown one is an ``InputError``."""
    if statuses is None:
        return None
    chosen = frozenset(statuses)
    if "all" in chosen or "any" in chosen:
        return None
    unknown = sorted(chosen - set(RUN_STATUSES))
    if unknown:
        raise InputError(
            f"--status {unknown[0]!r} is not a run status.",
            hint=f"Use one of: {', '.join(RUN_STATUSES)}, or all.",
        )
    return chosen


def _candidates(root: Path) -> Iterator[Path]:
    """Files under ``root`` that start like a progress file (no symlinks followed)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".files"))
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            path = Path(folder) / name
            try:
                fd = open_regular(path, what="progress file")
            except (OSError, SpecialFileError):
                continue  # a link, a pipe or a device is not a run of this folder
            with os.fdopen(fd, "rb") as handle:
                start = handle.read(64)
            if start.startswith(b"---") and b"flow_progress" in start:
                yield path


def _summary(path: Path) -> dict[str, Any]:
    """``run_id``, ``status``, ``updated`` of a progress file, read from its front matter only.

    A file with a journal (left by a crash) is loaded fully, since the journal holds its
    latest state.
    """
    if journal_path(path).exists():
        run, _ = load_progress(path)
        tree = run.worktree
        snaps = run.snapshots
        return {
            "snapshots": None if snaps is None else {"root": snaps.root, "ref": snaps.ref},
            "run_id": run.run_id,
            "status": run.status,
            "updated": run.updated,
            "worktree": None
            if tree is None
            else {"path": tree.path, "branch": tree.branch, "base": tree.base, "state": tree.state},
        }
    with open(path, "rb") as handle:
        head = handle.read(_HEAD_BYTES).decode("utf-8", "replace").replace("\r\n", "\n")
    end = head.find("\n---\n", 3)
    if not head.startswith("---\n") or end == -1:
        raise InputError("its front matter could not be found.", path=path)
    data = normalize_yaml_values(yamlio.load(head[4 : end + 1], path=path, line_offset=1))
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), str) for k in ("run_id", "status", "updated")
    ):
        raise InputError("its front matter lacks run_id, status or updated.", path=path)
    return data


def worktree_path(made: Made) -> str:
    """A worktree's folder as its run's file writes it: relative to its repository's top."""
    return Path(os.path.relpath(made.folder, made.root)).as_posix()


#: Why something a run's file names is left.
_NOT_MADE = "flow on this machine did not make {them} for this run and this progress file"


def _worktree_of(item: CleanItem, value: Any) -> None:
    """The run's worktree and branch: to remove when this machine's flow made them for it,
    else a line in ``left``."""
    if not isinstance(value, dict) or value.get("state") == "discarded":
        return
    path, branch = value.get("path"), value.get("branch")
    if not isinstance(path, str) or not isinstance(branch, str):
        item.left.append("its worktree record: it names no folder and branch")
        return
    from ..gitworktree import branch_exists, made_worktree

    tree = WorktreeRef(path=path, branch=branch, base=str(value.get("base", "")))
    item.worktree = made_worktree(tree, item.run_id, item.path)
    if item.worktree is not None:
        made = item.worktree
        # Removed by hand already: nothing of it would go with the run, so nothing holds it.
        item.worktree_gone = not os.path.lexists(made.folder) and not branch_exists(
            Path(made.root), made.name
        )
    else:
        why = _NOT_MADE.format(them="them")
        item.left.append(f"worktree {path!r} and branch {branch!r}, left as they are: {why}")


def _snapshots_of(item: CleanItem, value: Any) -> None:
    """The run's snapshot ref: to remove when this machine's flow took the snapshots for it,
    else a line in ``left``."""
    ref = value.get("ref") if isinstance(value, dict) else None
    if not isinstance(ref, str):
        return
    # The record, not the file's snapshots.root, says where the ref is.
    found = madehere.find("snapshots", name=ref, run_id=item.run_id, progress=item.path)
    if found is None:
        why = _NOT_MADE.format(them="it")
        item.left.append(f"snapshot ref {ref!r}, left as it is: {why}")
        return
    item.snapshots_ref, item.snapshots = ref, found


def _size(path: Path) -> int:
    """Bytes under ``path`` (a file, or a folder walked without following symlinks)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0
    if not stat.S_ISDIR(info.st_mode):
        return info.st_size
    total = 0
    for folder, dirs, files in os.walk(path):
        for name in files + dirs:
            try:
                entry = os.lstat(Path(folder) / name)
            except FileNotFoundError:
                continue
            if not stat.S_ISDIR(entry.st_mode):
                total += entry.st_size
    return total


def run_files(path: Path, run_id: str, root: Path) -> list[Path]:
    """Everything that belongs to the run at ``path`` and exists, as deletion targets."""
    folder = path.parent
    own_folder = (
        path.name == "progress.md"
        and folder.name == run_id
        and folder.resolve() != root.resolve()
        and not folder.is_symlink()
        # Another run kept inside this folder (e.g. a fork written there) must survive.
        and all(other == path for other in _candidates(folder))
    )
    if own_folder:
        return [folder]
    targets = [
        path,
        journal_path(path),
        owner_path(path),
        sidecar_folder(path),
        *sorted(folder.glob(f"{path.name}.bak-*")),
        *sorted(folder.glob(f".{path.name}.*.tmp")),
        lock_path(path),
    ]
    return [t for t in targets if t.exists() or t.is_symlink()]


def plan_clean(
    root: Path,
    older_than: timedelta,
    statuses: frozenset[str] | None,
    now: datetime,
) -> CleanReport:
    """Decide what ``clean_runs`` deletes under ``root``; changes nothing."""
    from .common import is_live

    report = CleanReport(root=root, dry_run=True)
    for path in _candidates(root):
        try:
            info = _summary(path)
        except (FlowError, OSError, ValueError) as error:
            report.skipped.append((path, f"not readable as a progress file: {error}"))
            continue
        try:
            updated = parse_iso(info["updated"])
        except ValueError:
            report.skipped.append(
                (path, f"its updated time {info['updated']!r} is not a timestamp")
            )
            continue
        if not valid_run_id(info["run_id"]):
            # The id names folders and refs: one that is not an id names nothing of flow's.
            report.skipped.append(
                (path, f"its run_id {info['run_id']!r} is not a run id flow makes")
            )
            continue
        age = now - updated
        if (statuses is not None and info["status"] not in statuses) or age < older_than:
            report.kept += 1
            continue
        if is_live(path):
            report.skipped.append((path, "in use by a live flow process"))
            continue
        targets = run_files(path, str(info["run_id"]), root)
        item = CleanItem(
            path=path,
            run_id=str(info["run_id"]),
            status=str(info["status"]),
            updated=str(info["updated"]),
            age_days=age.total_seconds() / 86400,
            targets=targets,
            bytes=sum(_size(t) for t in targets),
        )
        try:
            _worktree_of(item, info.get("worktree"))
            _snapshots_of(item, info.get("snapshots"))
        except GitError as error:
            item.left.append(f"what its file names outside it, as git failed: {error}")
        report.items.append(item)
    return report


def _keep_worktree_runs(report: CleanReport) -> None:
    """Keep whole the runs whose worktree and branch would go with them: their removal was
    not allowed, and a worktree without its run's file would be nobody's."""
    kept: list[CleanItem] = []
    for item in report.items:
        if item.worktree is None or item.worktree_gone:
            kept.append(item)
            continue
        tree = item.worktree
        report.skipped.append(
            (
                item.path,
                f"kept with its worktree {worktree_path(tree)} and branch {tree.name}, which "
                "flow made here and which would go with it: flow clean --worktrees removes "
                "them too (merge first what you want to keep)",
            )
        )
    report.items = kept


def _delete(item: CleanItem) -> bool:
    """Delete one planned run while holding its lock; False when it became live meanwhile."""
    from ..base.runlock import LockHeld, RunLock

    lock_file = lock_path(item.path)
    lock = None
    if lock_file.exists():
        lock = RunLock(lock_file)
        try:
            lock.acquire()
        except (LockHeld, OSError):
            return False
    try:
        if item.snapshots is not None:
            # First: a worktree run's snapshots are of its worktree, and git runs there.
            try:
                remove_recorded(item.snapshots)
            except (FlowError, OSError) as error:
                item.left.append(f"snapshot ref {item.snapshots_ref}, not removed: {error}")
        if item.worktree is not None:
            from ..gitworktree import remove_made

            tree = item.worktree
            try:
                remove_made(tree)
            except (FlowError, OSError) as error:
                item.worktree_problem = (
                    f"its worktree {tree.folder} and branch {tree.name} were not removed: {error}"
                )
        for target in item.targets:
            if target == lock_file:
                continue  # last, after the lock is released
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            elif target.exists() or target.is_symlink():
                target.unlink()
    finally:
        if lock is not None:
            lock.release()
    if lock_file in item.targets and lock_file.exists():
        lock_file.unlink()
    return True


def clean_runs(
    root: str | Path | None = None,
    older_than: timedelta | str = timedelta(days=30),
    statuses: Iterable[str] | None = ("completed",),
    dry_run: bool = False,
    *,
    worktrees: bool | Callable[[list[CleanItem]], bool] = False,
    now: datetime | None = None,
) -> CleanReport:
    """Delete runs under ``root`` in ``statuses`` (None = any) not updated for ``older_than``.

    A run whose worktree and branch flow made here goes with them only when ``worktrees`` is
    true, or is a function that says yes when shown those runs (asked only in a real run, not
    a dry one); otherwise it is kept whole, with the reason in ``skipped``.
    """
    from ..base.durations import parse_age

    folder = Path(root) if root is not None else DEFAULT_ROOT
    if not folder.is_dir():
        raise FileNotFoundFlowError(
            f"no folder at {folder}.",
            path=folder,
            hint="Name the folder that holds the runs (by default .flow/runs in the project).",
        )
    age = parse_age(older_than) if isinstance(older_than, str) else older_than
    report = plan_clean(folder, age, check_statuses(statuses), now or datetime.now(timezone.utc))
    report.dry_run = dry_run
    with_trees = [i for i in report.items if i.worktree is not None and not i.worktree_gone]
    allowed = worktrees if isinstance(worktrees, bool) else False
    if with_trees and callable(worktrees) and not dry_run:
        allowed = worktrees(with_trees)
    if not allowed:
        _keep_worktree_runs(report)
    if dry_run:
        return report
    done: list[CleanItem] = []
    for item in report.items:
        if _delete(item):
            done.append(item)
        else:
            report.skipped.append((item.path, "in use by a live flow process"))
    report.items = done
    return report
