"""Opening the files that come with a run: regular files only, never through a link, bounded.

A run's files (progress files, journals, owner and lock files, sidecars, child runs, batch
files, recordings, archives, logs) may come from someone else: a pull request, a shared
folder. Any of them may be a symbolic link to a file elsewhere, a pipe that blocks forever, or
a device that never ends (``/dev/zero``). So every open of such a file goes through here:

- ``O_NONBLOCK``, so opening a pipe (FIFO) cannot wait for a writer that never comes;
- ``O_NOFOLLOW`` unless the caller follows links on purpose (a path a person named), so a
  link is refused rather than read or written through, dangling links included;
- the open file must be a regular file (``fstat``), checked after the open, so a file
  swapped between a check and the open cannot slip through;
- reads stop at a limit whatever ``st_size`` says (files in ``/proc`` report size 0 and go on)::

    data = read_regular(journal, MAX_JOURNAL_BYTES, what="journal")  # None when absent
    fd = open_append(log_path, what="MCP server log")  # created owner-only
    refuse_special(lock, what="lock file")  # before filelock opens it

A refused file raises ``SpecialFileError`` (exit 4) naming the file and what it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import SpecialFileError

#: ``O_NOFOLLOW`` where the platform has it (not on Windows, which has no such links to fear).
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: The largest single read: a bigger limit is read in steps of this size.
_CHUNK = 1 << 20


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``"a pipe (FIFO)"`` …)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def special_file_error(path: str | Path, what: str, kind: str) -> SpecialFileError:
    """The one-paragraph refusal of ``path`` (a run's ``what``) for being ``kind``."""
    return SpecialFileError(
        f"the {what} is {kind}, not a regular file; flow reads and writes a run's files only "
        "as regular files, never through a symbolic link, so it was left alone.",
        path=path,
        hint=(
            "Such a file does not come from flow: it came with the run from elsewhere. Remove "
            "it (or replace it with the file it should be) and run the command again."
        ),
    )


def _special(path: str | Path, what: str, follow: bool) -> SpecialFileError | None:
    """The refusal of ``path`` when it is there as anything but a regular file, else None."""
    try:
        mode = os.stat(path).st_mode if follow else os.lstat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else special_file_error(path, what, kind_of(mode))


def _checked(fd: int, path: str | Path, what: str) -> int:
    """``fd`` when it is a regular file; otherwise it is closed and refused."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise special_file_error(path, what, kind_of(mode))
    return fd


def open_regular(
    path: str | Path, *, what: str, follow: bool = False, writable: bool = False
) -> int:
    """A read-only (or read-write) descriptor of the regular file ``path``; raises
    FileNotFoundError, other OSErrors, or ``SpecialFileError`` for a link (unless ``follow``)
    or any other kind of file."""
    access = os.O_RDWR if writable else os.O_RDONLY
    flags = access | _NONBLOCK | _CLOEXEC | (0 if follow else NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError:
        # ELOOP: the last component is a link (O_NOFOLLOW), dangling or not; ENXIO: a device
        # without its hardware (``/dev/tty`` with no terminal).
        refusal = _special(path, what, follow)
        if refusal is not None:
            raise refusal from None
        raise
    return _checked(fd, path, what)


def read_fd(fd: int, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of ``fd`` from its position: one byte more than the limit
    says the file is over it. The size ``fstat`` reports only sizes the first read."""
    try:
        hint = os.fstat(fd).st_size
    except OSError:
        hint = 0
    chunks: list[bytes] = []
    left = limit + 1
    # The size seen plus a byte to notice growth: asking for the limit at once would make
    # Python allocate all of it for a small file.
    want = min(left, hint + 1 if hint else _CHUNK)
    while left > 0:
        chunk = os.read(fd, min(want, left, _CHUNK * 64))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
        want = _CHUNK
    return b"".join(chunks)


def read_regular(path: str | Path, limit: int, *, what: str, follow: bool = False) -> bytes | None:
    """The bytes of the regular file ``path``, at most ``limit + 1`` of them (more than
    ``limit`` means it is over), or None when it does not exist."""
    try:
        fd = open_regular(path, what=what, follow=follow)
    except FileNotFoundError:
        return None
    try:
        return read_fd(fd, limit)
    finally:
        os.close(fd)


def open_append(path: str | Path, *, what: str, mode: int = 0o600) -> int:
    """A descriptor appending to the regular file ``path`` (created with ``mode`` if absent),
    never through a link: a link there, even a dangling one, is refused."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NONBLOCK | _CLOEXEC | NOFOLLOW
    try:
        fd = os.open(path, flags, mode)
    except OSError:
        # ELOOP: a link, dangling or not; ENXIO: a pipe nobody reads.
        refusal = _special(path, what, False)
        if refusal is not None:
            raise refusal from None
        raise
    fd = _checked(fd, path, what)
    os.set_blocking(fd, True)
    return fd


def refuse_special(path: str | Path, *, what: str) -> None:
    """Raise ``SpecialFileError`` when ``path`` exists as anything but a regular file (a link
    included): for files another library opens, such as the lock ``filelock`` takes."""
    refusal = _special(path, what, False)
    if refusal is not None:
        raise refusal


def linked_file(folder: Path, rel: str, *, what: str, source: Path, field: str) -> Path:
    """``folder / rel`` for a relative link ``rel`` that a run's file ``source`` holds in
    ``field``: it must stay inside ``folder`` (no absolute path, no ``..``), no folder on the
    way may be a link, and the file itself must be absent or a regular file."""
    parts = rel.replace("\\", "/").split("/")
    if rel.startswith(("/", "\\")) or (len(rel) > 1 and rel[1] == ":") or ".." in parts:
        raise SpecialFileError(
            f"the {what} {rel!r} leaves the folder of the file that names it; flow reads a "
            "run's files only inside that folder.",
            path=source,
            field=field,
            hint="Such a link does not come from flow. Restore the file from version control.",
        )
    names = [part for part in parts if part not in ("", ".")]
    target = folder
    for name in names[:-1]:
        target = target / name
        if os.path.islink(target):
            raise special_file_error(target, f"folder of the {what}", "a symbolic link")
    target = target / names[-1] if names else target
    refuse_special(target, what=what)
    return target


def outside_error(
    path: str | Path, what: str, root: Path, *, inside: str | None = None
) -> SpecialFileError:
    """The refusal of a repository's ``what`` at ``path`` that leads out of ``root`` (or into
    its folder ``inside``: git's own, which holds credentials)."""
    where = f"into the {inside} folder of {root}" if inside else f"outside the folder {root}"
    return SpecialFileError(
        f"the {what} leads {where} (to {os.path.realpath(path)}); flow reads what a "
        f"repository brings only inside it{', never git data' if inside else ''}, so it was "
        "skipped.",
        path=path,
        hint="A file a repository brings must be a regular file inside it; replace the link "
        "with the file itself.",
    )


def read_inside(root: Path, path: str | Path, limit: int, *, what: str) -> bytes | None:
    """The bytes of ``path``, a file a repository brings, at most ``limit + 1`` of them, or
    None when it does not exist: it must be a regular file that really lies inside ``root``
    (links are followed only while they stay inside), else ``SpecialFileError`` (exit 4)."""
    from .confine import GIT_FOLDER, PathEscapeError, confine

    try:
        real = confine(root, str(path))
    except PathEscapeError:
        raise outside_error(path, what, root) from None
    if GIT_FOLDER in real.relative_to(os.path.realpath(root)).parts:
        raise outside_error(path, what, root, inside=GIT_FOLDER)
    # The real path has no link left on it; one swapped in since is refused, not followed.
    return read_regular(real, limit, what=what)
