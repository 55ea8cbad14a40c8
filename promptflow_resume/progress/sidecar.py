"""Sidecar files: large or binary tool outputs kept beside the progress file.

They live flat in ``<progress stem>.files/`` (``progress.md`` -> ``progress.files/``), are linked
from the entry with a path relative to the progress file's folder, and carry a sha256 that is
checked whenever they are read. A link that leaves that folder (``..``, an absolute path, a
symlink) is refused::

    rel, digest = write_sidecar(Path("run/progress.md"), "call_1-read_file.txt", data)
    # rel == "progress.files/call_1-read_file.txt", digest == "sha256:<hex>"
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path

from ..base import faults
from ..base.durable import fsync_dir, replace_file
from ..base.errors import SpecialFileError
from ..base.safeopen import kind_of, open_regular, read_fd, read_regular
from .model import Entry

#: Tool outputs larger than this (bytes) belong in a sidecar file, not in the transcript.
SIDECAR_THRESHOLD = 64 * 1024
#: Sidecar files larger than this are not read (a tool output this large is not kept whole).
MAX_SIDECAR_BYTES = 256 * 1024 * 1024
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,119}")
#: File extensions of the media types tools return most, so a sidecar opens in the right
#: program; others come from ``mimetypes``, and an unknown type gets none.
EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "image/svg+xml": ".svg",
    "audio/wav": ".wav",
    "audio/x-wav": ".wav",
    "audio/mpeg": ".mp3",
    "audio/ogg": ".ogg",
    "application/pdf": ".pdf",
    "application/json": ".json",
    "application/zip": ".zip",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/html": ".html",
    "text/csv": ".csv",
}


def stem_of(progress: str | Path) -> str:
    """``progress.md`` -> ``progress``: the name the sidecar folder is derived from."""
    name = Path(progress).name
    return name[:-3] if name.endswith(".md") else name


def folder_name(progress: str | Path) -> str:
    """The sidecar folder's name for a progress file: ``<stem>.files``."""
    return f"{stem_of(progress)}.files"


def is_binary(data: bytes) -> bool:
    """True for bytes that are not UTF-8 text (or contain NUL)."""
    if b"\0" in data:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def needs_sidecar(data: bytes) -> bool:
    """True when a tool output should go to a sidecar: over the threshold, or binary."""
    return len(data) > SIDECAR_THRESHOLD or is_binary(data)


def digest_of(data: bytes) -> str:
    """``sha256:<hex>`` of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def check_link(rel: str, stem: str) -> str | None:
    """Why ``rel`` is not an acceptable sidecar link for progress stem ``stem``, or None."""
    if rel.startswith("/") or "\\" in rel or re.match(r"[A-Za-z]:", rel):
        return "is an absolute path"
    parts = rel.split("/")
    if ".." in parts:
        return "leaves the sidecar folder (it contains ..)"
    if len(parts) != 2 or parts[0] != f"{stem}.files":
        return f"is not a file directly inside {stem}.files/"
    if not _NAME.fullmatch(parts[1]):
        return "has a file name other than letters, digits, dot, dash and underscore"
    return None


def sidecar_extension(media_type: str | None) -> str:
    """``.png`` for ``image/png``: the extension a sidecar of ``media_type`` gets ("" if none)."""
    if not media_type:
        return ""
    kind = media_type.split(";", 1)[0].strip().lower()
    found = EXTENSIONS.get(kind)
    if found is None:
        import mimetypes

        found = mimetypes.guess_extension(kind) or ""
    return found if re.fullmatch(r"\.[a-z0-9]{1,8}", found) else ""


def _safe_name(hint: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+|\.{2,}", "-", hint)
    name = re.sub(r"-{2,}", "-", name).strip(".-_")[:100]
    return name or "output.bin"


def _open_folder(progress: Path) -> tuple[Path, bool]:
    """The sidecar folder of ``progress`` (made if need be), and whether it was made now."""
    folder = progress.parent / folder_name(progress)
    if folder.is_symlink():
        raise OSError(f"refusing to write sidecars through the symlink {folder}")
    created = not folder.exists()
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder, created


def _place(target: Path, data: bytes, created: bool) -> None:
    """Write a new sidecar file atomically (a full disk leaves no half sidecar behind)."""
    replace_file(
        target,
        data,
        before_rename=lambda: faults.point("sidecar.after_temp"),
        after_rename=lambda: faults.point("sidecar.after_rename"),
    )
    if created:
        fsync_dir(target.parent.parent)


def put_sidecar(progress: Path, link: str, data: bytes) -> None:
    """Write ``data`` as the sidecar ``link`` of ``progress`` (a copy of a run kept elsewhere,
    ``progress.replica``): the link must be one ``check_link`` accepts; a file of the same bytes
    there is kept, a link, pipe or device there is refused (``OSError``)."""
    problem = check_link(link, stem_of(progress))
    if problem is not None:
        raise OSError(f"the sidecar link {link!r} {problem}")
    folder, created = _open_folder(progress)
    target = folder / link.split("/")[1]
    if os.path.lexists(target):
        if stat.S_ISLNK(os.lstat(target).st_mode):
            raise OSError(f"refusing to write the sidecar {link} over a symbolic link")
        with contextlib.suppress(OSError, SpecialFileError):
            if read_regular(target, len(data), what="sidecar file") == data:
                return
    _place(target, data, created)


def write_sidecar(progress: Path, name_hint: str, data: bytes) -> tuple[str, str]:
    """Write ``data`` durably into the sidecar folder; return (relative link, sha256 digest)."""
    folder, created = _open_folder(progress)
    digest = digest_of(data)
    base = _safe_name(name_hint)
    stem, dot, ext = base.rpartition(".")
    if not dot or not stem:
        stem, ext = base, ""
    for n in range(1, 10_000):
        name = base if n == 1 else f"{stem}-{n}{'.' + ext if ext else ''}"
        target = folder / name
        if os.path.lexists(target):
            # The same bytes reuse the name; a link, pipe or device there is never read.
            with contextlib.suppress(OSError, SpecialFileError):
                if read_regular(target, len(data), what="sidecar file") == data:
                    return f"{folder.name}/{name}", digest
            continue
        _place(target, data, created)
        return f"{folder.name}/{name}", digest
    raise OSError(f"no free sidecar name for {name_hint!r} in {folder}")


def read_checked(progress: Path, entry: Entry) -> tuple[bytes | None, str | None]:
    """The verified bytes of ``entry``'s sidecar, or (None, why it is unusable)."""
    if entry.sidecar is None:
        return None, "has no sidecar"
    problem = check_link(entry.sidecar, stem_of(progress))
    if problem is not None:
        return None, problem
    folder = progress.parent / folder_name(progress)
    target = progress.parent / entry.sidecar
    try:
        if stat.S_ISLNK(os.lstat(folder).st_mode):
            return None, f"is inside {folder.name}/, which is a symlink"
        fd = open_regular(target, what="sidecar file")
    except FileNotFoundError:
        return None, "does not exist"
    except SpecialFileError:
        if os.path.islink(target):
            return None, "is a symlink, not a regular file"
        return None, f"is {kind_of(os.lstat(target).st_mode)}, not a regular file"
    except OSError as error:
        return None, f"cannot be read ({error.strerror})"
    try:
        # The recorded size bounds the read: a larger file is refused as soon as it is seen.
        limit = min(entry.sidecar_bytes or 0, MAX_SIDECAR_BYTES) or MAX_SIDECAR_BYTES
        data = read_fd(fd, limit)
    finally:
        os.close(fd)
    if len(data) > limit:
        return None, f"has more than the recorded {limit} bytes"
    if entry.sidecar_sha256 is not None and digest_of(data) != entry.sidecar_sha256:
        return None, (
            f"does not match its recorded hash (recorded {entry.sidecar_sha256[:19]}…, "
            f"found {digest_of(data)[:19]}…): it was changed or replaced"
        )
    if entry.sidecar_bytes is not None and len(data) != entry.sidecar_bytes:
        return None, f"has {len(data)} bytes, not the recorded {entry.sidecar_bytes}"
    return data, None
