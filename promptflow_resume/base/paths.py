"""How paths are written into files and shown to people.

A progress file names other files (its workflow, a recording, a parent or child run) relative
to its own folder with forward slashes, so the file reads the same and resumes on another
machine. Messages show a path relative to the working directory when it is inside it: shorter
to read, and still a path the reader can paste.
"""

from __future__ import annotations

import os
from pathlib import Path


def relative_path(target: Path, folder: Path) -> str:
    """``target`` relative to ``folder`` with forward slashes: how progress files name paths."""
    return Path(os.path.relpath(target.resolve(), folder.resolve())).as_posix()


def rebase(relative: str, old_folder: Path, new_folder: Path) -> str:
    """A path written relative to ``old_folder``, rewritten relative to ``new_folder``."""
    return relative_path(old_folder / relative, new_folder)


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it is below it, else as given."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)
    if not relative.startswith(".."):
        return relative
    # Below it through a symbolic link (macOS's /tmp is /private/tmp, the working directory
    # is always the real path), or in a folder whose name starts with "..".
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return str(path)
