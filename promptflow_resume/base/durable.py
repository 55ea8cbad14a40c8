"""Durable file writes: the one place that knows how to replace or append to a file safely.

A file is written whole to a temp name beside it and fsynced before it is renamed into place,
and the folder is fsynced after, so a crash or power cut leaves the old file or the new one::

    replace_file(path, data)                    # owner-only, like every file flow writes
    replace_file(path, data, mode=None)         # keep an existing file's permissions (edits)
    append_synced(journal, b"one line\\n")       # appended and fsynced before returning
    append_at(fd, b"one line\\n", size)          # the same on an open file, cut back on failure

Neither writes through a symbolic link: a replaced file's link is replaced, not followed, the
temp file is always new, and an append to a link is refused (``safeopen``).

Callers that need crash points between the phases (the progress store, sidecars, batches)
pass callbacks, so every write path still goes through these functions.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path

from .safeopen import NOFOLLOW, open_append


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


def write_temp(
    tmp: Path, data: bytes, *, mode: int = 0o600, after_write: Callable[[], None] | None = None
) -> None:
    """Write ``data`` to ``tmp`` (created with ``mode``, replacing it) and fsync it.

    On any failure (a full disk, Ctrl-C) the half-written ``tmp`` is removed before the error
    propagates. ``after_write`` runs between the write and the fsync (a crash point).
    """
    # The temp name is predictable: whatever is there (a crashed writer's leftover, or a link
    # planted to make this write land elsewhere) is removed, and the new file must be new.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW, mode)
    try:
        # The umask may have narrowed ``mode``; a kept mode must be exact.
        os.fchmod(fd, mode)
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


def temp_name(path: Path) -> Path:
    """The temp file a write of ``path`` goes through: hidden, beside it, unique per process."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def replace_file(
    path: Path,
    data: bytes,
    *,
    mode: int | None = 0o600,
    after_write: Callable[[], None] | None = None,
    before_rename: Callable[[], None] | None = None,
    after_rename: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file, never a mix.

    ``mode=None`` keeps the permissions of the file being replaced (a user's file edited by a
    tool). The callbacks are crash points between the phases; the temp file never outlives a
    failure before the rename.
    """
    if mode is None:
        mode = stat.S_IMODE(path.stat().st_mode)
    tmp = temp_name(path)
    write_temp(tmp, data, mode=mode, after_write=after_write)
    try:
        if before_rename is not None:
            before_rename()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if after_rename is not None:
        after_rename()
    fsync_dir(path.parent)


def append_at(
    fd: int, data: bytes, size: int, *, after_write: Callable[[], None] | None = None
) -> None:
    """Append ``data`` to the file open as ``fd`` (in append mode), whose confirmed length is
    ``size``, and fsync it. On any failure (``after_write`` raising included: a crash point,
    or a copy elsewhere that did not take the bytes) the file is cut back to ``size`` before
    the error propagates, so no partial or unconfirmed line is left for the next append to
    glue onto (a failed fsync may have kept some of it)."""
    try:
        write_all(fd, data)
        if after_write is not None:
            after_write()
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


def append_synced(path: Path, data: bytes, *, what: str = "file") -> None:
    """Append ``data`` to ``path`` (created owner-only) and fsync it before returning.

    A file created here also has its folder fsynced, so the new name survives a power cut.
    ``path`` must be a regular file, not a link (``SpecialFileError``, see ``safeopen``).
    """
    created = not os.path.lexists(path)
    fd = open_append(path, what=what)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        fsync_dir(path.parent)
