"""Where progress files are looked for: the sources of a search, and the scan of each.

A *source* is a folder to look in: a runs folder (``<project>/.flow/runs``, one run per
sub-folder) or any other folder, searched a few levels deep for ``progress.md`` and
``*.progress.md``, or one file; each names the index file that caches it (``index``). A scan
``stat``s each file it finds, and stops when its ``Budget`` runs out::

    for source in sources_for([Path("other-project")], Path.cwd()):
        stamps = source.scan(Budget())     # (path, size, mtime_ns) of each progress file
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

#: File name of the index inside a runs folder.
INDEX_NAME = ".index.sqlite"
#: How deep below a plain folder (not a runs folder) progress files are looked for.
TREE_DEPTH = 3
#: Folders never searched, besides hidden ones (.git, .venv): dependencies, caches, builds.
SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "dist", "build"})
#: ``(path, size, mtime_ns)`` of a file: the index re-reads a file when this changes.
Stamp = tuple[str, int, int]


def runs_folder(root: Path) -> Path:
    """The default runs folder of a working directory: ``<root>/.flow/runs``."""
    return root / ".flow" / "runs"


class Cancelled(Exception):
    """The scan was stopped by its deadline or by the caller."""


@dataclass
class Budget:
    """When a scan must stop: a ``perf_counter`` deadline and/or a cancel flag."""

    deadline: float | None = None
    cancel: threading.Event | None = None

    def check(self) -> None:
        """Raise Cancelled when the time is up or the caller gave up."""
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("cancelled")
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise Cancelled("time limit")


@dataclass(frozen=True)
class Source:
    """A place to look for progress files, and the index file that caches it (None: memory)."""

    folder: Path
    #: "runs": ``<id>/progress.md``; "tree": searched TREE_DEPTH deep; "file": one file.
    kind: Literal["runs", "tree", "file"]
    index: Path | None
    #: Every path this source can find starts with this string.
    prefix: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        prefix = str(self.folder) if self.kind == "file" else str(self.folder) + os.sep
        object.__setattr__(self, "prefix", prefix)

    def covers(self, path: str) -> bool:
        """True if a scan of this source would find ``path`` when it exists."""
        if self.kind == "file":
            return path == str(self.folder)
        if not path.startswith(self.prefix):
            return False
        parts = path[len(self.prefix) :].split(os.sep)
        if not _is_progress_name(parts[-1]):
            return False
        if self.kind == "runs":
            return len(parts) == 1 or (len(parts) == 2 and parts[1] == "progress.md")
        return len(parts) <= TREE_DEPTH and not any(_skipped_dir(p) for p in parts[:-1])

    def scan(self, budget: Budget) -> list[Stamp]:
        """The stamp of every progress file this source holds now."""
        if self.kind == "file":
            stamp = _stamp(str(self.folder))
            return [stamp] if stamp else []
        if self.kind == "runs":
            return _scan_runs(str(self.folder), budget)
        return _scan_tree(str(self.folder), budget)


def _is_progress_name(name: str) -> bool:
    return name == "progress.md" or (name.endswith(".progress.md") and not name.startswith("."))


def _skipped_dir(name: str) -> bool:
    return name.startswith(".") or name in SKIP_DIRS


def _stamp(path: str) -> Stamp | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (path, info.st_size, info.st_mtime_ns)


def _scan_runs(folder: str, budget: Budget) -> list[Stamp]:
    # The hot loop of a warm check: one stat per run, nothing else (10,000 runs ~ 25 ms).
    found: list[Stamp] = []
    stat = os.stat
    try:
        entries = os.scandir(folder)
    except OSError:
        return found
    with entries:
        for n, entry in enumerate(entries):
            if n & 511 == 511:
                budget.check()
            name = entry.name
            if name[0] == ".":
                continue
            try:
                if entry.is_dir():
                    path = entry.path + os.sep + "progress.md"
                elif _is_progress_name(name):
                    path = entry.path
                else:
                    continue
                info = stat(path)
            except OSError:
                continue
            found.append((path, info.st_size, info.st_mtime_ns))
    return found


def _scan_tree(folder: str, budget: Budget) -> list[Stamp]:
    found: list[Stamp] = []
    pending = [(folder, 1)]
    while pending:
        budget.check()
        current, depth = pending.pop()
        try:
            entries = os.scandir(current)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir():
                        if depth < TREE_DEPTH and not _skipped_dir(entry.name):
                            pending.append((entry.path, depth + 1))
                    elif _is_progress_name(entry.name):
                        info = entry.stat()
                        found.append((entry.path, info.st_size, info.st_mtime_ns))
                except OSError:
                    continue
    return found


def _is_runs_folder(folder: Path) -> bool:
    return folder.name == "runs" and folder.parent.name == ".flow"


def sources_for(folders: Sequence[Path], root: Path, *, include_root: bool = True) -> list[Source]:
    """The sources to search: ``<root>/.flow/runs`` (if ``include_root``) plus ``folders``.

    A folder that is or holds a runs folder uses that runs folder's own index; other folders
    and files share the root's index, or an in-memory one when the root has no runs folder.
    """
    root = Path(os.path.abspath(root))
    default = runs_folder(root)
    shared_index = default / INDEX_NAME if default.is_dir() else None
    sources: list[Source] = []
    if include_root and default.is_dir():
        sources.append(Source(default, "runs", default / INDEX_NAME))
    for given in folders:
        folder = Path(os.path.abspath(root / given))
        if folder.is_file():
            sources.append(Source(folder, "file", shared_index))
        elif _is_runs_folder(folder):
            sources.append(Source(folder, "runs", folder / INDEX_NAME))
        elif folder.is_dir():
            nested = runs_folder(folder)
            if nested.is_dir():
                sources.append(Source(nested, "runs", nested / INDEX_NAME))
            sources.append(Source(folder, "tree", shared_index))
    unique: dict[tuple[Path, str], Source] = {}
    for source in sources:
        unique.setdefault((source.folder, source.kind), source)
    return list(unique.values())
