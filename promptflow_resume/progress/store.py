"""Durable storage of one run: atomic rewrites, an append-only journal, a lock, sidecars.

One live writer owns a progress file through ``ProgressStore``. Each event (a model reply, a
tool call's start or result, a status change) is one fsync'd line appended to
``<progress>.journal``: the new transcript entries plus the front matter fields that changed
(see ``journal``), so the cost and size of an event do not grow with the run. ``checkpoint``
folds everything into ``progress.md`` with an atomic rewrite (temp file, fsync, rename, fsync
the folder) and drops the journal; that happens at step boundaries, on exit, and whenever the
journal grows past ``FOLD_JOURNAL_BYTES`` (so flow's own journal never nears ``MAX_JOURNAL_BYTES``).
Loading (``loading``) replays a journal left by a crash (``journalreplay``). Readers
(``load_progress``, ``validate_file``) never modify anything, and see a consistent snapshot of a
live run: they read the journal before the file, and a fold writes the file before it drops the
journal. The file's limits, reads and atomic writes are ``diskio``'s, the run's lock
``locking``'s::

    store = ProgressStore.create(".flow/runs/r1/progress.md", run)
    run.transcript.append(entry); store.save(run, [entry])   # O(1), durable
    store.checkpoint(run)                                     # fold into progress.md
    store.close()

    run, report = load_progress(".flow/runs/r1/progress.md")
"""

from __future__ import annotations

import contextlib
import operator
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from ..base import collector, faults
from ..base.durable import append_at, fsync_dir
from ..base.errors import (
    FileNotFoundFlowError,
    InputError,
    ProgressFormatError,
    SidecarError,
    SpecialFileError,
    StorageError,
)
from ..base.runlock import RunLock
from ..base.safeopen import open_append
from ..flowfolder import make_folder
from . import journal
from .digest import Chain, entry_digest
from .diskio import MAX_FILE_BYTES, MAX_JOURNAL_BYTES, storage_error, write_checkpoint
from .entry import meta_key
from .frontmatter import front_matter, written_front_matter
from .journal import journal_path
from .journalreplay import entry_to_dict
from .loading import Loaded, load
from .location import progress_file
from .locking import clean_leftovers, take_lock
from .mirror import MirrorOp, OpKind, mirror_for
from .model import Entry, LoadReport, Run
from .owner import (
    REQUEST_NOTE_DELAY,
    RequestNotes,
    note_request,
    owner_path,
    read_owner,
    write_owner,
)
from .render import document_head, document_tail, entry_block
from .sidecar import read_checked, write_sidecar
from .versions import flow_is_older_than, min_flow_error

JOURNAL_VERSION = journal.JOURNAL_VERSION
#: A journal this large is folded into progress.md at the next event, even mid-step: far below
#: ``MAX_JOURNAL_BYTES``, and large enough that folds stay rare (one per thousands of events).
FOLD_JOURNAL_BYTES = 4 * 1024 * 1024


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
                loaded = load(p)
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

    def _seed_rendered(self, transcript: list[Entry], loaded: Loaded) -> None:
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
