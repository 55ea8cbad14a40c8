"""Durable storage of one run: atomic rewrites, an append-only journal, a lock, sidecars.

One live writer owns a progress file through ``ProgressStore``. Each event (a model reply, a
tool call's start or result, a status change) is one fsync'd line appended to
``<progress>.journal``: the new transcript entries plus the front matter fields that changed
(see ``journal``), so the cost and size of an event do not grow with the run. ``checkpoint``
folds everything into ``progress.md`` with an atomic rewrite (temp file, fsync, rename, fsync
the folder) and drops the journal; that happens at step boundaries, on exit, and whenever the
journal grows past ``FOLD_JOURNAL_BYTES`` (so flow's own journal never nears ``MAX_JOURNAL_BYTES``).
Loading replays a journal left by a crash. Readers (``load_progress``, ``validate_file``) never
modify anything, and see a consistent snapshot of a live run: they read the journal before the
file, and a fold writes the file before it drops the journal::

    store = ProgressStore.create(".flow/runs/r1/progress.md", run)
    run.transcript.append(entry); store.save(run, [entry])   # O(1), durable
    store.checkpoint(run)                                     # fold into progress.md
    store.close()

    run, report = load_progress(".flow/runs/r1/progress.md")
"""

from __future__ import annotations

import contextlib
import errno
import operator
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import unquote

from ..base import collector, faults
from ..base.durable import append_at, fsync_dir, replace_file
from ..base.errors import (
    DigestError,
    FileNotFoundFlowError,
    InputError,
    ProgressFormatError,
    RunLockedError,
    SidecarError,
    SpecialFileError,
    StorageError,
)
from ..base.runlock import LockHeld, RunLock
from ..base.safeopen import open_append, open_regular, read_fd, refuse_special
from ..flowfolder import make_folder
from . import journal
from .digest import Chain, entry_digest
from .frontmatter import front_matter, read_front_matter, written_front_matter
from .location import progress_file
from .migrations import upgrade_front_matter
from .mirror import MirrorOp, OpKind, mirror_for
from .model import FORMAT_VERSION, Entry, EntryMeta, LoadReport, Run, meta_from_fields, meta_key
from .owner import (
    REQUEST_NOTE_DELAY,
    RequestNotes,
    note_request,
    owner_alive,
    owner_path,
    read_owner,
    write_owner,
)
from .parse import parse_bytes
from .render import document_head, document_tail, entry_block, marker_value
from .sidecar import folder_name, read_checked, write_sidecar
from .versions import flow_is_older_than, min_flow_error

#: Progress files larger than this are refused unread. A run keeps large outputs in sidecar
#: files, so only a very long run comes near it (about 190,000 turns of 1 KiB), far beyond
#: what a pull request can carry (GitHub refuses files over 100 MB); it bounds the memory a
#: file received from someone else can make flow use.
MAX_FILE_BYTES = 256 * 1024 * 1024
#: Journals larger than this are refused unread. flow folds its own journal long before (see
#: ``FOLD_JOURNAL_BYTES``), so only a journal flow did not write comes near it.
MAX_JOURNAL_BYTES = 32 * 1024 * 1024
JOURNAL_VERSION = journal.JOURNAL_VERSION
#: A journal this large is folded into progress.md at the next event, even mid-step: far below
#: ``MAX_JOURNAL_BYTES``, and large enough that folds stay rare (one per thousands of events).
FOLD_JOURNAL_BYTES = 4 * 1024 * 1024
#: Bytes of a file inspected for NUL before it is decoded.
_BINARY_PROBE = 8192


def journal_path(progress: str | Path) -> Path:
    """``<progress>.journal``."""
    p = Path(progress)
    return p.with_name(p.name + ".journal")


def lock_path(progress: str | Path) -> Path:
    """``<progress>.lock``: there only while a process holds the run (``base.runlock``)."""
    p = Path(progress)
    return p.with_name(p.name + ".lock")


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


# --- reading ---------------------------------------------------------------------------------


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


def entry_to_dict(entry: Entry) -> dict[str, Any]:
    """An entry as a compact JSON-ready dict (the journal's form)."""
    out: dict[str, Any] = {"id": entry.id, "role": entry.role, "content": entry.content}
    for key in ("step", "call_id", "tool", "sidecar", "sidecar_sha256", "sidecar_bytes"):
        value = getattr(entry, key)
        if value is not None:
            out[key] = value
    if entry.is_error:
        out["is_error"] = True
    if entry.covers is not None:
        out["covers"] = list(entry.covers)
    if entry.meta is not None:
        # One string in the marker's form: the journal grows with the payload, not the keys.
        out["meta"] = " ".join(f"{k}={marker_value(v)}" for k, v in entry.meta.fields())
    return out


def _meta_from_text(text: str) -> EntryMeta:
    """An entry's meta from its journal form (``entry_to_dict``)."""
    pairs = {}
    for token in text.split():
        key, _, value = token.partition("=")
        pairs[key] = unquote(value, errors="surrogatepass")
    return meta_from_fields(pairs)


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
        covers=(int(data["covers"][0]), int(data["covers"][1])) if data.get("covers") else None,
        meta=_meta_from_text(data["meta"]) if data.get("meta") else None,
    )


def replay(
    run: Run,
    digests: list[str],
    chain: Chain,
    events: list[journal.Event],
    path: Path,
    report: LoadReport,
    *,
    live: bool = False,
) -> Run:
    """Apply the journal ``events`` newer than the file to ``run``; return the resulting run.

    ``digests`` are the stored digests of ``run.transcript`` and ``chain`` the chain over them;
    both are extended in place. Each event patches the front matter state before it, starting
    from the front matter of the file itself.
    """
    pending = [e for e in events if e.seq > run.journal_seq]
    if not pending:
        return run
    hint_live = (
        "The run is live: leave its files alone and read it again in a moment."
        if live
        else "Move the journal aside to resume from the checkpoint in progress.md."
    )
    if pending[0].whole is None and pending[0].seq != run.journal_seq + 1:
        raise DigestError(
            f"journal event {pending[0].seq} follows event {pending[0].seq - 1}, but the file "
            f"was folded at event {run.journal_seq}: the journal does not continue this file.",
            path=path,
            line=pending[0].line,
            column=1,
            hint=hint_live,
        )
    transcript = run.transcript
    state = front_matter(run, entries=len(transcript), digest=chain.root())
    for event in pending:
        for data in event.entries:
            try:
                entry = entry_from_dict(data)
            except (KeyError, TypeError, ValueError):
                raise journal.journal_error(
                    path, event.line, "an entry in this journal event is damaged.", live=live
                ) from None
            if entry.id != len(transcript) + 1:
                raise DigestError(
                    f"journal event {event.seq} adds entry {entry.id}, but the transcript has "
                    f"{len(transcript)} entries: the journal does not continue this file.",
                    path=path,
                    line=event.line,
                    column=1,
                    hint=hint_live,
                )
            digest = entry_digest(entry)
            transcript.append(entry)
            digests.append(digest)
            chain.add(entry.id, digest)
        if event.whole is not None:
            # A version 1 journal (an older flow's): its whole front matter, upgraded.
            state = upgrade_front_matter(dict(event.whole))
            continue
        try:
            journal.apply(state, event.sets, event.deletes)
        except journal.PatchError as error:
            raise journal.journal_error(
                path,
                event.line,
                f"journal event {event.seq} changes the front matter in a way that does not "
                f"fit the state before it: {error}.",
                live=live,
            ) from None
    last = pending[-1]
    if last.format < FORMAT_VERSION:
        # An older flow's events patched the state as its format writes it: upgrade the
        # result as that flow's file would be (the upgrades are safe to run again).
        state = upgrade_front_matter({**state, "flow_progress": last.format})
    result = read_front_matter(state, path=path, context=f"journal event {last.seq}: ")
    recorded = state["transcript"]
    if recorded["entries"] != len(transcript) or recorded["digest"] != chain.root():
        raise DigestError(
            f"journal event {last.seq} records a transcript that does not match the entries "
            "before it: the journal or the file was altered.",
            path=path,
            line=last.line,
            column=1,
            hint=hint_live,
        )
    result.transcript = transcript
    result.journal_seq = last.seq
    report.replayed_events = len(pending)
    return result


def _locate(data: bytes, entry_id: int) -> int | None:
    marker = b"\n<!-- flow:entry %d " % entry_id
    found = data.find(marker)
    return None if found == -1 else data.count(b"\n", 0, found) + 2


@dataclass
class _Loaded:
    run: Run
    report: LoadReport
    #: The chain over the stored digests of the whole transcript (file and journal).
    chain: Chain
    has_journal: bool
    #: The file's bytes, and where its entries' blocks start and end (``Parsed.entry_spans``).
    data: bytes = b""
    spans: list[int] = field(default_factory=list)
    #: The stored digests of the whole transcript, and the digests of the file's entries as
    #: read (they differ for an entry edited by hand).
    digests: list[str] = field(default_factory=list)
    actual: list[str] = field(default_factory=list)


def _load(path: Path, *, verify_sidecars: bool = True, live: bool = False) -> _Loaded:
    """Load + replay a progress file.

    The journal is read before the file. A fold writes the file before it drops the journal,
    so whatever a live writer does in between, the file read second is the one the journal
    continues, or a later one that already holds every event read (they are then skipped).
    """
    jpath = journal_path(path)
    raw_journal = journal.read_raw(jpath, MAX_JOURNAL_BYTES)
    data = read_bytes(path)
    parsed = parse_bytes(data, path=path, decode=lambda raw: decode_text(raw, path))
    run, report, digests, chain = parsed.run, parsed.report, parsed.stored_digests, parsed.chain
    has_journal = raw_journal is not None
    if raw_journal is not None:
        events = journal.parse_events(raw_journal, jpath, run.run_id, report, live=live)
        run = replay(run, digests, chain, events, jpath, report, live=live)
    if verify_sidecars and any(map(_sidecar_of, run.transcript)):
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
    return _Loaded(
        run, report, chain, has_journal, data, parsed.entry_spans, digests, parsed.actual_digests
    )


#: How often a reader retries a live run whose files changed under it while it read them.
_READ_RETRIES = 5


def load_progress(path: str | Path) -> tuple[Run, LoadReport]:
    """Load a progress file: parse, replay its journal, verify sidecars. Never writes.

    A run with a live writer is read as a consistent snapshot; should its files still change
    mid-read in a way that does not fit together, the read is retried before any error.
    """
    p = progress_file(path)
    live = owner_alive(p)
    for attempt in range(_READ_RETRIES):
        try:
            with collector.long_lived():  # a long run's entries: many objects, no cycles
                loaded = _load(p, live=live)
            return loaded.run, loaded.report
        except (ProgressFormatError, DigestError, SidecarError):
            if not live or attempt == _READ_RETRIES - 1:
                raise
            time.sleep(0.02 * (attempt + 1))
            live = owner_alive(p)
    raise AssertionError("unreachable")


def validate_file(path: str | Path) -> LoadReport:
    """Check a progress file completely (``flow validate``); raise the first problem found."""
    return load_progress(path)[1]


# --- the writer ------------------------------------------------------------------------------


def _read_owner(path: Path, wait: float = 1.0) -> dict[str, Any]:
    """The lock owner's pid, host and start time. A process that has just taken the lock
    writes them a moment later, so a missing or half-written file is read again for a while."""
    deadline = time.monotonic() + wait
    while True:
        owner = read_owner(path)
        if owner:
            return owner
        if time.monotonic() >= deadline:
            return {}
        time.sleep(0.02)


def take_lock(path: Path) -> RunLock:
    """Take the run's lock without waiting, or ``RunLockedError`` naming the owner (exit 6)."""
    # A lock that came with the run as a link to someone's file is refused, never followed.
    refuse_special(lock_path(path), what="lock file")
    refuse_special(owner_path(path), what="owner file")
    lock = RunLock(lock_path(path))
    try:
        lock.acquire()
    except LockHeld:
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
        # The lock file lives beside the progress file: a folder that cannot be written
        # cannot hold a live run either.
        raise storage_error(error, path, "take the run's lock", resumable=False) from None
    return lock


def clean_leftovers(path: Path) -> None:
    """Remove the temp files a crashed writer of ``path`` left (only while holding its lock)."""
    prefix = f".{path.name}."
    with contextlib.suppress(OSError):
        for item in path.parent.iterdir():
            if item.name.startswith(prefix) and item.name.endswith(".tmp"):
                item.unlink()
    # Half-written sidecars (``.<name>.<pid>.tmp``) left in the sidecar folder; never
    # through a symlink, which could point anywhere.
    sidecars = path.parent / folder_name(path)
    if sidecars.is_symlink():
        return
    with contextlib.suppress(OSError):
        for item in sidecars.iterdir():
            if item.name.startswith(".") and item.name.endswith(".tmp"):
                item.unlink()


class ProgressStore:
    """The single live writer of one progress file (holds its lock until ``close``)."""

    def __init__(self, path: Path, lock: RunLock) -> None:
        self.path = path
        self._lock = lock
        self._journal_fd: int | None = None
        self._journal_size = 0
        self._seq = 0
        self._count = 0
        self._chain = Chain()
        self._last_data: bytes | None = None
        #: The front matter as of the last event or fold: the base of the next event's delta.
        self._fm: dict[str, Any] = {}
        #: Bytes of progress.md as last written.
        self._file_size = 0
        #: The leading entries of the file as opened, whose blocks the first fold may copy.
        self._file_blocks = _Places()
        #: The entries of the file as this store last wrote it, whose blocks later folds copy.
        self._written = _Places()
        #: Digest and rendered block of each entry rendered at the last fold, by its fields.
        self._rendered: dict[tuple[Any, ...], tuple[str, str]] = {}
        self._closed = False
        #: The owner record this process wrote (None until it took the run).
        self._owner: dict[str, Any] | None = None
        #: Where every durable write is also sent (a batch row on a Ray node, ``mirror``),
        #: with this file's path there; None for a run that keeps its files here only.
        self._mirror = mirror_for(path)
        #: Seconds a model request lasts before the owner record says it is in flight.
        self.note_delay = REQUEST_NOTE_DELAY
        #: What notes the request in flight in the owner record (made on the first request).
        self._notes: RequestNotes | None = None

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
            make_folder(p.parent)
        except OSError as error:
            raise storage_error(error, p, "create the run's folder", resumable=False) from None
        lock = take_lock(p)
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
        p = progress_file(path)
        if not p.exists():
            raise FileNotFoundFlowError(f"no progress file at {p}.", path=p)
        lock = take_lock(p)
        store = cls(p, lock)
        try:
            store._write_owner()
            store._clean_leftovers()
            with collector.long_lived():  # a long run's entries: many objects, no cycles
                loaded = _load(p)
                run, report, chain = loaded.run, loaded.report, loaded.chain
                if run.kept is not None and flow_is_older_than(run.kept.min_flow):
                    raise min_flow_error(run.kept.min_flow, path=str(p))
                store._seed_rendered(run.transcript, loaded)
            store._seq = run.journal_seq
            store._count = len(run.transcript)
            store._chain = chain
            store._fm = front_matter(run, entries=len(run.transcript), digest=chain.root())
            with contextlib.suppress(OSError):
                store._file_size = p.stat().st_size
            if report.replayed_events:
                # Fold what the crash left in the journal so the file shows it again.
                store.checkpoint(run)
            elif loaded.has_journal:
                # Already folded (a crash between the rename and the unlink): just drop it.
                os.unlink(journal_path(p))
                store._send("drop")
        except BaseException:
            store.close()
            raise
        return store, run, report

    def close(self) -> None:
        """Release the lock (does not checkpoint: call ``checkpoint`` first to fold)."""
        if self._closed:
            return
        self._closed = True
        if self._notes is not None:
            self._notes.close()
        if self._journal_fd is not None:
            os.close(self._journal_fd)
            self._journal_fd = None
        with contextlib.suppress(OSError, SpecialFileError):
            if read_owner(self.path).get("pid") == os.getpid():
                os.unlink(owner_path(self.path))
        # The lock file goes too (while still held): none is left for `git add -A` to commit.
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

    def note_request(self, request: dict[str, Any] | None) -> None:
        """Say in the owner record which model request is in flight, and since when (None:
        none), once it has lasted ``note_delay`` seconds (``owner.RequestNotes``); a record
        that cannot be written only leaves readers knowing less."""
        if self._owner is None:
            return
        if self._notes is None:
            owner = self._owner
            self._notes = RequestNotes(
                lambda note: note_request(self.path, owner, note), self.note_delay
            )
        self._notes.delay = self.note_delay
        self._notes.note(request)

    def _write_owner(self) -> None:
        try:
            self._owner = write_owner(self.path)
        except OSError as error:
            raise storage_error(
                error, self.path, "record the run's owner", resumable=False
            ) from None

    def _clean_leftovers(self) -> None:
        clean_leftovers(self.path)

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
        digests = [entry_digest(entry) for entry in new_entries]
        for entry, digest in zip(new_entries, digests, strict=True):
            chain.add(entry.id, digest)
        fm = front_matter(run, entries=len(transcript), digest=chain.root())
        sets, deletes = journal.diff(self._fm, fm)
        seq = self._seq + 1
        line = journal.event_line(seq, sets, deletes, [entry_to_dict(e) for e in new_entries])
        self._append(line, run.run_id)
        self._seq = seq
        self._count = len(transcript)
        self._chain = chain
        self._fm = fm
        # Render the new entries' blocks now, once the event is durable, for the next fold
        # to reuse: rendered all at once, a mid-step fold at 29,000 entries rendered the
        # 10,000 written since the last one, a lump of ~60 ms in one turn of a long run.
        for entry, digest in zip(new_entries, digests, strict=True):
            self._rendered[_render_key(entry)] = (digest, entry_block(entry, digest))
        if self._journal_size > self._fold_at():
            # Fold early, mid-step if need be: a run's own journal must never near the limit
            # meant for files flow did not write.
            self.checkpoint(run)

    def _fold_at(self) -> int:
        """Journal size that triggers a fold: at least the file's own size (so each fold
        rewrites no more bytes than the journal grew by), within a quarter of the limit."""
        return min(max(FOLD_JOURNAL_BYTES, self._file_size), MAX_JOURNAL_BYTES // 4)

    def _append(self, data: bytes, run_id: str) -> None:
        try:
            self._append_raw(data, run_id)
        except OSError as error:
            raise storage_error(error, self.path, "append an event to the run's journal") from None

    def _append_raw(self, data: bytes, run_id: str) -> None:
        jpath = journal_path(self.path)
        if self._journal_fd is None:
            fd = open_append(jpath, what="journal")
            self._journal_size = os.fstat(fd).st_size
            if self._journal_size == 0:
                data = journal.header_line(run_id) + data
                new_file = True
            else:
                new_file = False
            self._journal_fd = fd
        else:
            new_file = False
        fd = self._journal_fd
        faults.point("store.journal_before_append")
        try:
            append_at(
                fd,
                data,
                self._journal_size,
                after_write=lambda: faults.point("store.journal_after_append"),
            )
            try:
                # Durable here; durable at the mirror's end too before the run goes on.
                self._send("append", data, offset=self._journal_size)
            except BaseException:
                # An event the other end did not confirm is taken back here too.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, self._journal_size)
                raise
        except BaseException:
            # ``append_at`` left no partial or unconfirmed line behind for the next append to
            # glue onto; a new journal gets its header again.
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
        transcript = run.transcript
        kept, chunk, places = self._unchanged_prefix(transcript)
        digests, blocks = self._render_entries(transcript[kept:])
        digests = places.digests[:kept] + digests
        chain = Chain(zip((e.id for e in transcript), digests, strict=True))
        run.journal_seq = self._seq
        fm = written_front_matter(
            run,
            entries=len(transcript),
            digest=chain.root(),
            path=self.path,
            context="refusing to write an invalid checkpoint (a bug in the caller): ",
        )
        head = document_head(run, fm).encode("utf-8", "surrogatepass")
        rendered = [block.encode("utf-8", "surrogatepass") for block in blocks]
        data = b"".join(
            [head, chunk, *rendered, document_tail(run).encode("utf-8", "surrogatepass")]
        )
        wrote = (
            data != self._last_data
            or self._journal_fd is not None
            or journal_path(self.path).exists()
        )
        if wrote:
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
                write_checkpoint(self.path, data)
            except OSError as error:
                raise storage_error(error, self.path, "write the checkpoint") from None
            self._last_data = data
            self._file_size = len(data)
        # Where each entry's block now is: the copied ones moved by the new head's length.
        shift = len(head) - (places.offsets[0] if kept else 0)
        offsets = [start + shift for start in places.offsets[:kept]]
        at = len(head) + len(chunk)
        for block in rendered:
            offsets.append(at)
            at += len(block)
        offsets.append(at)
        keys = places.keys[:kept] + [_render_key(e) for e in transcript[kept:]]
        self._written = _Places(keys, digests, offsets, _stamp(self.path))
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
        if wrote:
            try:
                self._send("fold", data)
            except OSError as error:
                raise storage_error(error, self.path, "write the checkpoint") from None
        self._count = len(transcript)
        self._chain = chain
        self._fm = fm

    def _seed_rendered(self, transcript: list[Entry], loaded: _Loaded) -> None:
        """Remember where the leading entries just read from the file are, so the first fold
        copies their blocks instead of rendering every entry again: the entries read straight
        from the bytes (``Parsed.entry_spans``) up to the first edited by hand. Only their
        places and fields are kept (the bytes are read again at the fold), so opening a long
        run costs no memory for it."""
        spans, stored, actual = loaded.spans, loaded.digests, loaded.actual
        count = max(0, min(len(spans) - 1, len(transcript), len(actual)))
        unedited = (
            count
            if actual[:count] == stored[:count]  # the usual case, compared at C speed
            else next(i for i in range(count) if actual[i] != stored[i])
        )
        self._file_blocks = _Places(
            list(map(_render_key, transcript[:unedited])),
            stored[:unedited],
            spans[: unedited + 1],
            _stamp(self.path),
        )

    def _unchanged_prefix(self, transcript: list[Entry]) -> tuple[int, bytes, _Places]:
        """How many leading entries of ``transcript`` are unchanged in progress.md as it is, the
        bytes of their blocks, and the places they were found in. None (0) if the file changed
        since it was read or written here, or if this version renders the first and last of
        them differently (a file from an older renderer is rendered afresh)."""
        places = self._file_blocks or self._written
        self._file_blocks = _Places()
        keys = places.keys
        kept, limit = 0, min(len(keys), len(transcript))
        while kept < limit and _render_key(transcript[kept]) == keys[kept]:
            kept += 1
        none = (0, b"", places)
        if not kept or _stamp(self.path) != places.stamp:
            return none
        start = places.offsets[0]
        try:
            with open(self.path, "rb") as handle:
                handle.seek(start)
                chunk = handle.read(places.offsets[kept] - start)
        except OSError:
            return none
        if len(chunk) != places.offsets[kept] - start:
            return none
        for i in {0, kept - 1}:
            block = chunk[places.offsets[i] - start : places.offsets[i + 1] - start]
            if (
                entry_block(transcript[i], places.digests[i]).encode("utf-8", "surrogatepass")
                != block
            ):
                return none
        return kept, chunk, places

    def _render_entries(self, transcript: list[Entry]) -> tuple[list[str], list[str]]:
        """Each entry's digest and ``entry_block``, reusing those of the entries unchanged since
        the last fold: a long run folds at every step boundary, and re-rendering thousands of
        entries that did not change would make each fold cost as much as the first."""
        known = self._rendered
        fresh: dict[tuple[Any, ...], tuple[str, str]] = {}
        digests: list[str] = []
        blocks: list[str] = []
        for e in transcript:
            key = _render_key(e)
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
            link, digest = write_sidecar(self.path, name_hint, data)
            self._send("sidecar", data, link=link)
        except OSError as error:
            raise storage_error(error, self.path, "write a sidecar file") from None
        return link, digest

    def _send(self, kind: OpKind, data: bytes = b"", *, offset: int = 0, link: str = "") -> None:
        """Hand a write that is durable here to the mirror, if one is attached (raises
        ``MirrorError``, an OSError, when the other end did not take it)."""
        if self._mirror is not None:
            mirror, rel = self._mirror
            mirror.send(MirrorOp(kind, rel, data, offset=offset, link=link))

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


@dataclass
class _Places:
    """Where entries' blocks are in progress.md: each entry's render key and stored digest,
    the byte offset of each block (then where the last ends), and the file's (size, mtime)
    then. The fold copies the blocks of the leading entries that did not change as one byte
    range instead of rendering them again."""

    keys: list[tuple[Any, ...]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    stamp: tuple[int, int] | None = None

    def __len__(self) -> int:
        return len(self.keys)


def _stamp(path: Path) -> tuple[int, int] | None:
    """The file's (size, mtime), None if it cannot be read."""
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


#: Every field the digest and the block depend on, so an entry changed in place (an accepted
#: hand edit, say) misses and is rendered again. One C call per entry: a fold compares the key
#: of every entry it copies, so at 30,000 entries a Python function here cost ~15 ms a fold.
_sidecar_of: Callable[[Entry], str | None] = operator.attrgetter("sidecar")
_fields_key: Callable[[Entry], tuple[Any, ...]] = operator.attrgetter(
    "id",
    "role",
    "content",
    "step",
    "call_id",
    "tool",
    "is_error",
    "sidecar",
    "sidecar_sha256",
    "sidecar_bytes",
    "covers",
)


def _render_key(entry: Entry) -> tuple[Any, ...]:
    """What an entry's rendered block depends on; its metadata as ``meta_key`` (a long run's
    entries just read keep theirs unread)."""
    return (*_fields_key(entry), meta_key(entry))
