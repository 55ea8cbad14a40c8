"""The folders ``flow serve`` serves, and how a URL names a run in them.

A run's key is ``<folder number>/<path inside that folder>`` (``0/.flow/runs/r1/progress.md``),
so a page's relative links (a sidecar next to its progress file) resolve to files of the same
folder. ``Served.file`` turns a key back into a path, and refuses anything that leaves the
folders: ``..``, absolute paths, links pointing outside, hidden files::

    served = Served.of([Path("project")])
    for row in served.rows():
        print(row.key, row.summary.status)
    path = served.progress_file(row.key)
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..base.errors import FileNotFoundFlowError
from ..detect import RunSummary, list_run_trees
from ..progress.children import ChildNode, is_child_path

#: What needs a person, by effective status.
NEEDS = {
    "awaiting_approval": "approval",
    "awaiting_input": "question",
    "needs_review": "review",
}
_BATCH_ROW = re.compile(r"^(?:(?P<batch>.+)/)?rows/\d{4,}/progress\.md$")


class NotServed(Exception):
    """A key that names nothing ``flow serve`` may read."""


def is_progress_name(name: str) -> bool:
    """``progress.md`` or ``<name>.progress.md``."""
    return name == "progress.md" or name.endswith(".progress.md")


@dataclass(frozen=True)
class Row:
    """One run of the list: its summary, key, child runs, what it waits for, its batch."""

    key: str
    summary: RunSummary
    children: list[ChildNode]
    #: ``approval``, ``question``, ``review``, ``worktree`` (changes to review), or None.
    needs: str | None
    #: The batch's folder (inside the served one) when the run is a batch's row, else None.
    batch: str | None = None

    @property
    def tokens(self) -> int:
        """Input plus output tokens so far."""
        return self.summary.tokens


@dataclass(frozen=True)
class Served:
    """The served folders, resolved (links followed) once at start."""

    roots: tuple[Path, ...]
    #: The folder ``flow serve`` started in: default folder, and where resumes run.
    cwd: Path = field(default_factory=Path.cwd)

    @classmethod
    def of(cls, folders: Sequence[Path], cwd: Path | None = None) -> Served:
        """The folders given (default: the current one); a missing one is an error (exit 5)."""
        here = (cwd or Path.cwd()).resolve()
        roots = []
        for folder in folders or [here]:
            target = folder if folder.is_absolute() else here / folder
            if not target.is_dir():
                raise FileNotFoundFlowError(
                    "no such folder.",
                    path=folder,
                    hint="Name folders holding runs (the default layout .flow/runs, or any "
                    "progress.md below them).",
                )
            roots.append(target.resolve())
        return cls(tuple(roots), here)

    def key(self, path: Path) -> str:
        """The URL key of a file inside a served folder."""
        resolved = path.resolve()
        for i, root in enumerate(self.roots):
            if resolved.is_relative_to(root):
                return f"{i}/{resolved.relative_to(root).as_posix()}"
        raise NotServed(str(path))

    def file(self, key: str) -> Path:
        """The file a key names, confined to its served folder; ``NotServed`` otherwise."""
        number, _, rest = key.partition("/")
        if not number.isdigit() or int(number) >= len(self.roots) or not rest:
            raise NotServed(key)
        parts = rest.split("/")
        if any(p in ("", ".", "..") or "\\" in p or "\x00" in p for p in parts):
            raise NotServed(key)
        root = self.roots[int(number)]
        try:
            resolved = root.joinpath(*parts).resolve(strict=True)
        except (OSError, RuntimeError):
            raise NotServed(key) from None
        if not resolved.is_relative_to(root) or not resolved.is_file():
            raise NotServed(key)
        return resolved

    def progress_file(self, key: str) -> Path:
        """The progress file a key names (``NotServed`` for any other file)."""
        path = self.file(key)
        if not is_progress_name(path.name):
            raise NotServed(key)
        return path

    def sidecar_file(self, key: str) -> Path:
        """A file beside a run (its sidecars): inside a folder holding a progress file, not
        hidden, not a run's own bookkeeping (lock, owner, journal)."""
        path = self.file(key)
        folder = path.parent
        names = key.split("/")[1:]
        hidden = any(n.startswith(".") for n in names[-3:])
        if hidden or path.suffix in (".lock", ".owner", ".journal"):
            raise NotServed(key)
        for parent in (folder, folder.parent):
            try:
                if any(is_progress_name(p.name) for p in parent.iterdir() if p.is_file()):
                    return path
            except OSError:
                continue
        raise NotServed(key)

    def key_or_none(self, path: Path) -> str | None:
        """``key``, or None for a file outside the served folders."""
        try:
            return self.key(path)
        except (NotServed, OSError):
            return None

    def parent_key(self, path: Path) -> str | None:
        """The key of a child run's parent (``<stem>.steps/<step>/progress.md`` or a
        subagent's ``<stem>.steps/<step>/agents/<call>/progress.md``), if served."""
        if not is_child_path(path):
            return None
        steps = (
            path.parent.parent if path.parent.parent.name.endswith(".steps") else path.parents[3]
        )
        parent = steps.parent / (steps.name[: -len(".steps")] + ".md")
        return self.key_or_none(parent) if parent.is_file() else None

    def rows(self) -> list[Row]:
        """Every run in the served folders (completed ones too), unfinished first."""
        found: list[Row] = []
        for i, root in enumerate(self.roots):
            trees = list_run_trees([root], root=root, include_completed=True)
            for tree in trees:
                s = tree.summary
                relative = _relative(Path(s.path), root)
                found.append(
                    Row(f"{i}/{relative}", s, tree.children, needs_of(s), _batch(root, relative))
                )
        return found


def _relative(path: Path, root: Path) -> str:
    # Listed paths are below the (resolved) root already: a string test, no file system calls.
    text, prefix = str(path), str(root).rstrip(os.sep) + os.sep
    if text.startswith(prefix) and ".." not in path.parts:
        return text[len(prefix) :].replace(os.sep, "/")
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return Path(os.path.relpath(path, root)).as_posix()


def _batch(root: Path, relative: str) -> str | None:
    """The batch folder (as shown) of a run that is a batch's row (``rows/NNNN/progress.md``
    beside a ``batch.md``, docs/spec.md 8), else None."""
    match = _BATCH_ROW.match(relative)
    if match is None:
        return None
    folder = root / match.group("batch") if match.group("batch") else root
    if not (folder / "batch.md").is_file():
        return None
    return match.group("batch") or root.name


def needs_of(summary: RunSummary) -> str | None:
    """What a run waits for from a person, or None."""
    need = NEEDS.get(summary.state.status)
    tree = summary.worktree
    if need is None and tree is not None and summary.status == "completed":
        need = "worktree" if tree.get("state") == "active" else None
    return need
