"""The progress file on disk: reading it within its size limits (refusing a binary file or one
that is not UTF-8, with the place of the bad byte), writing a checkpoint atomically with a
crash point between each phase, and the one-paragraph error of a disk that failed::

    data = read_bytes(path)                  # or read_text(path): decoded, checked
    write_checkpoint(path, data)             # temp file, fsync, rename, fsync the folder
    raise storage_error(error, path, "write the checkpoint")
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..base import faults
from ..base.durable import replace_file
from ..base.errors import (
    FileNotFoundFlowError,
    ProgressFormatError,
    SpecialFileError,
    StorageError,
)
from ..base.safeopen import open_regular, read_fd

#: Progress files larger than this are refused unread. A run keeps large outputs in sidecar
#: files, so only a very long run comes near it (about 190,000 turns of 1 KiB), far beyond
#: what a pull request can carry (GitHub refuses files over 100 MB); it bounds the memory a
#: file received from someone else can make flow use.
MAX_FILE_BYTES = 256 * 1024 * 1024
#: Journals larger than this are refused unread. flow folds its own journal long before (see
#: ``store.FOLD_JOURNAL_BYTES``), so only a journal flow did not write comes near it.
MAX_JOURNAL_BYTES = 32 * 1024 * 1024
#: Bytes of a file inspected for NUL before it is decoded.
_BINARY_PROBE = 8192


_WHY = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is used up",
    errno.EFBIG: "the file size limit was reached",
    errno.EROFS: "the folder is on a read-only file system",
    errno.EACCES: "permission was denied",
    errno.EPERM: "the operation was not permitted",
    errno.EIO: "the disk reported an input/output error",
}


def storage_error(
    error: OSError, path: Path, doing: str, *, resumable: bool = True
) -> StorageError:
    """A one-paragraph ``StorageError`` for an OSError met while ``doing`` something to ``path``."""
    why = _WHY.get(error.errno or 0) or error.strerror or str(error)
    if resumable:
        hint = (
            "Nothing already written was lost: the file holds the last checkpoint. Free some "
            "space or make the folder writable, then continue with `flow resume "
            f"{path}`."
        )
    else:
        hint = "Nothing was changed. Free some space or make the folder writable, then run again."
    return StorageError(
        f"could not {doing}: {why} ({error.strerror or error}).", path=path, hint=hint
    )


def write_checkpoint(path: Path, data: bytes) -> None:
    """Replace progress.md with ``data`` (a fold), with a crash point between each phase."""
    faults.point("store.checkpoint_before_temp")
    replace_file(
        path,
        data,
        after_write=lambda: faults.point("store.checkpoint_after_temp"),
        before_rename=lambda: faults.point("store.checkpoint_after_fsync"),
        after_rename=lambda: faults.point("store.checkpoint_after_rename"),
    )
    faults.point("store.checkpoint_after_dir_fsync")


def read_text(path: str | Path, *, what: str = "progress file") -> str:
    """The decoded text of ``path`` after the size, binary and encoding checks."""
    return decode_text(read_bytes(path, what=what), path, what=what)


def read_bytes(path: str | Path, *, what: str = "progress file") -> bytes:
    """The bytes of ``path`` after the size and binary checks.

    ``path`` may be reached through a link a person made (it was named to flow), but it must
    end at a regular file: a pipe or a device is refused unread (``safeopen``), and the read
    stops past the limit whatever size the file claims.
    """
    p = Path(path)
    limit = MAX_JOURNAL_BYTES if what == "journal" else MAX_FILE_BYTES
    try:
        fd = open_regular(p, what=what, follow=True)
    except FileNotFoundError:
        raise FileNotFoundFlowError(
            f"no {what} at {p}.",
            path=p,
            hint="Check the path; runs are kept under .flow/runs/<run-id>/progress.md by default.",
        ) from None
    except SpecialFileError as error:
        if p.is_dir():
            raise ProgressFormatError(
                f"{p} is a folder, not a {what}.", path=p, hint="Pass the progress.md inside it."
            ) from None
        raise error from None
    except OSError as error:
        raise storage_error(error, p, f"read the {what}", resumable=False) from None
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            data = b""
        else:
            data = read_fd(fd, limit)
            size = max(size, len(data))
    except OSError as error:
        raise storage_error(error, p, f"read the {what}", resumable=False) from None
    finally:
        os.close(fd)
    if size > limit:
        raise ProgressFormatError(
            f"the file is {size / 1_000_000:.1f} MB, over the {limit // (1024 * 1024)} MiB "
            f"limit for a {what}; it was not read.",
            path=p,
            hint=(
                "Check that this is the right file: flow keeps large tool outputs in sidecar "
                "files, so its progress files stay far below this size."
            ),
        )
    if b"\0" in data[:_BINARY_PROBE] or b"\0" in data:
        offset = data.index(b"\0")
        raise ProgressFormatError(
            f"this is a binary file, not a {what} (it contains a NUL byte).",
            path=p,
            line=data.count(b"\n", 0, offset) + 1,
            column=offset - (data.rfind(b"\n", 0, offset) + 1) + 1,
            hint=(
                "Pass the progress.md a run wrote; restore this one from version control "
                "if it was damaged."
            ),
        )
    return data


def decode_text(data: bytes, path: str | Path, *, what: str = "progress file") -> str:
    """``data`` decoded as UTF-8; a positioned error for a file that is not."""
    p = Path(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        offset = error.start
        raise ProgressFormatError(
            f"this is not UTF-8 text (byte 0x{data[offset]:02x} cannot be decoded), so it is "
            f"not a {what} or it was damaged.",
            path=p,
            line=data.count(b"\n", 0, offset) + 1,
            column=offset - (data.rfind(b"\n", 0, offset) + 1) + 1,
            hint="Re-save the file as UTF-8, or restore it from version control.",
        ) from None
