"""Durable writes shared by the progress file, its journal and its sidecar files.

A file is written whole to a temp name and fsynced before it is renamed into place, and the
folder is fsynced after, so a crash or power cut leaves the old file or the new one::

    write_temp(tmp, data)
    os.replace(tmp, target)
    fsync_dir(target.parent)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path


def fsync_dir(folder: Path) -> None:
    """Flush ``folder``'s entries (a rename or a new file in it) to disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write fewer)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_temp(tmp: Path, data: bytes, *, after_write: Callable[[], None] | None = None) -> None:
    """Write ``data`` to ``tmp`` (owner-only, replacing it) and fsync it.

    On any failure (a full disk, Ctrl-C) the half-written ``tmp`` is removed before the error
    propagates. ``after_write`` runs between the write and the fsync (a crash point).
    """
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        write_all(fd, data)
        if after_write is not None:
            after_write()
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
