"""flow's own folder, ``.flow/``: created with a ``.gitignore`` that keeps it out of git.

Runs, batches, worktrees and the detector's index live under ``<workspace>/.flow/``. None of
it belongs in ``git status`` (nor in the ``get_changed_files`` tool's answer) unless a person
commits it on purpose, so the process that creates ``.flow/`` also writes ``.flow/.gitignore``
ignoring everything. An existing ``.flow/`` is left as it is: a person who deleted or edited
that file (to commit runs) keeps their choice::

    make_folder(Path(".flow/runs/20261121-232529-notes-3fa2"))   # mkdir -p, and the .gitignore
    ignored_by_flow(Path(".flow/shared/run.md"))                   # True: git skips it
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .base.errors import SpecialFileError
from .base.safeopen import read_regular

#: The name of flow's folder in a workspace.
FLOW_FOLDER = ".flow"

#: What ``.flow/.gitignore`` holds: everything below ``.flow/`` is ignored.
GITIGNORE_TEXT = (
    "# Written by flow when it created this folder: its runs stay out of `git status`.\n"
    "# To commit a run, share it outside .flow/ (flow share), or delete this file.\n"
    "*\n"
)


def _flow_ancestor(folder: Path) -> Path | None:
    """The nearest folder named ``.flow`` among ``folder`` and its parents."""
    return next((p for p in (folder, *folder.parents) if p.name == FLOW_FOLDER), None)


def make_folder(folder: Path, *, mode: int = 0o777) -> None:
    """``folder.mkdir(parents=True, exist_ok=True)``; when that creates a ``.flow`` folder,
    write ``.flow/.gitignore`` too (never replacing one). Raises OSError as ``mkdir`` does."""
    flow = _flow_ancestor(folder)
    created = flow is not None and not flow.exists()
    folder.mkdir(mode=mode, parents=True, exist_ok=True)
    if flow is not None and created:
        write_gitignore(flow)


def write_gitignore(flow: Path) -> bool:
    """Create ``flow/.gitignore`` ignoring everything, unless a file is there already.

    Returns True when it was written. Never fails the caller: a run does not need the file.
    """
    try:
        fd = os.open(flow / ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:  # there already (another process made it), or the folder is read-only
        return False
    with contextlib.suppress(OSError), os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(GITIGNORE_TEXT)
    return True


def ignored_by_flow(path: Path) -> bool:
    """True when ``path`` is below a ``.flow`` folder whose ``.gitignore`` is flow's own, so
    ``git add`` skips it (``flow share`` warns of that)."""
    flow = _flow_ancestor(path.parent)
    if flow is None:
        return False
    try:
        # A link or a pipe there (a .flow/ from elsewhere) is not flow's file (spec 10.4).
        data = read_regular(flow / ".gitignore", len(GITIGNORE_TEXT), what=".gitignore")
        text = (data or b"").decode("utf-8")
    except (OSError, UnicodeDecodeError, SpecialFileError):
        return False
    return text == GITIGNORE_TEXT
