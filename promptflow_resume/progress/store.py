"""Durable storage of one run: atomic rewrites, an append-only journal, a lock, sidecars.

One live writer owns a progress file through ``ProgressStore``. Each event (a model reply, a
tool call's start or result, a status change) is one fsync'd line appended to
``<progress>.journal``: the new transcript entries plus the whole front matter state, so the
cost of an event does not grow with the run. ``checkpoint`` folds everything into
``progress.md`` with an atomic rewrite (temp file, fsync, rename, fsync the folder) and drops the
journal; that happens at step boundaries and on exit. Loading replays a journal left by a
crash. Readers (``load_progress``, ``validate_file``) never modify anything::

    store = ProgressStore.create(".flow/runs/r1/progress.md", run)
    run.transcript.append(entry); store.save(run, [entry])   # O(1), durable
    store.checkpoint(run)                                     # fold into progress.md
    store.close()

    run, report = load_progress(".flow/runs/r1/progress.md")
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from .. import faults, yamlio
from ..errors import (
    DigestError,
    FileNotFoundFlowError,
    InputError,
    ProgressFormatError,
    RunLockedError,
    SidecarError,
    StorageError,
)
from .digest import Chain, entry_digest
from .durable import fsync_dir, write_all, write_temp
from .frontmatter import front_matter, run_from_valid
from .migrations import upgrade_front_matter
from .model import Entry, LoadReport, Run
from .parse import parse_bytes
from .render import entry_block, render_document
from .schema import validate_front_matter
from .sidecar import folder_name, read_checked, write_sidecar

#: Progress files (and journals) larger than this are refused unread: a run keeps large
#: outputs in sidecar files, so a file this big is not one we wrote, or is a runaway.
MAX_FILE_BYTES = 32 * 1024 * 1024
JOURNAL_VERSION = 1
#: Bytes of a file inspected for NUL before it is decoded.
_BINARY_PROBE = 8192


def journal_path(progress: str | Path) -> Path:
    """``<progress>.journal``."""
    p = Path(progress)
    return p.with_name(p.name + ".journal")


def lock_path(progress: str | Path) -> Path:
    """``<progress>.lock``."""
    p = Path(progress)
    return p.with_name(p.name + ".lock")


def owner_path(progress: str | Path) -> Path:
    """``<progress>.owner``: JSON ``{pid, host, since}`` of the live writer."""
    p = Path(progress)
    return p.with_name(p.name + ".owner")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


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


def atomic_write(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so a reader sees the old or the new file, never a mix."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    faults.point("store.checkpoint_before_temp")
    write_temp(tmp, data, after_write=lambda: faults.point("store.checkpoint_after_temp"))
    faults.point("store.checkpoint_after_fsync")
    os.replace(tmp, path)
    faults.point("store.checkpoint_after_rename")
    fsync_dir(path.parent)
    faults.point("store.checkpoint_after_dir_fsync")


# --- reading ---------------------------------------------------------------------------------


def read_text(path: str | Path, *, what: str = "progress file") -> str:
    """The decoded text of ``path`` after the size, binary and encoding checks."""
    return decode_text(read_bytes(path, what=what), path, what=what)


def read_bytes(path: str | Path, *, what: str = "progress file") -> bytes:
    """The bytes of ``path`` after the size and binary checks."""
    p = Path(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise FileNotFoundFlowError(
            f"no {what} at {p}.",
            path=p,
            hint="Check the path; runs are kept under .flow/runs/<run-id>/progress.md by default.",
        ) from None
    if p.is_dir():
        raise ProgressFormatError(
            f"{p} is a folder, not a {what}.", path=p, hint="Pass the progress.md inside it."
        )
    if size > MAX_FILE_BYTES:
        raise ProgressFormatError(
            f"the file is {size / 1_000_000:.1f} MB, over the "
            f"{MAX_FILE_BYTES // (1024 * 1024)} MiB "
            f"limit for a {what}; it was not read.",
            path=p,
            hint=(
                "Check that this is the right file: flow keeps large tool outputs in sidecar "
                "files, so its progress files stay far below this size."
            ),
        )
    try:
        with open(p, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
    except OSError as error:
        raise storage_error(error, p, f"read the {what}", resumable=False) from None
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


@dataclass
class _Event:
    seq: int
    fm: dict[str, Any]
    entries: list[dict[str, Any]]
    line: int


def entry_to_dict(entry: Entry) -> dict[str, Any]:
    """An entry as a compact JSON-ready dict (the journal's form)."""
    out: dict[str, Any] = {"id": entry.id, "role": entry.role, "content": entry.content}
    for key in ("step", "call_id", "tool", "sidecar", "sidecar_sha256", "sidecar_bytes"):
        value = getattr(entry, key)
        if value is not None:
            out[key] = value
    if entry.is_error:
        out["is_error"] = True
    return out


def entry_from_dict(data: dict[str, Any]) -> Entry:
    """Inverse of ``entry_to_dict``."""
    return Entry(
        id=int(data["id"]),
        role=data["role"],
        content=data["content"],
        step=data.get("step"),
        call_id=data.get("call_id"),
        tool=data.get("tool"),
        is_error=bool(data.get("is_error", False)),
        sidecar=data.get("sidecar"),
        sidecar_sha256=data.get("sidecar_sha256"),
        sidecar_bytes=data.get("sidecar_bytes"),
    )


def _journal_error(path: Path, line: int | None, message: str) -> ProgressFormatError:
    return ProgressFormatError(
        message,
        path=path,
        line=line,
        column=1 if line else None,
        hint=(
            "The journal holds events written after the last checkpoint of progress.md. Move "
            "it aside to resume from the checkpoint (losing those events), or restore it."
        ),
    )


def _nested_deeper_than(value: Any, limit: int) -> bool:
    """True when lists and dicts in ``value`` nest more than ``limit`` levels (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, (dict, list)):
            if depth >= limit:
                return True
            items = current.values() if isinstance(current, dict) else current
            stack.extend((item, depth + 1) for item in items)
    return False


def read_journal(path: Path, run_id: str, report: LoadReport) -> list[_Event]:
    """The complete events of the journal at ``path`` (a torn last line is skipped)."""
    text = read_text(path, what="journal")
    lines = text.split("\n")
    if lines and lines[-1] != "":
        report.warnings.append(
            f"{path}:{len(lines)}: the journal's last line is incomplete (the process stopped "
            "while writing it); that event was never confirmed and is ignored."
        )
    lines = lines[:-1]
    if not lines:
        return []
    try:
        header = json.loads(lines[0])
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("flow_journal") != JOURNAL_VERSION:
        raise _journal_error(path, 1, "this is not a flow journal of a known version.")
    if header.get("run_id") != run_id:
        raise _journal_error(
            path, 1, f"this journal belongs to run {header.get('run_id')!r}, not to {run_id!r}."
        )
    events: list[_Event] = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            data = json.loads(line)
            fm = upgrade_front_matter(dict(data["fm"]))  # a journal an older flow wrote
            event = _Event(int(data["seq"]), fm, list(data["entries"]), number)
        except (ValueError, KeyError, TypeError, RecursionError):
            raise _journal_error(
                path, number, "this journal line is damaged (not a complete event)."
            ) from None
        if _nested_deeper_than(data, yamlio.MAX_DEPTH + 1):  # + 1: the event wraps "fm"
            # Deep values would fail later, when the checkpoint is written as YAML.
            raise _journal_error(
                path,
                number,
                f"this journal line nests values more than {yamlio.MAX_DEPTH} levels deep; "
                "flow never writes such an event.",
            )
        if events and event.seq != events[-1].seq + 1:
            raise _journal_error(
                path,
                number,
                f"journal events must count up by one; expected {events[-1].seq + 1}, "
                f"found {event.seq}.",
            )
        events.append(event)
    return events


def replay(
    run: Run, digests: list[str], events: list[_Event], path: Path, report: LoadReport
) -> Run:
    """Apply the journal ``events`` newer than the file to ``run``; return the resulting run.

    ``digests`` are the stored digests of ``run.transcript`` and are extended in place.
    """
    pending = [e for e in events if e.seq > run.journal_seq]
    if not pending:
        return run
    transcript = run.transcript
    chain = Chain(zip((e.id for e in transcript), digests, strict=True))
    for event in pending:
        for data in event.entries:
            try:
                entry = entry_from_dict(data)
            except (KeyError, TypeError, ValueError):
                raise _journal_error(
                    path, event.line, "an entry in this journal event is damaged."
                ) from None
            if entry.id != len(transcript) + 1:
                raise DigestError(
                    f"journal event {event.seq} adds entry {entry.id}, but the transcript has "
                    f"{len(transcript)} entries: the journal does not continue this file.",
                    path=path,
                    line=event.line,
                    column=1,
                    hint="Move the journal aside to resume from the checkpoint in progress.md.",
                )
            digest = entry_digest(entry)
            transcript.append(entry)
            digests.append(digest)
            chain.add(entry.id, digest)
    last = pending[-1]
    validate_front_matter(last.fm, path=path, context=f"journal event {last.seq}: ")
    recorded = last.fm["transcript"]
    if recorded["entries"] != len(transcript) or recorded["digest"] != chain.root():
        raise DigestError(
            f"journal event {last.seq} records a transcript that does not match the entries "
            "before it: the journal or the file was altered.",
            path=path,
            line=last.line,
            column=1,
            hint="Move the journal aside to resume from the checkpoint in progress.md.",
        )
    result = run_from_valid(last.fm)
    result.transcript = transcript
    result.journal_seq = last.seq
    report.replayed_events = len(pending)
    return result


def _locate(data: bytes, entry_id: int) -> int | None:
    marker = b"\n<!-- flow:entry %d " % entry_id
    found = data.find(marker)
    return None if found == -1 else data.count(b"\n", 0, found) + 2


def _load(path: Path, *, verify_sidecars: bool = True) -> tuple[Run, LoadReport, Chain, bool]:
    """Load + replay; returns run, report, the chain over the stored digests and whether a
    journal exists."""
    data = read_bytes(path)
    parsed = parse_bytes(data, path=path, decode=lambda raw: decode_text(raw, path))
    run, report, digests, chain = parsed.run, parsed.report, parsed.stored_digests, parsed.chain
    jpath = journal_path(path)
    has_journal = jpath.exists()
    if has_journal:
        events = read_journal(jpath, run.run_id, report)
        run = replay(run, digests, events, jpath, report)
        if report.replayed_events:
            chain = Chain(zip((e.id for e in run.transcript), digests, strict=True))
    if verify_sidecars:
        for entry in run.transcript:
            if entry.sidecar is None:
                continue
            _, problem = read_checked(path, entry)
            if problem is not None:
                raise SidecarError(
                    f"entry {entry.id} keeps its full output in the sidecar {entry.sidecar}, "
                    f"which {problem}.",
                    path=path,
                    line=_locate(data, entry.id),
                    column=1,
                    hint=(
                        f"Restore {entry.sidecar} from version control or a backup (sidecar "
                        "files travel with their progress file); the run cannot use that output "
                        "otherwise."
                    ),
                )
    return run, report, chain, has_journal


def load_progress(path: str | Path) -> tuple[Run, LoadReport]:
    """Load a progress file: parse, replay its journal, verify sidecars. Never writes."""
    run, report, _, _ = _load(Path(path))
    return run, report


def validate_file(path: str | Path) -> LoadReport:
    """Check a progress file completely (``flow validate``); raise the first problem found."""
    return load_progress(path)[1]


# --- the writer ------------------------------------------------------------------------------


def _read_owner(path: Path, wait: float = 1.0) -> dict[str, Any]:
    """The lock owner's pid, host and start time. A process that has just taken the lock
    writes them a moment later, so a missing or half-written file is read again for a while."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with open(owner_path(path), encoding="utf-8", newline="") as handle:
                owner = json.load(handle)
            if isinstance(owner, dict):
                return owner
        except (OSError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return {}
        time.sleep(0.02)


def _acquire(path: Path) -> Any:
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path(path)), mode=0o600, thread_local=False, blocking=False)
    try:
        lock.acquire()
    except Timeout:
        owner = _read_owner(path)
        who = (
            f"pid {owner.get('pid', '?')} on {owner.get('host', '?')}, "
            f"since {owner.get('since', '?')}"
            if owner
            else "owner unknown"
        )
        raise RunLockedError(
            f"this run is in use by another flow process ({who}).",
            path=path,
            hint=(
                "Wait for that process to finish, or stop it (Ctrl-C, or kill the pid on that "
                "host) and run this again. A process that died releases the lock by itself."
            ),
        ) from None
    except OSError as error:
        # Checked after Timeout, which is an OSError too. The lock file lives beside the
        # progress file: a folder that cannot be written cannot hold a live run either.
        raise storage_error(error, path, "take the run's lock", resumable=False) from None
    return lock


class ProgressStore:
    """The single live writer of one progress file (holds its lock until ``close``)."""

    def __init__(self, path: Path, lock: Any) -> None:
        self.path = path
        self._lock = lock
        self._journal_fd: int | None = None
        self._journal_size = 0
        self._seq = 0
        self._count = 0
        self._chain = Chain()
        self._last_text: str | None = None
        #: Digest and rendered block of each entry as of the last fold, by the entry's fields.
        self._rendered: dict[tuple[Any, ...], tuple[str, str]] = {}
        self._closed = False

    # -- lifecycle --

    @classmethod
    def create(cls, path: str | Path, run: Run) -> ProgressStore:
        """Write a new progress file for ``run`` (refusing to overwrite one) and own it."""
        p = Path(path)
        if p.exists():
            raise InputError(
                f"a progress file already exists at {p}.",
                path=p,
                hint="Resume it with `flow resume`, or choose another path with --progress.",
            )
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise storage_error(error, p, "create the run's folder", resumable=False) from None
        lock = _acquire(p)
        store = cls(p, lock)
        try:
            if p.exists():  # created by someone else between the check and the lock
                raise InputError(f"a progress file already exists at {p}.", path=p)
            store._write_owner()
            store._clean_leftovers()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(journal_path(p))
            run.journal_seq = 0
            try:
                store.checkpoint(run)
            except StorageError as error:
                # No checkpoint exists yet, so there is nothing to resume.
                raise StorageError(
                    error.message,
                    path=p,
                    hint="Nothing was written. Free some space or make the folder writable, "
                    "then run again.",
                ) from None
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open(cls, path: str | Path) -> tuple[ProgressStore, Run, LoadReport]:
        """Own an existing progress file: lock it, load it (replaying a journal), fold."""
        p = Path(path)
        if not p.exists():
            raise FileNotFoundFlowError(f"no progress file at {p}.", path=p)
        lock = _acquire(p)
        store = cls(p, lock)
        try:
            store._write_owner()
            store._clean_leftovers()
            run, report, chain, has_journal = _load(p)
            store._seq = run.journal_seq
            store._count = len(run.transcript)
            store._chain = chain
            if report.replayed_events:
                # Fold what the crash left in the journal so the file shows it again.
                store.checkpoint(run)
            elif has_journal:
                # Already folded (a crash between the rename and the unlink): just drop it.
                os.unlink(journal_path(p))
        except BaseException:
            store.close()
            raise
        return store, run, report

    def close(self) -> None:
        """Release the lock (does not checkpoint: call ``checkpoint`` first to fold)."""
        if self._closed:
            return
        self._closed = True
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        with (
            contextlib.suppress(OSError, ValueError),
            open(owner_path(self.path), encoding="utf-8", newline="") as handle,
        ):
            if json.load(handle).get("pid") == os.getpid():
                os.unlink(owner_path(self.path))
        self._lock.release()

    def __enter__(self) -> ProgressStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _write_owner(self) -> None:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": _now()}
        target = owner_path(self.path)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                write_all(fd, (json.dumps(info) + "\n").encode())
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise storage_error(
                error, self.path, "record the run's owner", resumable=False
            ) from None

    def _clean_leftovers(self) -> None:
        """Remove temp files a crashed writer left (safe: we hold the lock)."""
        prefix = f".{self.path.name}."
        with contextlib.suppress(OSError):
            for item in self.path.parent.iterdir():
                if item.name.startswith(prefix) and item.name.endswith(".tmp"):
                    item.unlink()
        # Half-written sidecars (``.<name>.<pid>.tmp``) left in the sidecar folder; never
        # through a symlink, which could point anywhere.
        sidecars = self.path.parent / folder_name(self.path)
        if sidecars.is_symlink():
            return
        with contextlib.suppress(OSError):
            for item in sidecars.iterdir():
                if item.name.startswith(".") and item.name.endswith(".tmp"):
                    item.unlink()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("this ProgressStore is closed")

    # -- events --

    def save(self, run: Run, new_entries: Sequence[Entry] = ()) -> None:
        """Record one event durably: ``new_entries`` (just appended to ``run.transcript``)
        plus the run's front matter state as it is now. Cost does not depend on run length.

        Entries already saved must not change between checkpoints; if ``new_entries`` are not
        exactly the transcript's unsaved tail, the store folds (``checkpoint``) instead.
        """
        self._check_open()
        n = len(new_entries)
        transcript = run.transcript
        if len(transcript) != self._count + n or any(
            transcript[self._count + i] is not e or e.id != self._count + i + 1
            for i, e in enumerate(new_entries)
        ):
            self.checkpoint(run)
            return
        chain = self._chain.copy()
        for entry in new_entries:
            chain.add(entry.id, entry_digest(entry))
        fm = front_matter(run, entries=len(transcript), digest=chain.root())
        seq = self._seq + 1
        line = json.dumps(
            {"seq": seq, "fm": fm, "entries": [entry_to_dict(e) for e in new_entries]},
            separators=(",", ":"),
        )
        self._append((line + "\n").encode("ascii"), run.run_id)
        self._seq = seq
        self._count = len(transcript)
        self._chain = chain

    def _append(self, data: bytes, run_id: str) -> None:
        try:
            self._append_raw(data, run_id)
        except OSError as error:
            raise storage_error(error, self.path, "append an event to the run's journal") from None

    def _append_raw(self, data: bytes, run_id: str) -> None:
        jpath = journal_path(self.path)
        if self._journal_fd is None:
            fd = os.open(jpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._journal_size = os.fstat(fd).st_size
            if self._journal_size == 0:
                header = json.dumps({"flow_journal": JOURNAL_VERSION, "run_id": run_id}) + "\n"
                data = header.encode("ascii") + data
                new_file = True
            else:
                new_file = False
            self._journal_fd = fd
        else:
            new_file = False
        fd = self._journal_fd
        faults.point("store.journal_before_append")
        try:
            write_all(fd, data)
            faults.point("store.journal_after_append")
            os.fsync(fd)
        except BaseException:
            # Leave no partial or unconfirmed line behind for the next append to glue onto
            # (a failed fsync may have kept some of it); a new journal gets its header again.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, self._journal_size)
            if new_file:
                self._journal_fd = None
                os.close(fd)
            raise
        self._journal_size += len(data)
        if new_file:
            fsync_dir(self.path.parent)  # the journal's name must survive a power cut too
        faults.point("store.journal_after_fsync")

    def checkpoint(self, run: Run) -> None:
        """Fold: rewrite progress.md atomically with the run as it is now; drop the journal."""
        self._check_open()
        digests, blocks = self._render_entries(run.transcript)
        chain = Chain(zip((e.id for e in run.transcript), digests, strict=True))
        run.journal_seq = self._seq
        fm = front_matter(run, entries=len(run.transcript), digest=chain.root())
        validate_front_matter(
            fm,
            path=self.path,
            context="refusing to write an invalid checkpoint (a bug in the caller): ",
        )
        text = render_document(run, fm, digests, blocks=blocks)
        if (
            text != self._last_text
            or self._journal_fd is not None
            or journal_path(self.path).exists()
        ):
            data = text.encode("utf-8", "surrogatepass")
            if len(data) > MAX_FILE_BYTES:
                raise ProgressFormatError(
                    f"the run has grown to {len(data) / 1_000_000:.1f} MB, over the progress file "
                    "limit; its events are safe in the journal, but it cannot be folded.",
                    path=self.path,
                    hint=(
                        "Keep large tool outputs in sidecar files (the engine does this "
                        "above 64 KiB)."
                    ),
                )
            try:
                atomic_write(self.path, data)
            except OSError as error:
                raise storage_error(error, self.path, "write the checkpoint") from None
            self._last_text = text
        faults.point("store.checkpoint_before_journal_remove")
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        # No folder fsync after the unlink: a journal that reappears after a power cut holds
        # only events the file already has (seq <= the file's), and is ignored.
        try:
            os.unlink(journal_path(self.path))
        except FileNotFoundError:
            pass
        except OSError as error:
            raise storage_error(error, self.path, "remove the folded journal") from None
        self._count = len(run.transcript)
        self._chain = chain

    def _render_entries(self, transcript: list[Entry]) -> tuple[list[str], list[str]]:
        """Each entry's digest and ``entry_block``, reusing those of the entries unchanged since
        the last fold: a long run folds at every step boundary, and re-rendering thousands of
        entries that did not change would make each fold cost as much as the first."""
        known = self._rendered
        fresh: dict[tuple[Any, ...], tuple[str, str]] = {}
        digests: list[str] = []
        blocks: list[str] = []
        for e in transcript:
            # Every field the digest and the block depend on, so an entry changed in place
            # (an accepted hand edit, say) misses and is rendered again.
            key = (
                e.id,
                e.role,
                e.content,
                e.step,
                e.call_id,
                e.tool,
                e.is_error,
                e.sidecar,
                e.sidecar_sha256,
                e.sidecar_bytes,
            )
            done = known.get(key)
            if done is None:
                digest = entry_digest(e)
                done = (digest, entry_block(e, digest))
            fresh[key] = done
            digests.append(done[0])
            blocks.append(done[1])
        self._rendered = fresh
        return digests, blocks

    # -- sidecars --

    def write_sidecar(self, name_hint: str, data: bytes) -> tuple[str, str]:
        """Store ``data`` in the sidecar folder; return (link relative to the file, sha256)."""
        self._check_open()
        try:
            return write_sidecar(self.path, name_hint, data)
        except OSError as error:
            raise storage_error(error, self.path, "write a sidecar file") from None

    def read_sidecar(self, entry: Entry) -> bytes:
        """The bytes of ``entry``'s sidecar, verified against its recorded hash."""
        data, problem = read_checked(self.path, entry)
        if data is None:
            raise SidecarError(
                f"entry {entry.id}'s sidecar {entry.sidecar} {problem}.",
                path=self.path,
                hint=f"Restore {entry.sidecar} from version control or a backup.",
            )
        return data
